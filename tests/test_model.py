"""The network on its own: the gathered head, gradients, padding, overfitting, variants."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import bertforge.model.bert as bertforge_model
from bertforge import BertForPreTraining, ModelConfig, load_model, save_model
from bertforge.errors import UserError
from bertforge.model.bert import IGNORE_INDEX, PreTrainingOutput, set_activation_checkpointing
from bertforge.model.blocks import NoSegments

from conftest import MODERN


def small_config(**overrides) -> ModelConfig:
    values = dict(
        vocab_size=90,
        hidden_size=32,
        num_layers=2,
        num_heads=4,
        intermediate_size=64,
        max_position_embeddings=64,
        hidden_dropout=0.0,
        attention_dropout=0.0,
    )
    values.update(overrides)
    return ModelConfig(**values)


def random_batch(vocab: int = 90, B: int = 4, T: int = 16, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(5, vocab, (B, T), generator=g)
    token_type_ids = (torch.arange(T) >= T // 2).long().expand(B, T).clone()
    labels = torch.full((B, T), IGNORE_INDEX)
    chosen = torch.rand(B, T, generator=g) < 0.3
    chosen[:, 1] = True
    labels[chosen] = input_ids[chosen]
    nsp = torch.randint(0, 2, (B,), generator=g)
    return input_ids, token_type_ids, labels, nsp


def test_presets_have_the_paper_shapes():
    expected = {
        "tiny": (2, 128, 2),
        "mini": (4, 256, 4),
        "small": (4, 512, 8),
        "medium": (8, 512, 8),
        "base": (12, 768, 12),
        "large": (24, 1024, 16),
    }
    for name, (layers, hidden, heads) in expected.items():
        c = ModelConfig.preset(name)
        assert (c.num_layers, c.hidden_size, c.num_heads, c.intermediate_size) == (layers, hidden, heads, 4 * hidden)
    assert ModelConfig.preset("mini", num_layers=2).num_layers == 2


def test_init_follows_bert():
    torch.manual_seed(0)
    model = BertForPreTraining(ModelConfig.preset("mini", vocab_size=1000))
    token = model.bert.embeddings.token.weight
    assert torch.all(token[0] == 0)  # [PAD] row
    assert abs(token[1:1000].std().item() - 0.02) < 0.002
    assert torch.all(model.bert.layers[0].attention.qkv.bias == 0)
    assert torch.all(model.bert.layers[0].ffn_norm.weight == 1)
    assert model.mlm_head.decoder_weight is model.bert.embeddings.token.weight  # tied


def test_padded_vocab_outputs_exactly_vocab_size_columns():
    config = small_config(vocab_size=90)
    assert config.padded_vocab_size == 128
    model = BertForPreTraining(config).eval()
    ids, types, labels, nsp = random_batch()
    assert model(ids, types).mlm_logits.shape == (4, 16, 90)
    out = model(ids, types, mlm_labels=labels, nsp_labels=nsp, keep_logits=True)
    assert out.mlm_logits.shape == (int((labels != IGNORE_INDEX).sum()), 90)


@pytest.mark.parametrize("keep_logits", [True, False])
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_the_loss_over_padded_columns_is_the_loss_over_the_vocabulary_and_pads_get_no_gradient(precision, keep_logits):
    """The training loss runs on all 128 columns of a 90-token model's padded table; the 38 pad columns must
    change neither the loss nor any gradient (the tied embedding's pad rows get exactly zero), whether the loss is
    computed from the logits or blockwise without them."""
    torch.manual_seed(0)
    model = BertForPreTraining(small_config(vocab_size=90, tie_word_embeddings=True)).eval()
    ids, types, labels, nsp = random_batch()
    with torch.autocast("cpu", torch.bfloat16, enabled=precision == "bf16"):
        out = model(ids, types, mlm_labels=labels, nsp_labels=nsp, keep_logits=keep_logits)
        logits = model(ids, types, mlm_labels=labels, nsp_labels=nsp, keep_logits=True).mlm_logits
    expected = torch.nn.functional.cross_entropy(logits.float(), out.mlm_targets)
    torch.testing.assert_close(out.mlm_loss, expected, rtol=0 if keep_logits else 1e-6, atol=0 if keep_logits else 1e-6)
    out.loss.backward()
    grad = model.mlm_head.decoder_weight.grad
    assert torch.isfinite(grad).all() and grad[:90].abs().sum() > 0
    assert torch.equal(grad[90:], torch.zeros_like(grad[90:]))


def test_gathered_head_equals_dense_head_at_labelled_positions():
    torch.manual_seed(0)
    model = BertForPreTraining(small_config()).eval()
    ids, types, labels, nsp = random_batch()
    dense = model(ids, types).mlm_logits  # (B, T, V)
    gathered = model(ids, types, mlm_labels=labels, nsp_labels=nsp, keep_logits=True)
    where = labels != IGNORE_INDEX
    torch.testing.assert_close(gathered.mlm_logits, dense[where], rtol=1e-5, atol=1e-5)
    expected = torch.nn.functional.cross_entropy(dense.reshape(-1, 90), labels.reshape(-1), ignore_index=IGNORE_INDEX)
    torch.testing.assert_close(gathered.mlm_loss, expected)
    torch.testing.assert_close(model(ids, types, mlm_labels=labels, nsp_labels=nsp).mlm_loss, expected)  # blockwise


@pytest.mark.parametrize("keep_logits", [True, False])
def test_gathered_rows_are_rounded_to_a_few_shapes_without_changing_loss_or_gradients(monkeypatch, keep_logits):
    """The head runs on N rounded up to a multiple of 64 (fewer kernel builds, no heap growth); the extra rows
    must not count: the same loss, gradients and outputs as the exact N, with the logits kept or not."""
    ids, types, labels, nsp = random_batch(B=8, T=32)
    n = int((labels != IGNORE_INDEX).sum())
    assert n % bertforge_model.GATHERED_ROWS_MULTIPLE != 0  # otherwise the test shows nothing

    def run(multiple: int):
        monkeypatch.setattr(bertforge_model, "GATHERED_ROWS_MULTIPLE", multiple)
        torch.manual_seed(0)
        model = BertForPreTraining(small_config())
        rows = []
        model.mlm_head.transform.register_forward_hook(lambda module, args, output: rows.append(args[0].shape[0]))
        out = model(ids, types, mlm_labels=labels, nsp_labels=nsp, keep_logits=keep_logits)
        out.loss.backward()
        return out, rows[0], {name: p.grad.clone() for name, p in model.named_parameters()}

    rounded, rounded_rows, rounded_grads = run(64)
    exact, exact_rows, exact_grads = run(1)
    assert (exact_rows, rounded_rows) == (n, -(-n // 64) * 64)
    assert torch.equal(rounded.mlm_targets, labels[labels != IGNORE_INDEX])
    assert rounded.mlm_correct() == exact.mlm_correct()
    torch.testing.assert_close(rounded.loss, exact.loss)
    if keep_logits:
        assert rounded.mlm_logits.shape == (n, 90)
        torch.testing.assert_close(rounded.mlm_logits, exact.mlm_logits)
    for name, grad in exact_grads.items():
        torch.testing.assert_close(rounded_grads[name], grad, msg=name)


def test_unlabelled_positions_cannot_change_the_loss():
    torch.manual_seed(0)
    model = BertForPreTraining(small_config()).eval()
    ids, types, labels, nsp = random_batch()
    base = model(ids, types, mlm_labels=labels, nsp_labels=nsp)
    unlabelled = labels == IGNORE_INDEX
    unlabelled[:, 0] = False  # [CLS] feeds NSP, so leave it alone

    def scramble_unlabelled(module, inputs, output):
        noisy = output.sequence_output.clone()
        noisy[unlabelled] = torch.randn_like(noisy[unlabelled]) * 100
        output.sequence_output = noisy
        return output

    model.bert.register_forward_hook(scramble_unlabelled)
    scrambled = model(ids, types, mlm_labels=labels, nsp_labels=nsp)
    torch.testing.assert_close(scrambled.mlm_loss, base.mlm_loss)
    # The dense head, by contrast, does see the change: the hook really took effect.
    assert not torch.allclose(
        model(ids, types).mlm_logits[unlabelled], model.mlm_head(base_hidden(model, ids, types))[unlabelled]
    )


def base_hidden(model, ids, types):
    with torch.no_grad():
        handles = list(model.bert._forward_hooks)
        hooks = {h: model.bert._forward_hooks.pop(h) for h in handles}
        try:
            return model.bert(ids, types).sequence_output
        finally:
            model.bert._forward_hooks.update(hooks)


def test_every_parameter_gets_a_finite_nonzero_gradient():
    torch.manual_seed(0)
    for config in (small_config(), small_config(norm_style="pre"), small_config(tie_word_embeddings=False)):
        model = BertForPreTraining(config)
        ids, types, labels, nsp = random_batch()
        model(ids, types, mlm_labels=labels, nsp_labels=nsp).loss.backward()
        for name, p in model.named_parameters():
            assert p.grad is not None, name
            assert torch.isfinite(p.grad).all(), name
            assert p.grad.abs().sum() > 0, name


@pytest.mark.parametrize("variant", [{}, {"norm_style": "pre", "position_embedding": "rotary"}])
def test_activation_checkpointing_gives_the_same_loss_and_gradients_with_dropout(variant):
    """The layers computed again in the backward pass draw the same dropout masks: nothing but memory changes."""
    config = small_config(hidden_dropout=0.1, attention_dropout=0.1, **variant)
    ids, types, labels, nsp = random_batch()
    attention_mask = torch.ones_like(ids)
    attention_mask[0, -3:] = 0  # some padding, so the mask goes through the recomputed layers too
    grads, losses, after = [], [], []
    for recompute in (False, True):
        torch.manual_seed(0)
        model = BertForPreTraining(config).train()
        set_activation_checkpointing(model, recompute)
        calls = []
        for layer in model.bert.layers:
            layer.register_forward_pre_hook(lambda *_, calls=calls: calls.append(1))
        loss = model(ids, types, attention_mask, mlm_labels=labels, nsp_labels=nsp).loss
        loss.backward()
        assert len(calls) == config.num_layers * (2 if recompute else 1)  # each layer again in the backward pass
        losses.append(loss.detach())
        grads.append({name: p.grad for name, p in model.named_parameters()})
        after.append(torch.rand(3))  # the generator moves on as it would have without recomputing
    torch.testing.assert_close(losses[0], losses[1], rtol=0, atol=0)
    for name, grad in grads[0].items():
        torch.testing.assert_close(grads[1][name], grad, rtol=1e-6, atol=1e-7, msg=name)
    torch.testing.assert_close(after[0], after[1], rtol=0, atol=0)


def test_padding_does_not_change_real_positions():
    torch.manual_seed(0)
    model = BertForPreTraining(small_config()).eval()
    ids, types, _, _ = random_batch(B=2, T=10)
    plain = model(ids, types, attention_mask=torch.ones_like(ids))
    padded_ids = torch.cat([ids, torch.zeros(2, 6, dtype=torch.long)], dim=1)
    padded_types = torch.cat([types, torch.zeros(2, 6, dtype=torch.long)], dim=1)
    mask = torch.cat([torch.ones(2, 10), torch.zeros(2, 6)], dim=1).long()
    padded = model(padded_ids, padded_types, attention_mask=mask)
    torch.testing.assert_close(padded.mlm_logits[:, :10], plain.mlm_logits, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(padded.nsp_logits, plain.nsp_logits, rtol=1e-5, atol=1e-5)


def test_attention_probabilities_sum_to_one_and_skip_padding():
    torch.manual_seed(0)
    model = BertForPreTraining(small_config()).eval()
    ids, types, _, _ = random_batch(B=2, T=12)
    mask = torch.ones_like(ids)
    mask[0, 8:] = 0
    encoded = model.bert(ids, types, mask, output_attentions=True)
    assert len(encoded.attentions) == 2
    probs = encoded.attentions[0]  # (B, nh, T, T)
    assert probs.shape == (2, 4, 12, 12)
    torch.testing.assert_close(probs.sum(-1), torch.ones(2, 4, 12))
    assert torch.all(probs[0, :, :, 8:] == 0)
    # The explicit path and the SDPA path give the same hidden states.
    torch.testing.assert_close(
        encoded.sequence_output, model.bert(ids, types, mask).sequence_output, rtol=1e-5, atol=1e-5
    )


@pytest.mark.parametrize(
    "variant",
    [
        {},
        {"norm_style": "pre"},
        {"position_embedding": "sinusoidal"},
        {"hidden_act": "relu"},
        {"attention_bias": "alibi"},
        {"position_embedding": "rotary"},
    ],
)
def test_overfits_one_batch_and_variants_round_trip(variant, tmp_path):
    torch.manual_seed(0)
    model = BertForPreTraining(small_config(**variant))
    ids, types, labels, nsp = random_batch(B=8, T=12, seed=1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for _ in range(150):
        out = model(ids, types, mlm_labels=labels, nsp_labels=nsp)
        optimizer.zero_grad()
        out.loss.backward()
        optimizer.step()
    model.eval()
    out = model(ids, types, mlm_labels=labels, nsp_labels=nsp)
    assert out.mlm_correct().item() == out.mlm_targets.numel()  # 100% MLM accuracy
    assert torch.equal(out.nsp_logits.argmax(-1), nsp)  # 100% NSP accuracy
    save_model(model, tmp_path / "m", None)
    loaded = load_model(BertForPreTraining, tmp_path / "m")
    assert loaded.config == model.config
    again = loaded(ids, types, mlm_labels=labels, nsp_labels=nsp)
    torch.testing.assert_close(again.loss, out.loss)


def test_mlm_only_without_nsp_labels():
    model = BertForPreTraining(small_config())
    ids, types, labels, _ = random_batch()
    out = model(ids, types, mlm_labels=labels)
    assert out.nsp_loss is None
    torch.testing.assert_close(out.loss, out.mlm_loss)


def test_mask_is_dropped_when_nothing_is_padded(monkeypatch):
    """Without padding, SDPA gets no mask, so on CUDA it may take the flash kernel."""
    import torch.nn.functional as F

    seen = []
    original = F.scaled_dot_product_attention

    def spy(*args, **kwargs):
        seen.append(kwargs.get("attn_mask"))
        return original(*args, **kwargs)

    monkeypatch.setattr(F, "scaled_dot_product_attention", spy)
    model = BertForPreTraining(small_config()).eval()
    ids, types, _, _ = random_batch(B=2, T=8)
    model(ids, types, attention_mask=torch.ones_like(ids))
    assert seen and all(mask is None for mask in seen)
    seen.clear()
    mask = torch.ones_like(ids)
    mask[0, 6:] = 0
    model(ids, types, attention_mask=mask)
    assert seen and all(m is not None and m.shape == (2, 1, 1, 8) for m in seen)


def test_sinusoidal_positions_sit_at_the_token_embeddings_scale():
    """The fixed table is the paper's sin/cos pattern, scaled to the size the learned tables start at, so that
    the position does not drown the token in the sum LayerNorm normalises (unscaled, a budget run stayed at the
    unigram level for 800 steps)."""
    torch.manual_seed(0)
    config = small_config(position_embedding="sinusoidal", initializer_range=0.02)
    embeddings = BertForPreTraining(config).bert.embeddings
    table = embeddings.position.weight  # (P, H)
    assert not table.requires_grad
    assert table.pow(2).mean().sqrt().item() == pytest.approx(0.02, rel=1e-4)  # root mean square
    assert embeddings.token.weight.pow(2).mean().sqrt().item() == pytest.approx(0.02, rel=0.1)
    scale = 0.02 * 2**0.5
    positions = torch.arange(config.max_position_embeddings, dtype=torch.float32)
    torch.testing.assert_close(table[:, 0], scale * torch.sin(positions))  # dim 0: frequency 1
    torch.testing.assert_close(table[:, 1], scale * torch.cos(positions))


def test_alibi_penalises_distance_per_head():
    """-m_h·|i-j| with slopes 1/2, 1/4, ...: symmetric, zero on the diagonal, steeper in earlier heads."""
    from bertforge.model.positions import alibi_bias

    bias = alibi_bias(num_heads=3, seq_len=5)  # (nh, T, T)
    assert bias.shape == (3, 5, 5)
    torch.testing.assert_close(bias, bias.transpose(1, 2))
    assert torch.all(bias.diagonal(dim1=1, dim2=2) == 0)
    torch.testing.assert_close(bias[:, 0, 4], torch.tensor([-2.0, -1.0, -0.5]))  # distance 4 × (1/2, 1/4, 1/8)


@pytest.mark.parametrize("explicit", [False, True])
def test_alibi_attention_looks_near_and_skips_padding(explicit):
    """At initialisation the scores are near zero, so the bias decides: probability falls with distance.
    The explicit path and SDPA agree, padding stays invisible, and real positions do not see the pad."""
    from bertforge.model.bert import set_explicit_attention

    torch.manual_seed(0)
    model = BertForPreTraining(small_config(attention_bias="alibi")).eval()
    set_explicit_attention(model, explicit)
    ids, types, _, _ = random_batch(B=2, T=12)
    mask = torch.ones_like(ids)
    mask[0, 8:] = 0
    encoded = model.bert(ids, types, mask, output_attentions=True)
    probs = encoded.attentions[0]  # (B, nh, T, T)
    assert torch.all(probs[0, :, :, 8:] == 0)
    torch.testing.assert_close(probs.sum(-1), torch.ones(2, 4, 12))
    row = probs[1, 0, 6]  # head 0 (slope 1/2), query 6: the farther the key, the less it gets
    assert row[6] > row[4] > row[2] > row[0] and row[6] > row[8] > row[10]
    torch.testing.assert_close(
        encoded.sequence_output, model.bert(ids, types, mask).sequence_output, rtol=1e-5, atol=1e-5
    )
    unpadded = model.bert(ids[:1, :8], types[:1, :8]).sequence_output
    torch.testing.assert_close(encoded.sequence_output[:1, :8], unpadded, rtol=1e-5, atol=1e-5)


def test_rotary_scores_depend_on_the_offset_alone_and_keep_lengths():
    """RoPE turns a query at t and a key at s so that their dot product depends on what they hold and on t - s:
    moving both by the same amount changes no score, and a turn keeps every vector's length."""
    from bertforge.model.blocks import rotary_angles, rotate

    torch.manual_seed(0)
    q, k = torch.randn(2, 16)  # one query and one key, head size 16
    cos, sin = rotary_angles(torch.arange(40), head_size=16)  # (T, hs) each
    turned_q = rotate(q.expand(40, 16), cos, sin)  # (T, hs): q at every position
    turned_k = rotate(k.expand(40, 16), cos, sin)
    scores = turned_q @ turned_k.T  # (T, T): q at t against k at s
    for offset in (-7, 0, 3, 20):
        diagonal = scores.diagonal(offset)  # every (t, t + offset)
        torch.testing.assert_close(diagonal, diagonal[:1].expand_as(diagonal), rtol=1e-4, atol=1e-4)
    assert not torch.allclose(scores.diagonal(0)[0], scores.diagonal(3)[0], atol=1e-3)  # the offset matters
    torch.testing.assert_close(turned_q.norm(dim=-1), q.norm().expand(40))
    torch.testing.assert_close(rotate(q[None], *rotary_angles(torch.arange(1), 16)), q[None])  # 0 is not turned


@pytest.mark.parametrize("explicit", [False, True])
def test_rotary_positions_tell_order_without_a_table_and_skip_padding(explicit):
    """With rotary positions the table stays zero and frozen, yet the model tells word order apart; the explicit
    path and SDPA agree, padding changes no real position, and bf16 autocast runs (q and k stay bf16)."""
    from bertforge.model.bert import set_explicit_attention

    torch.manual_seed(0)
    model = BertForPreTraining(small_config(position_embedding="rotary")).eval()
    with torch.no_grad():  # scores far from zero, so that attention is far from uniform
        for layer in model.bert.layers:
            layer.attention.qkv.weight.normal_(0.0, 0.3)
    set_explicit_attention(model, explicit)
    table = model.bert.embeddings.position.weight
    assert not table.requires_grad and torch.all(table == 0)
    ids, types, _, _ = random_batch(B=2, T=12)
    swapped = ids.clone()
    swapped[:, [3, 4]] = ids[:, [4, 3]]

    def cls_changes(model) -> torch.Tensor:  # how much [CLS] moves when two words trade places
        return (
            (model.bert(ids, types).sequence_output[:, 0] - model.bert(swapped, types).sequence_output[:, 0])
            .abs()
            .max()
        )

    assert cls_changes(model) > 1e-2
    # The same weights without the turn (the learned scheme's attention, its table the rotary model's zeros):
    # nothing tells positions apart, a bag of words.
    unturned = BertForPreTraining(small_config(position_embedding="learned")).eval()
    unturned.load_state_dict(model.state_dict())
    set_explicit_attention(unturned, explicit)
    assert cls_changes(unturned) < 1e-5
    mask = torch.ones_like(ids)
    mask[0, 8:] = 0
    padded = model.bert(ids, types, mask, output_attentions=explicit).sequence_output
    unpadded = model.bert(ids[:1, :8], types[:1, :8]).sequence_output
    torch.testing.assert_close(padded[:1, :8], unpadded, rtol=1e-5, atol=1e-5)
    set_explicit_attention(model, not explicit)
    torch.testing.assert_close(model.bert(ids, types, mask).sequence_output, padded, rtol=1e-5, atol=1e-5)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert torch.isfinite(model.bert(ids, types, mask).sequence_output).all()


def test_rotary_positions_need_an_even_head_size():
    with pytest.raises(UserError, match="head size 5 .* must be even"):
        small_config(position_embedding="rotary", hidden_size=20, num_heads=4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_mlm_correct_counts_argmax_hits_and_the_first_of_tied_maxima(dtype):
    torch.manual_seed(0)
    logits = torch.randn(500, 300).to(dtype)  # (N, V)
    targets = torch.randint(0, 300, (500,))
    targets[:200] = logits[:200].argmax(-1)  # 200 right, the rest right by chance only
    tied = torch.zeros(3, 300, dtype=dtype)
    tied[:, [7, 42]] = 5.0  # two maxima: argmax says 7
    logits, targets = torch.cat([logits, tied]), torch.cat([targets, torch.tensor([7, 42, 0])])
    out = PreTrainingOutput(None, None, None, logits, None, targets)
    assert int(out.mlm_correct()) == int((logits.argmax(-1) == targets).sum()) >= 201


@pytest.mark.parametrize("recipe", ["bert", "budget"])
def test_cls_reads_the_whole_window_at_initialisation_under_each_recipe(recipe):
    """[CLS] is what the NSP head and every sentence task read, so from the first step it must see segment B at the
    far end of the window about as well as the text beside it. ALiBi's slopes (1/2, 1/4, ... per head) gave the far
    half of a 128-token window almost none of its attention on tiny, and the demo's NSP head stayed at chance
    (experiments/positions.md, "ALiBi's slopes blind [CLS]"); so `budget` uses rotary positions instead."""
    from bertforge.training.config import recipe_configs

    torch.manual_seed(0)
    model_config, _ = recipe_configs(recipe, "tiny", {"vocab_size": 200}, {"seq_len": 128})
    ids = torch.randint(5, 200, (4, 128))  # (B, T)
    for attention_bias in (model_config.attention_bias, "alibi"):
        config = ModelConfig(**{**model_config.__dict__, "attention_bias": attention_bias})
        model = bertforge_model.BertModel(config).eval()
        with torch.no_grad():
            attentions = model(ids, output_attentions=True).attentions  # per layer (B, nh, T, T)
        far = torch.stack([probs[:, :, 0, 64:].sum(-1) for probs in attentions])  # (layers, B, nh): [CLS] -> far half
        if attention_bias == "alibi":
            assert far.max() < 1e-3  # what the recipe must not do
        else:
            assert far.min() > 0.35, far.min()  # about the uniform 0.5


@pytest.mark.parametrize("position_embedding", ["rotary", "learned"])
def test_packed_documents_are_kept_apart_as_if_each_ran_alone(position_embedding):
    """A window of three documents with document ids: each document's outputs are those of the document run on
    its own (attention stays inside it, positions restart at it), and changing one leaves the others' unchanged."""
    torch.manual_seed(0)
    model = BertForPreTraining(small_config(**{**MODERN, "position_embedding": position_embedding})).eval()
    ids = torch.randint(5, 90, (1, 20))
    documents = torch.tensor([[0] * 7 + [1] * 5 + [2] * 8])  # (1, 20)
    packed = model.bert(ids, document_ids=documents).sequence_output[0]  # (20, H)
    bounds = [(0, 7), (7, 12), (12, 20)]
    for start, end in bounds:
        alone = model.bert(ids[:, start:end]).sequence_output[0]  # the document as its own sequence
        torch.testing.assert_close(packed[start:end], alone, rtol=1e-5, atol=1e-5)
    changed = ids.clone()
    changed[0, 8:11] = torch.randint(5, 90, (3,))  # the middle document's tokens
    again = model.bert(changed, document_ids=documents).sequence_output[0]
    torch.testing.assert_close(again[:7], packed[:7], rtol=0, atol=0)
    torch.testing.assert_close(again[12:], packed[12:], rtol=0, atol=0)
    assert not torch.allclose(again[7:12], packed[7:12])
    # Without document ids the window is one text: the documents see each other.
    assert not torch.allclose(model.bert(changed).sequence_output[0, :7], model.bert(ids).sequence_output[0, :7])


def test_a_packed_window_knows_the_document_of_each_token(tmp_path, wordpiece_tokenizer):
    """[CLS] and each document's closing [SEP] belong to it; the window's last [SEP] to its last document."""
    from bertforge.data.directory import SplitWriter, token_dtype, write_meta
    from bertforge.data.instances import PackedDataset

    writer = SplitWriter(tmp_path / "train", token_dtype(wordpiece_tokenizer))
    lengths = [5, 3, 9, 2, 6]
    token = 10
    for n in lengths:
        writer.add_sentences(np.arange(token, token + n), np.array([n]))
        writer.end_document()
        token += n
    SplitWriter(tmp_path / "valid", token_dtype(wordpiece_tokenizer)).close()
    write_meta(tmp_path, wordpiece_tokenizer, {"train": writer.close()})
    dataset = PackedDataset(tmp_path, "train", max_seq_len=12, cls_id=2, sep_id=3)
    for i in range(dataset.num_instances(0)):
        x = dataset[(0, i)]
        assert len(x.document_ids) == len(x.input_ids) == 12
        assert np.all(np.diff(x.document_ids) >= 0) and x.document_ids[0] == 0
        for position in np.flatnonzero(x.input_ids[1:-2] == 3) + 1:  # a [SEP] before a token: that one starts the next
            assert x.document_ids[position + 1] == x.document_ids[position] + 1
        for doc in np.unique(x.document_ids):  # each document's real tokens are one run of consecutive ids
            real = x.input_ids[(x.document_ids == doc) & (x.input_ids >= 10)]
            assert np.all(np.diff(real) == 1)


def test_modernbert_settings_shape_the_model():
    model = BertForPreTraining(small_config(**MODERN, local_attention=4, global_attention_every=2))
    first, second = model.bert.layers
    assert isinstance(first.attention_norm, torch.nn.Identity) and isinstance(second.attention_norm, torch.nn.LayerNorm)
    assert isinstance(model.bert.embeddings.segment, NoSegments)
    assert all(not name.endswith(".bias") for name, _ in model.bert.named_parameters() if "pooler" not in name)
    assert model.bert.sight.global_layers == [True, False]
    # A local layer's token does not see past local_attention / 2 tokens: one local layer alone.
    torch.manual_seed(0)
    local = BertForPreTraining(small_config(**MODERN, num_layers=1, local_attention=4, global_attention_every=2))
    local.bert.sight.global_layers = [False]
    ids = torch.randint(5, 90, (1, 12))
    far = ids.clone()
    far[0, 6:] = torch.randint(5, 90, (6,))  # more than 2 positions away from tokens 0..3
    out, changed = (local.bert(x).sequence_output[0] for x in (ids, far))
    torch.testing.assert_close(out[:4], changed[:4], rtol=0, atol=0)
    assert not torch.allclose(out[4:6], changed[4:6])


def test_a_position_scheme_registered_from_outside_is_a_choice_the_encoder_and_the_export_follow():
    """Adding a variant is one object and its registration (docs/architecture.md): "none", no positions at all
    (NoPE), registered here, is at once a config choice; the encoder adds no table, so permuting a sequence's tokens
    permutes its outputs (which a learned table prevents); and the export says transformers' BERT lacks it."""
    from bertforge.model.bert import BertModel
    from bertforge.model.variants import POSITION_SCHEMES, PositionScheme
    from bertforge.modelfiles.hf import unloadable_parts

    with pytest.raises(UserError, match="position_embedding must be one of"):
        ModelConfig.preset("tiny", vocab_size=50, position_embedding="none")
    POSITION_SCHEMES.register(PositionScheme("none", "no positions at all", added=False, native=False))
    try:
        outputs = {}
        for scheme in ("none", "learned"):
            config = ModelConfig.preset(
                "tiny", vocab_size=50, position_embedding=scheme, hidden_dropout=0.0, attention_dropout=0.0
            )
            torch.manual_seed(0)
            model = BertModel(config, pooler=False).eval()
            ids = torch.randint(5, 50, (1, 12))
            order = torch.randperm(12)
            with torch.no_grad():
                outputs[scheme] = (model(ids).sequence_output[0, order], model(ids[:, order]).sequence_output[0])
        assert torch.allclose(*outputs["none"], atol=1e-5)
        assert not torch.allclose(*outputs["learned"], atol=1e-3)
        unpositioned = ModelConfig.preset("tiny", vocab_size=50, position_embedding="none")
        assert ("the none position encoding", "--position-embedding learned") in unloadable_parts(unpositioned)
    finally:
        POSITION_SCHEMES.unregister("none")
