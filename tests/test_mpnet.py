"""MPNet, a family that computes differently: its relative attention bias (one learned table of distance buckets,
shared by every layer: model/mpnet.py) against `transformers`' own MPNet classes, saved by `save_pretrained` and
`SentenceTransformer.save` (tests/released.py), both ways, on texts long enough to reach the logarithmic buckets;
and the checks are shown to fail when the bias is computed wrong."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from bertforge.model import mpnet as mpnet_block
from bertforge.model.bert import BertForPreTraining
from bertforge.modelfiles.directory import load_model_and_tokenizer, save_model

from conftest import bertforge_ok, needs, padded_batch
from released import build, mpnet_tokenizer, randomised, sentences

LONG = " ".join(sentences(28, seed=4))  # about 380 tokens: query-key distances past 128, the farthest bucket


@pytest.fixture(scope="module")
def layouts(tmp_path_factory):
    """The released layouts, and `strong`: mpnet-base's, its bias table drawn wide (N(0, 3)) so that a bias computed
    wrong moves the logits far past the parity tolerance (at the weights' N(0, 0.2) it moves them by 1e-4)."""
    transformers = needs("transformers")
    root = tmp_path_factory.mktemp("mpnet")
    built = {name: build(name, root) for name in ("mpnet", "mpnet_sentence_embedding")}
    model = transformers.MPNetForMaskedLM.from_pretrained(built["mpnet"])
    torch.manual_seed(3)
    with torch.no_grad():
        model.mpnet.encoder.relative_attention_bias.weight.normal_(0.0, 3.0)
    model.save_pretrained(root / "strong")
    mpnet_tokenizer().save_pretrained(root / "strong")
    return {**built, "strong": root / "strong"}


def long_batch(directory):
    """(input_ids, attention_mask) of the long text and a short one, padded: the long one past 300 tokens."""
    return padded_batch(directory, (LONG, "The cat sat on the mat."), length=(300, 512))


def test_the_buckets_are_mpnets_own():
    """Every distance in both directions falls in the bucket `transformers`' MPNet gives it, far ones included."""
    transformers = needs("transformers")
    theirs = transformers.models.mpnet.modeling_mpnet.MPNetEncoder.relative_position_bucket
    position = torch.arange(600)
    expected = theirs(position[None, :] - position[:, None])
    assert torch.equal(mpnet_block.relative_buckets(600, torch.device("cpu")), expected)
    assert len(expected.unique()) == 31  # every bucket is reached but the upper half's distance 0


def test_a_long_text_gives_transformers_hidden_states_and_logits(layouts):
    """Theirs loaded by us: on a text of about 400 tokens (padded beside a short one), every layer's hidden states
    and the masked LM's logits equal `transformers`' to 1e-5."""
    transformers = needs("transformers")
    directory = layouts["strong"]
    _, ours, _ = load_model_and_tokenizer(directory)
    input_ids, attention_mask = long_batch(directory)
    theirs = transformers.MPNetForMaskedLM.from_pretrained(directory).eval()
    with torch.no_grad():
        out = ours.bert(input_ids, None, attention_mask, output_hidden_states=True)
        logits = ours.mlm_head(out.sequence_output)
        expected = theirs(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True)
    real = attention_mask.bool()
    for mine, their in zip(out.hidden_states, expected.hidden_states):
        torch.testing.assert_close(mine[real], their[real], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(logits[real], expected.logits[real], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("broken", ["clipped distances", "no bias"])
def test_the_parity_test_sees_a_wrong_bias(layouts, monkeypatch, broken):
    """The check can fail: distances clipped instead of log-bucketed (equal up to 8 tokens apart), or no bias at
    all, move the logits of the long text a hundred times the tolerance and more."""
    transformers = needs("transformers")
    if broken == "clipped distances":

        def clipped(seq_len, device, buckets=32, far=128):
            position = torch.arange(seq_len, device=device)
            distance = position[:, None] - position[None, :]
            return (distance < 0).long() * 16 + distance.abs().clamp(max=15)

        monkeypatch.setattr(mpnet_block, "relative_buckets", clipped)
    directory = layouts["strong"]
    _, ours, _ = load_model_and_tokenizer(directory)
    if broken == "no bias":
        with torch.no_grad():
            ours.bert.sight.relative_attention_bias.weight.zero_()
    input_ids, attention_mask = long_batch(directory)
    theirs = transformers.MPNetForMaskedLM.from_pretrained(directory).eval()
    with torch.no_grad():
        logits = ours(input_ids, None, attention_mask).mlm_logits
        expected = theirs(input_ids=input_ids, attention_mask=attention_mask).logits
    real = attention_mask.bool()
    assert float((logits[real] - expected[real]).abs().max()) > 100 * 1e-5  # the parity tolerance


def test_a_sentence_embedding_model_embeds_as_sentence_transformers_does(layouts, tmp_path):
    """all-mpnet-base-v2's layout: `embed` by default pools and normalises as its modules say, and its vectors are
    sentence-transformers' own (fp32: 1e-5; least cosine far above 0.999), long texts included."""
    needs("sentence_transformers")
    from sentence_transformers import SentenceTransformer

    model = layouts["mpnet_sentence_embedding"]
    texts = [*sentences(20, seed=6), LONG[:1500]]
    (tmp_path / "texts.txt").write_text("\n".join(texts) + "\n")
    out = tmp_path / "vectors.npy"
    bertforge_ok("embed", model, "--input", tmp_path / "texts.txt", "--out", out, "--precision", "fp32")
    ours = np.load(out)
    theirs = SentenceTransformer(str(model), device="cpu").encode(texts)
    np.testing.assert_allclose(ours, theirs, atol=1e-5)
    cosines = (ours * theirs).sum(1) / np.linalg.norm(ours, axis=1) / np.linalg.norm(theirs, axis=1)
    assert cosines.min() >= 0.999


def test_a_model_trained_with_the_relative_bias_is_saved_as_an_mpnet(tmp_path):
    """The `relative` attention bias is MPNet's: a model of that shape built by bertforge (no family read) is saved
    as MPNetForMaskedLM, which `transformers` computes as bertforge does; another shape with it is refused."""
    transformers = needs("transformers")
    from bertforge import ModelConfig
    from bertforge.errors import UserError

    tokenizer = mpnet_tokenizer()
    shape = dict(vocab_size=len(tokenizer), hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64)
    config = ModelConfig(**shape, attention_bias="relative", type_vocab_size=0, pad_token_id=1)
    ours = randomised(BertForPreTraining(config, pair_head=False))
    save_model(ours, tmp_path / "ours", None)
    saved = json.loads((tmp_path / "ours" / "config.json").read_text())
    assert saved["model_type"] == "mpnet" and saved["architectures"] == ["MPNetForMaskedLM"]
    theirs = transformers.MPNetForMaskedLM.from_pretrained(tmp_path / "ours").eval()
    input_ids = torch.tensor([[0, *range(5, 60), 2]])
    with torch.no_grad():
        torch.testing.assert_close(ours(input_ids).mlm_logits, theirs(input_ids=input_ids).logits, rtol=1e-5, atol=1e-5)
    with pytest.raises(UserError, match="attention_bias relative comes with norm_style post"):
        ModelConfig(**shape, attention_bias="relative", type_vocab_size=0, norm_style="pre")
