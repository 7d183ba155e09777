"""Unpadding (model/unpadding.py): a padded batch run on its real tokens only, packed into fewer rows, gives the
padded batch's outputs and gradients on every real token, for every model shape and head, and `finetune` run
either way ends with the same weights."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from bertforge import ModelConfig
from bertforge.model.bert import BertForPreTraining
from bertforge.model.heads import (
    BertForMultipleChoice,
    BertForQuestionAnswering,
    BertForSentenceEmbedding,
    BertForSequenceClassification,
    BertForTokenClassification,
)
from bertforge.model.unpadding import AUTO_MIN_SAVING, plan_packing, set_unpadding, unpadding, unpadding_mode
from bertforge.tasks.classification import Columns
from bertforge.tasks.config import FinetuneConfig
from bertforge.tasks.finetune import finetune

from conftest import bertforge, bertforge_ok, save_random_model

SHAPES = {
    "bert": {},
    "pre-ln": {"norm_style": "pre"},
    "alibi": {"norm_style": "pre", "attention_bias": "alibi"},
    "modernbert": {
        "norm_style": "pre",
        "position_embedding": "rotary",
        "feed_forward": "glu",
        "type_vocab_size": 0,
        "first_attention_norm": False,
        "norm_bias": False,
        "linear_bias": False,
        "task_head": "transform",
        "local_attention": 8,
        "global_attention_every": 2,
    },
}
HEADS = [
    BertForSequenceClassification,
    BertForTokenClassification,
    BertForQuestionAnswering,
    BertForSentenceEmbedding,
    BertForPreTraining,
]
LENGTHS = [20, 3, 7, 12, 5, 9, 2]  # first fit packs these 7 sequences into 3 rows of 20


def config(shape: str) -> ModelConfig:
    return ModelConfig(
        vocab_size=100,
        hidden_size=32,
        num_layers=3,
        num_heads=4,
        intermediate_size=64,
        max_position_embeddings=24,
        hidden_dropout=0.0,
        attention_dropout=0.0,
        **SHAPES[shape],
    )


def padded_batch(cfg: ModelConfig, lengths=LENGTHS, seed: int = 0) -> dict[str, torch.Tensor]:
    """Right-padded rows of the given lengths; two segments where the model has segments."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.tensor(lengths)
    T = int(lengths.max())
    mask = (torch.arange(T)[None] < lengths[:, None]).long()  # (B, T)
    ids = torch.randint(5, cfg.vocab_size, mask.shape, generator=g) * mask
    second = (torch.arange(T)[None] > lengths[:, None] // 2) & mask.bool()
    types = second.long() if cfg.type_vocab_size else torch.zeros_like(ids)
    return {"input_ids": ids, "token_type_ids": types, "attention_mask": mask}


def real_outputs(model, batch) -> torch.Tensor:
    """Every output the model gives for real tokens, flattened: logits at real positions, sequence-level ones whole."""
    mask = batch["attention_mask"].bool()
    if isinstance(model, BertForPreTraining):
        out = model(**batch, keep_logits=True)
        nsp = out.nsp_logits.flatten() if out.nsp_logits is not None else out.mlm_logits[:0].flatten()
        return torch.cat([out.mlm_logits.flatten(), nsp])
    if isinstance(model, BertForSentenceEmbedding):
        return model.embed(**batch).flatten()
    logits, _ = model(**batch)
    if isinstance(model, (BertForTokenClassification, BertForQuestionAnswering)):
        return logits[mask].flatten()  # (B, T, labels or 2) at real tokens
    return logits.flatten()


def outputs_and_gradients(model, batch, mode: str):
    model.zero_grad()
    with unpadding_mode(mode):
        out = real_outputs(model, batch)
    out.pow(2).sum().backward()
    return out.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("head", HEADS, ids=lambda h: h.__name__)
def test_unpadded_outputs_and_gradients_equal_the_padded_ones(shape, head):
    cfg = config(shape)
    torch.manual_seed(0)
    model = head(cfg)
    batch = padded_batch(cfg)
    if head is BertForPreTraining:  # the MLM head reads masked positions: some of every sequence's real tokens
        real = batch["attention_mask"].bool()
        batch["mlm_labels"] = torch.where(real & (torch.rand(real.shape) < 0.5), batch["input_ids"], -100)
        batch["mlm_labels"][:, 0] = batch["input_ids"][:, 0]
    padded, padded_grads = outputs_and_gradients(model, batch, "never")
    unpadded, unpadded_grads = outputs_and_gradients(model, batch, "always")
    assert padded.abs().max() > 0
    assert torch.allclose(padded, unpadded, atol=1e-5), (padded - unpadded).abs().max()
    assert padded_grads.keys() == unpadded_grads.keys() and padded_grads
    for name, grad in padded_grads.items():
        assert torch.allclose(grad, unpadded_grads[name], atol=1e-5), name


@pytest.mark.parametrize("shape", ["bert", "modernbert"])
def test_multiple_choice_unpadded_equals_padded(shape):
    cfg = config(shape)
    torch.manual_seed(0)
    model = BertForMultipleChoice(cfg)
    flat = padded_batch(cfg, lengths=[20, 3, 7, 12, 5, 9])
    batch = {k: v.view(2, 3, -1) for k, v in flat.items()}  # 2 questions, 3 choices each
    outs = {}
    for mode in ("never", "always"):
        with unpadding_mode(mode):
            outs[mode] = model(**batch)[0]
    assert torch.allclose(outs["never"], outs["always"], atol=1e-5)


def test_a_changed_sequence_leaves_the_others_in_its_row_unchanged():
    """Packed sequences share rows but not attention: what one holds never reaches another."""
    cfg = config("pre-ln")
    torch.manual_seed(0)
    model = BertForTokenClassification(cfg).eval()
    batch = padded_batch(cfg)
    with unpadding_mode("always"):
        packing = plan_packing(batch["attention_mask"])
        before = model(**batch)[0]
        changed = {**batch, "input_ids": batch["input_ids"].clone()}
        changed["input_ids"][4, :5] = (changed["input_ids"][4, :5] + 1) % cfg.vocab_size  # sequence 4: 5 tokens
        after = model(**changed)[0]
    row_of_4 = packing.document_ids.eq(4).any(dim=1).nonzero().item()
    sharing = set(packing.document_ids[row_of_4].tolist()) - {4, -1}
    assert sharing, "sequence 4 shares its row with others in this test's packing"
    for b in sharing:
        assert torch.equal(before[b], after[b])
    assert not torch.allclose(before[4, :5], after[4, :5])


def test_every_real_token_gets_one_slot_in_fewer_rows():
    mask = (torch.arange(20)[None] < torch.tensor(LENGTHS)[:, None]).long()
    with unpadding_mode("always"):
        packing = plan_packing(mask)
    assert packing.rows == 3
    assert sorted(packing.target.tolist()) == sorted(set(packing.target.tolist()))  # no slot twice
    assert len(packing.source) == sum(LENGTHS)
    # each sequence's tokens lie in order, side by side, in one row
    for b, length in enumerate(LENGTHS):
        slots = (packing.document_ids.flatten() == b).nonzero().squeeze(1)
        assert len(slots) == length and bool((slots.diff() == 1).all())
        assert len(set((slots // 20).tolist())) == 1
    tokens = torch.arange(7 * 20).view(7, 20)
    assert torch.equal(packing.unpack(packing.pack(tokens)) * mask, tokens * mask)


def test_auto_packs_only_where_it_saves_a_quarter_of_the_rows():
    full = torch.ones(8, 16, dtype=torch.long)
    half = (torch.arange(16)[None] < torch.tensor([16, 8, 8, 8, 8, 4, 4, 16])[:, None]).long()  # 8 rows -> 5
    slight = (torch.arange(16)[None] < torch.tensor([16, 15, 14, 13, 12, 11, 10, 2])[:, None]).long()  # 8 -> 7
    assert unpadding() == "auto" and AUTO_MIN_SAVING == 0.25
    assert plan_packing(full) is None and plan_packing(slight) is None
    assert plan_packing(half).rows == 5
    with unpadding_mode("always"):
        assert plan_packing(slight).rows == 7 and plan_packing(full) is None  # nothing to remove from a full batch
    with unpadding_mode("never"):
        assert plan_packing(half) is None
    assert unpadding() == "auto"
    with pytest.raises(ValueError, match="auto, always, never"):
        set_unpadding("sometimes")


def write_pairs(path, n: int) -> None:
    """Pairs of very different lengths, so that batches carry padding whatever their order."""
    words = "the cat sat on a mat and looked at my friend in the red house".split()
    rows = ["text\tpair\tlabel"]
    for i in range(n):
        a = " ".join(words[: 2 + i % 11])
        b = " ".join(reversed(words[: 1 + (3 * i) % 13]))
        rows.append(f"{a}\t{b}\t{i % 2}")
    path.write_text("\n".join(rows) + "\n")


def test_fine_tuning_either_way_ends_with_the_same_weights(wordpiece_tokenizer, tmp_path):
    base = save_random_model(tmp_path / "base", wordpiece_tokenizer, hidden_size=32, num_layers=2, num_heads=2,
                             intermediate_size=64, max_position_embeddings=64)  # fmt: skip
    write_pairs(tmp_path / "train.tsv", 96)
    finals = {}
    for mode in ("never", "always"):
        settings = FinetuneConfig(epochs=2, lr=1e-3, batch_size=16, dropout=0.0, device="cpu", unpad=mode)
        finetune(base, "classification", tmp_path / "train.tsv", tmp_path / "train.tsv", tmp_path / mode, settings,
                 Columns("text", "label", pair="pair"), progress=False)  # fmt: skip
        finals[mode] = load_file(tmp_path / mode / "model" / "model.safetensors")
        assert unpadding() == "auto"  # the run's choice ends with it
    for name, weight in finals["never"].items():
        assert torch.allclose(weight, finals["always"][name], atol=1e-5), name
    assert any(not torch.equal(w, finals["always"][n]) for n, w in finals["never"].items())  # two computations


def test_the_unpad_flag_forces_either_path_and_refuses_others(wordpiece_tokenizer, tmp_path):
    model = save_random_model(tmp_path / "m", wordpiece_tokenizer, hidden_size=32, num_layers=1, num_heads=2,
                              intermediate_size=64, max_position_embeddings=64)  # fmt: skip
    (tmp_path / "texts.txt").write_text("the cat\nthe cat sat on the mat and looked at my friend\na bird\n")
    texts = "--input", tmp_path / "texts.txt", "--precision", "fp32"
    for layer in ("-1", "1"):
        vectors = {}
        for mode in ("never", "always"):
            out = tmp_path / f"{mode}{layer}.npy"
            bertforge_ok("embed", model, *texts, "--out", out, "--unpad", mode, "--layer", layer)
            vectors[mode] = np.load(out)
        assert np.allclose(vectors["never"], vectors["always"], atol=1e-5)
        assert not np.allclose(vectors["never"][0], vectors["never"][1])
    refused = bertforge("embed", model, *texts, "--out", tmp_path / "x.npy", "--unpad", "sometimes")
    assert refused.returncode == 2 and "--unpad" in refused.stderr and not (tmp_path / "x.npy").exists()
