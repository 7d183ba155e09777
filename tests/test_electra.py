"""ELECTRA's replaced-token detection: the sampling, the corrupted input and its labels, what the losses reach,
a run end to end with exact resume, and the discriminator in `transformers`."""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F

from bertforge.errors import UserError
from bertforge.model.config import ModelConfig
from bertforge.model.electra import GENERATOR_DIR, BertForReplacedTokenDetection, ElectraForPreTraining, sample
from bertforge.model.heads import BertForSequenceClassification
from bertforge.modelfiles.directory import load_model, save_model
from bertforge.training.config import TrainConfig

from conftest import (
    TINY_MODEL,
    TINY_RUN,
    assert_same_steps,
    bertforge,
    bertforge_ok,
    needs,
    one_line_error,
    prepared_data,
    randomised,
    resumed_twin,
    train_metrics,
)

ELECTRA = [*TINY_MODEL, *TINY_RUN, "--batch-size", "8", "--eval-batches", "2", "--recipe", "budget"]
ELECTRA += ["--attention-bias", "none", "--objective", "electra", "--hidden-dropout", "0.1"]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return prepared_data(tmp_path_factory.mktemp("electra"), seed=7)


def tiny_electra(seed: int = 0, **variant) -> ElectraForPreTraining:
    torch.manual_seed(seed)
    config = ModelConfig(vocab_size=60, hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64, **variant)
    return ElectraForPreTraining(config, generator_layers=1)


def masked_batch(vocab: int = 60, seed: int = 1):
    """Padded (B, T) ids with about 30% of the real positions labelled, the rest -100."""
    g = torch.Generator().manual_seed(seed)
    B, T = 4, 16
    input_ids = torch.randint(5, vocab, (B, T), generator=g)
    attention_mask = torch.ones(B, T, dtype=torch.long)
    attention_mask[1, 10:] = 0
    attention_mask[3, 6:] = 0
    input_ids[attention_mask == 0] = 0
    labels = torch.full((B, T), -100)
    chosen = (torch.rand(B, T, generator=g) < 0.3) & (attention_mask == 1)
    labels[chosen] = input_ids[chosen]
    input_ids[chosen] = 4  # [MASK]
    return input_ids, attention_mask, labels


def test_sampling_draws_from_the_generators_distribution():
    """One draw per row by the inverse CDF: frequencies match the softmax, and a certain token is always drawn."""
    torch.manual_seed(0)
    logits = torch.tensor([0.0, 1.0, 2.0, -1.0, -30.0]).repeat(100_000, 1)
    drawn = sample(logits)
    frequencies = torch.bincount(drawn, minlength=5) / len(drawn)
    torch.testing.assert_close(frequencies, logits[0].softmax(-1), atol=0.005, rtol=0)
    certain = torch.full((50, 7), -float("inf"))
    certain[:, 6] = 0.0  # the last column: the one the clamp guards
    assert sample(certain).tolist() == [6] * 50


def test_the_discriminator_sees_the_text_with_samples_at_the_masked_positions_and_learns_which_were_replaced():
    model = tiny_electra()
    input_ids, attention_mask, labels = masked_batch()
    seen = {}
    model.discriminator.register_forward_hook(lambda module, args, logits: seen.update(ids=args[0], logits=logits))
    torch.manual_seed(3)
    out = model(input_ids, None, attention_mask, labels)
    corrupted, logits = seen["ids"], seen["logits"]
    masked = labels != -100
    original = torch.where(masked, labels, input_ids)
    assert torch.equal(corrupted[~masked], original[~masked])  # unmasked text is untouched: no [MASK] left
    assert not (corrupted == 4).any()
    replaced = corrupted != original
    assert replaced.any() and not replaced[~masked].any()  # a random generator replaces most masked tokens
    real = attention_mask.bool()
    expected = F.binary_cross_entropy_with_logits(logits[real], replaced[real].float())
    torch.testing.assert_close(out.rtd_loss, expected)
    assert int(out.rtd_tokens) == int(real.sum())
    assert int(out.rtd_correct) == int(((logits > 0) == replaced)[real].sum())
    torch.testing.assert_close(out.loss, out.mlm_loss + 50.0 * out.rtd_loss)
    assert out.mlm_logits.shape == (int(masked.sum()), 60)  # the generator's predictions, one per masked token


def test_a_generator_temperature_divides_the_logits_it_samples_from(monkeypatch):
    import bertforge.model.electra

    model = tiny_electra()
    model.temperature = 2.0
    drawn_from = []
    monkeypatch.setattr(
        bertforge.model.electra,
        "sample",
        lambda logits, uniform=None: drawn_from.append(logits) or sample(logits, uniform),
    )
    input_ids, attention_mask, labels = masked_batch()
    out = model(input_ids, None, attention_mask, labels)
    torch.testing.assert_close(drawn_from[0], out.mlm_logits.float() / 2.0)


