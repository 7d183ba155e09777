"""What a run's objective trains: BERT with its heads (masked LM, and a pair head), or ELECTRA's generator and
discriminator.
"""

from __future__ import annotations

from torch import nn

from ..model.bert import BertForPreTraining, init_residual_outputs
from ..model.config import ModelConfig
from ..model.electra import ElectraForPreTraining
from .config import TrainConfig


def pretraining_model(model_config: ModelConfig, cfg: TrainConfig, pooler: bool = False) -> nn.Module:
    """The model `cfg.objective` trains: BERT with its heads (a pair head only for a pair objective: no head that
    never trains is saved; a pooler for it, or one a released encoder had, kept as it was), or ELECTRA's generator
    and discriminator, initialised as `cfg.residual_init` says."""
    if cfg.token_task.discriminator:
        model = ElectraForPreTraining(model_config, cfg.generator_layers, cfg.rtd_weight, cfg.generator_temperature)
    else:
        model = BertForPreTraining(model_config, pair_head=cfg.pair_task.head, pooler=pooler or None)
    init_residual_outputs(model, cfg.residual_init)
    return model
