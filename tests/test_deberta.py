"""DeBERTa-v3, a family that computes differently: its disentangled attention (model/deberta.py: content-to-position
and position-to-content terms over log-bucketed relative positions, from one table the layers share) against
`transformers`' own DeBERTa-v2 classes, saved by `save_pretrained` with the family's SentencePiece tokenizer
(tests/released.py), both ways, on texts long enough to reach the logarithmic buckets; and the checks are shown to
fail when a term is dropped or the positions are clipped instead of bucketed."""

from __future__ import annotations

import json

import pytest
import torch

from bertforge.errors import UserError
from bertforge.model import deberta as deberta_block
from bertforge.model.bert import BertForPreTraining
from bertforge.modelfiles.directory import load_model_and_tokenizer, save_model
from bertforge.modelfiles.hf import config_from_hf
from bertforge.tokenizer import load_tokenizer

from conftest import needs, padded_batch
from released import build, deberta_config, deberta_tokenizer, randomised, sentences

LONG = " ".join(sentences(30, seed=4))  # about 450 tokens: query-key distances past 128, where the buckets are log


@pytest.fixture(scope="module")
def layouts(tmp_path_factory):
    """The released layout, and `strong`: the same, its shared position table drawn wide (N(0, 3)) so that a
    position term computed wrong moves the logits far past the parity tolerance (at the weights' N(0, 0.2), a whole
    term dropped moves them by little more than the tolerance)."""
    transformers = needs("transformers")
    needs("sentencepiece")
    root = tmp_path_factory.mktemp("deberta")
    built = build("deberta_v3", root)
    model = transformers.DebertaV2ForMaskedLM.from_pretrained(built)
    torch.manual_seed(3)
    with torch.no_grad():
        model.deberta.encoder.rel_embeddings.weight.normal_(0.0, 3.0)
    model.save_pretrained(root / "strong")
    deberta_tokenizer().save_pretrained(root / "strong")
    return {"deberta_v3": built, "strong": root / "strong"}


def long_batch(directory):
    """(input_ids, attention_mask) of the long text and a short one, padded: the long one past 300 tokens."""
    return padded_batch(directory, (LONG, "The cat sat on the mat."), length=(300, 512))


def test_the_buckets_are_debertas_own():
    """Every distance in both directions falls in the bucket `transformers`' DeBERTa gives it, far ones included."""
    transformers = needs("transformers")
    theirs = transformers.models.deberta_v2.modeling_deberta_v2.build_relative_position
    probe = torch.zeros(1, 1, 600, 8)
    expected = theirs(probe, probe, bucket_size=256, max_position=512)[0]
    assert torch.equal(deberta_block.log_buckets(600, torch.device("cpu"), 256, 512), expected)
    assert int(expected.max()) > 128  # the logarithmic buckets are reached


def their_outputs(directory, input_ids, attention_mask):
    transformers = needs("transformers")
    theirs = transformers.DebertaV2ForMaskedLM.from_pretrained(directory).eval()
    with torch.no_grad():
        return theirs(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True)