def test_embeddings_are_shared_and_no_gradient_crosses_the_sampling():
    """The discriminator's loss trains its encoder and the shared embeddings, never the generator's own layers;
    the generator's MLM loss never reaches the discriminator's layers."""
    model = tiny_electra()
    shared = model.discriminator.bert.embeddings
    assert model.generator.bert.embeddings is shared
    assert model.generator.mlm_head.decoder_weight is shared.token.weight
    input_ids, attention_mask, labels = masked_batch()

    def grads(loss_of):
        model.zero_grad(set_to_none=True)
        loss_of(model(input_ids, None, attention_mask, labels)).backward()
        return {name: p.grad for name, p in model.named_parameters()}

    from_rtd = grads(lambda out: out.rtd_loss)
    assert all(from_rtd[n] is None for n in from_rtd if n.startswith("generator.bert.layers."))
    assert from_rtd["discriminator.bert.layers.0.ffn.up.weight"].abs().sum() > 0
    assert from_rtd["discriminator.bert.embeddings.token.weight"].abs().sum() > 0
    from_mlm = grads(lambda out: out.mlm_loss)
    assert all(from_mlm[n] is None for n in from_mlm if n.startswith("discriminator.bert.layers."))
    assert from_mlm["discriminator.rtd_head.dense.weight"] is None
    assert from_mlm["generator.bert.layers.0.ffn.up.weight"].abs().sum() > 0


def test_electra_has_no_pair_objective():
    with pytest.raises(UserError, match="pair-objective none"):
        TrainConfig(objective="electra", pair_objective="nsp")


def test_an_electra_run_saves_both_models_each_command_reads_the_right_one_and_resume_is_exact(workdir):
    """16 steps in one go == 8, then a resumed 8 (the sampling's random state is restored with the rest); the run
    leaves the discriminator where a model goes and the generator in generator/."""
    full = workdir / "full"
    common = ["--save-every", "8", "--keep-last", "5", "--eval-every", "0", "--log-every", "2"]
    bertforge_ok("pretrain", "--data", workdir / "data", "--out", full, *ELECTRA, "--max-steps", "16", *common)
    model_dir = full / "model"
    assert (model_dir / "model.safetensors").is_file() and (model_dir / GENERATOR_DIR / "model.safetensors").is_file()
    assert all(0.0 <= r["rtd_acc"] <= 1.0 and r["rtd_loss"] > 0 for r in train_metrics(full))
    assert "rtd_acc" in train_metrics(full, "valid")[-1]
    # The discriminator is what fine-tuning reads; its encoder comes back whole, only the classifier is new.
    classifier = load_model(BertForSequenceClassification, model_dir, num_labels=2)
    discriminator = load_model(BertForReplacedTokenDetection, model_dir)
    for name, tensor in discriminator.bert.state_dict().items():
        torch.testing.assert_close(classifier.bert.state_dict()[name], tensor)
    # Filling in blanks is the generator's job: the discriminator says where it is.
    one_line_error(
        bertforge("fill-mask", full, "the cat [MASK] on the mat."), "ELECTRA", str(model_dir / GENERATOR_DIR)
    )
    # The generator's answers are its own logits, as transformers computes them from the same directory.
    transformers = needs("transformers")
    generator_dir = model_dir / GENERATOR_DIR
    text = "the cat [MASK] on the mat."
    answer = json.loads(bertforge_ok("fill-mask", generator_dir, text, "--json", "--top-k", "5").stdout)
    reference = transformers.AutoModelForMaskedLM.from_pretrained(generator_dir, trust_remote_code=True).eval()
    their_tokenizer = transformers.AutoTokenizer.from_pretrained(generator_dir)
    encoded = their_tokenizer(text, return_tensors="pt")
    with torch.no_grad():
        logits = reference(**encoded).logits[0]  # (T, V)
    position = encoded["input_ids"][0].tolist().index(their_tokenizer.mask_token_id)
    expected = logits[position].softmax(-1).topk(5)
    (mask,) = answer["masks"]
    assert mask["position"] == position
    assert [p["token_id"] for p in mask["predictions"]] == expected.indices.tolist()
    torch.testing.assert_close(
        torch.tensor([p["score"] for p in mask["predictions"]]), expected.values, rtol=1e-4, atol=1e-5
    )

    resumed = resumed_twin(full, workdir / "data")
    assert_same_steps(
        full, resumed, list(range(2, 17, 2)), ("mlm_loss", "mlm_acc", "rtd_loss", "rtd_acc", "grad_norm", "tokens")
    )


@pytest.mark.parametrize("norm_style", ["post", "pre"])
def test_the_discriminator_loads_in_transformers_as_its_encoder(norm_style, tmp_path):
    """Saved as BertModel (post-LN) or RobertaPreLayerNormModel (pre-LN): the same hidden states on a padded
    batch; the replaced-token head travels under ELECTRA's names and comes back in bertforge."""
    transformers = needs("transformers")
    ours = randomised(tiny_electra(norm_style=norm_style)).discriminator
    save_model(ours, tmp_path, None)
    theirs = transformers.AutoModel.from_pretrained(tmp_path).eval()
    input_ids, attention_mask, _ = masked_batch()
    with torch.no_grad():
        hidden = ours.bert(input_ids, None, attention_mask).sequence_output
        their_hidden = theirs(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
    real = attention_mask.bool()
    torch.testing.assert_close(hidden[real], their_hidden[real], rtol=1e-5, atol=1e-5)
    again = load_model(BertForReplacedTokenDetection, tmp_path)
    torch.testing.assert_close(again(input_ids, None, attention_mask), ours(input_ids, None, attention_mask))
