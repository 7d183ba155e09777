"""ELECTRA's replaced-token detection (Clark et al. 2020), the pre-training objective beside BERT's MLM.

    masked input ─► generator (a small BERT MLM) ─► a sampled token at each masked position ─► corrupted input
    corrupted input ─► discriminator (the encoder that is kept) ─► for every token: original or replaced?

MLM learns from the 15% of tokens that are masked; the discriminator learns from
every token, which is the paper's reason it learns more per unit of compute.
Generator and discriminator share their embeddings, and the generator is shallow
(same width, fewer layers), so that its guesses are plausible but not too good.
No gradient flows through the sampling: the loss is the generator's MLM loss +
rtd_weight × the discriminator's (the paper's 50).

Saved as two model directories: the discriminator where a model usually goes
(what `finetune` and `score` read), and the generator, an ordinary MLM model
that `fill-mask` and `evaluate` read, in its `generator/` subdirectory.
"""

from __future__ import annotations

import dataclasses

import torch
import torch.nn.functional as F
from torch import nn

from ..families import encoder_has_pooler
from ..labels import IGNORE_INDEX
from .bert import BertForPreTraining, BertModel, PreTrainingOutput, activation, init_weights
from .config import ModelConfig

GENERATOR_DIR = "generator"  # inside the discriminator's model directory


class ReplacedTokenHead(nn.Module):
    """ELECTRA's discriminator head: dense -> activation -> one logit per token, > 0 meaning "replaced"."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.act = activation(config)
        self.prediction = nn.Linear(config.hidden_size, 1)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.prediction(self.act(self.dense(hidden))).squeeze(-1)  # (B, T, H) -> (B, T)


class BertForReplacedTokenDetection(nn.Module):
    """ELECTRA's discriminator (Clark et al. 2020): the encoder, and for every token whether it was replaced.

    The encoder is what fine-tuning keeps. Its pooler is not trained (no pair
    objective), as in any MLM-only model; fine-tuning trains it with the classifier.
    """

    hf_architecture = "BertForReplacedTokenDetection"

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        self.bert = BertModel(config, pooler=encoder_has_pooler(config))
        self.rtd_head = ReplacedTokenHead(config)
        self.apply(lambda module: init_weights(module, config))

    def forward(self, input_ids, token_type_ids=None, attention_mask=None, document_ids=None) -> torch.Tensor:
        """Logits (B, T): > 0 where the token is judged replaced."""
        encoded = self.bert(input_ids, token_type_ids, attention_mask, document_ids=document_ids)
        return self.rtd_head(encoded.sequence_output)


class ElectraForPreTraining(nn.Module):
    """A generator and a discriminator trained together; `config` is the discriminator's."""

    def __init__(
        self, config: ModelConfig, generator_layers: int = 1, rtd_weight: float = 50.0, temperature: float = 1.0
    ):
        super().__init__()
        self.config = config
        self.rtd_weight = rtd_weight
        self.temperature = temperature
        self.discriminator = BertForReplacedTokenDetection(config)
        self.generator = BertForPreTraining(dataclasses.replace(config, num_layers=generator_layers))
        shared = self.discriminator.bert.embeddings  # token, segment and position tables, and their LayerNorm
        self.generator.bert.embeddings = shared
        if config.tie_word_embeddings:
            self.generator.mlm_head.decoder_weight = shared.token.weight

    @property
    def saved_parts(self) -> dict[str, tuple[nn.Module, dict[str, str]]]:
        """subdirectory -> (model, what it was pre-trained for): how `directory.py` writes and reads this model."""
        return {
            "": (self.discriminator, {"objective": "electra", "generator": GENERATOR_DIR}),
            GENERATOR_DIR: (self.generator, {"objective": "mlm"}),
        }

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        mlm_labels: torch.Tensor | None = None,
        nsp_labels: torch.Tensor | None = None,
        document_ids: torch.Tensor | None = None,
        sampling_draws: torch.Tensor | None = None,
    ) -> PreTrainingOutput:
        """input_ids etc. (B, T) as for BertForPreTraining; mlm_labels are required (they say what was masked).
        sampling_draws (B, T): a uniform number per position by which the generator's token there is drawn (the
        collator's, seeded per instance); without them, torch's generator draws.

        The MLM fields of the output are the generator's; loss = mlm_loss + rtd_weight × rtd_loss.
        """
        if mlm_labels is None or nsp_labels is not None:
            raise ValueError("ELECTRA trains on masked positions (mlm_labels) and has no pair objective")
        generated = self.generator(
            input_ids, token_type_ids, attention_mask, mlm_labels, None, document_ids, keep_logits=True
        )
        masked = mlm_labels != IGNORE_INDEX  # (B, T)
        with torch.no_grad():
            original = torch.where(masked, mlm_labels, input_ids)  # (B, T): the text before masking
            uniform = sampling_draws[masked] if sampling_draws is not None else None  # (N,)
            sampled = sample(generated.mlm_logits.float() / self.temperature, uniform)  # (N,)
            corrupted = original.masked_scatter(masked, sampled)  # (B, T); row-major, the order of the N rows
            replaced = corrupted != original  # (B, T): a sample equal to the original counts as original
        logits = self.discriminator(corrupted, token_type_ids, attention_mask, document_ids)  # (B, T)
        real = torch.ones_like(masked) if attention_mask is None else attention_mask.bool()  # (B, T)
        rtd_loss = F.binary_cross_entropy_with_logits(logits[real].float(), replaced[real].float())
        return dataclasses.replace(
            generated,
            loss=generated.mlm_loss + self.rtd_weight * rtd_loss,
            rtd_loss=rtd_loss,
            rtd_correct=((logits > 0) == replaced)[real].sum(),
            rtd_tokens=real.sum(),
        )


def sample(logits: torch.Tensor, uniform: torch.Tensor | None = None) -> torch.Tensor:
    """One token per row of logits (N, V), drawn from its softmax: (N,).

    By the inverse of the cumulative distribution: one uniform number per row (`uniform` (N,) in [0, 1), or
    torch's), where torch.multinomial draws one per row and column (V of them) and took 40% of a CPU step.
    """
    cdf = logits.float().softmax(-1).cumsum(-1)  # (N, V), the last column ~1
    if uniform is None:
        uniform = torch.rand(len(cdf), device=cdf.device)
    threshold = uniform.to(cdf.device, cdf.dtype).unsqueeze(1) * cdf[:, -1:]  # (N, 1)
    return torch.searchsorted(cdf, threshold).squeeze(1).clamp_max(logits.shape[-1] - 1)  # (N,)