def test_a_long_text_gives_transformers_hidden_states_and_logits(layouts):
    """Theirs loaded by us: on a text of about 450 tokens (padded beside a short one), every layer's hidden states
    and the masked LM's logits equal `transformers`' to 1e-5."""
    directory = layouts["strong"]
    _, ours, _ = load_model_and_tokenizer(directory)
    input_ids, attention_mask = long_batch(directory)
    with torch.no_grad():
        out = ours.bert(input_ids, None, attention_mask, output_hidden_states=True)
        logits = ours.mlm_head(out.sequence_output)
    expected = their_outputs(directory, input_ids, attention_mask)
    real = attention_mask.bool()
    for mine, their in zip(out.hidden_states, expected.hidden_states):
        torch.testing.assert_close(mine[real], their[real], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(logits[real], expected.logits[real], rtol=1e-5, atol=1e-5)


def _without(term):
    """DisentangledSelfAttention.scores_mask with one position term left out."""
    original = deberta_block.DisentangledSelfAttention.scores_mask

    def scores_mask(self, q, k, view):
        table, rows = view.relative
        if term == "c2p":
            q = torch.zeros_like(q)  # its c2p term is q·pk
        else:
            k = torch.zeros_like(k)  # its p2c term is k·pq
        return original(self, q, k, view)

    return scores_mask


@pytest.mark.parametrize("broken", ["clipped distances", "no c2p", "no p2c"])
def test_the_parity_test_sees_a_wrong_attention(layouts, monkeypatch, broken):
    """The check can fail: relative positions clipped at 128 instead of log-bucketed (equal for tokens closer
    than 128), or a whole position term left out, move the long text's logits ten times the tolerance and more."""
    if broken == "clipped distances":
        monkeypatch.setattr(
            deberta_block,
            "log_buckets",
            lambda seq_len, device, buckets, far: (
                torch.arange(seq_len, device=device)[:, None] - torch.arange(seq_len, device=device)[None, :]
            ).clamp(-buckets // 2, buckets // 2),
        )
    else:
        monkeypatch.setattr(deberta_block.DisentangledSelfAttention, "scores_mask", _without(broken[3:]))
    directory = layouts["strong"]
    _, ours, _ = load_model_and_tokenizer(directory)
    input_ids, attention_mask = long_batch(directory)
    with torch.no_grad():
        logits = ours(input_ids, None, attention_mask).mlm_logits
    expected = their_outputs(directory, input_ids, attention_mask).logits
    real = attention_mask.bool()
    assert float((logits[real] - expected[real]).abs().max()) > 10 * 1e-5  # ten times the parity tolerance


@pytest.mark.parametrize(
    "key, value",
    [
        ("relative_attention", False),
        ("position_buckets", 128),
        ("share_att_key", False),
        ("norm_rel_ebd", "none"),
        ("position_biased_input", True),
        ("conv_kernel_size", 3),
        ("legacy", False),
        ("pos_att_type", ["c2p"]),
        ("max_relative_positions", 128),
        ("attention_head_size", 8),
        ("pooler_hidden_act", "swish"),
    ],
)
def test_every_option_the_released_checkpoints_use_is_computed_or_refused_naming_its_key(key, value):
    """Each key that chooses what DeBERTa computes: the released value is read, any other refused in one line that
    names it (never a model that would compute something else)."""
    needs("transformers")
    released = deberta_config(100).to_dict()
    assert config_from_hf(released).position_embedding == "disentangled"
    with pytest.raises(UserError, match=key):
        config_from_hf({**released, key: value})


def test_a_model_trained_with_disentangled_attention_is_saved_as_a_deberta(tmp_path):
    """The `disentangled` position scheme is DeBERTa's: a model of that shape built by bertforge (no family read) is
    saved as DebertaV2ForMaskedLM, which `transformers` computes as bertforge does; another shape with it is
    refused."""
    transformers = needs("transformers")
    from bertforge import ModelConfig

    shape = dict(vocab_size=120, hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64)
    config = ModelConfig(**shape, position_embedding="disentangled", type_vocab_size=0)
    ours = BertForPreTraining(config, pair_head=False).eval()
    torch.manual_seed(0)
    with torch.no_grad():
        for p in ours.parameters():
            if p.requires_grad:  # not the position slot, frozen at zero and never saved
                p.normal_(0.0, 0.2)
    save_model(ours, tmp_path / "ours", None)
    saved = json.loads((tmp_path / "ours" / "config.json").read_text())
    assert saved["model_type"] == "deberta-v2" and saved["architectures"] == ["DebertaV2ForMaskedLM"]
    theirs = transformers.DebertaV2ForMaskedLM.from_pretrained(tmp_path / "ours").eval()
    input_ids = torch.tensor([[1, *range(5, 100), 2]])
    with torch.no_grad():
        torch.testing.assert_close(ours(input_ids).mlm_logits, theirs(input_ids=input_ids).logits, rtol=1e-5, atol=1e-5)
    with pytest.raises(UserError, match="position_embedding disentangled comes with norm_style post"):
        ModelConfig(**shape, position_embedding="disentangled", norm_style="pre")


def test_a_released_classifier_is_served_exported_and_fine_tuned(tmp_path):
    """The verbs on a DeBERTa-v3 classifier `transformers` saved: classify gives its probabilities; export writes
    graphs (fp32 and int8) that answer as it does; finetune trains it on and saves a DebertaV2ForSequenceClassification
    that `transformers` loads with nothing missing."""
    transformers = needs("transformers")
    needs("onnxruntime")
    from conftest import bertforge_ok

    tokenizer = deberta_tokenizer()
    config = deberta_config(len(tokenizer))
    config.num_labels, config.id2label, config.label2id = 2, {0: "neg", 1: "pos"}, {"neg": 0, "pos": 1}
    theirs = randomised(transformers.DebertaV2ForSequenceClassification(config))
    theirs.save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    texts = sentences(6, seed=8)
    (tmp_path / "texts.txt").write_text("\n".join(texts) + "\n")
    ours = json.loads(bertforge_ok("classify", tmp_path / "model", "--input", tmp_path / "texts.txt", "--json").stdout)
    encoded = [load_tokenizer(tmp_path / "model").encode(text).ids for text in texts]
    with torch.no_grad():
        expected = [theirs(input_ids=torch.tensor([ids])).logits.softmax(-1)[0] for ids in encoded]
    for answer, probabilities in zip(ours, expected):
        assert answer["label"] == ["neg", "pos"][int(probabilities.argmax())]
        assert answer["probabilities"]["pos"] == pytest.approx(float(probabilities[1]), abs=1e-4)
    bertforge_ok("export", tmp_path / "model", "--out", tmp_path / "onnx")
    bertforge_ok("export", tmp_path / "model", "--out", tmp_path / "int8", "--quantize", "int8")
    exported = json.loads(
        bertforge_ok("classify", tmp_path / "onnx", "--input", tmp_path / "texts.txt", "--json").stdout
    )
    assert [a["label"] for a in exported] == [a["label"] for a in ours]
    bertforge_ok("classify", tmp_path / "int8", "--input", tmp_path / "texts.txt")
    rows = "".join(f"{s}\t{i % 2}\n" for i, s in enumerate(sentences(40, seed=9)))
    (tmp_path / "train.tsv").write_text("text\tlabel\n" + rows)
    bertforge_ok(
        "finetune", tmp_path / "model", "--task", "classification", "--train", tmp_path / "train.tsv",
        "--text-column", "text", "--label-column", "label", "--out", tmp_path / "tuned", "--epochs", "1", "--quiet",
    )  # fmt: skip
    saved = json.loads((tmp_path / "tuned" / "model" / "config.json").read_text())
    assert saved["architectures"] == ["DebertaV2ForSequenceClassification"]
    _, info = transformers.AutoModelForSequenceClassification.from_pretrained(
        tmp_path / "tuned" / "model", output_loading_info=True
    )
    assert not info["missing_keys"], info
