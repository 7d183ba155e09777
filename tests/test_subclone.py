"""`bertforge subclone`: a smaller model cut out of a larger one. The cut is checked against one computed by hand
on a tiny model, keeping every part gives the source back exactly, and a released layout (`SentenceTransformer.save`
of a BertModel) comes out as itself at the new width, loads in `transformers` and sentence-transformers, and
continues with `pretrain --init-from`."""

from __future__ import annotations

import json

import pytest
import torch

from bertforge.errors import UserError
from bertforge.model.bert import BertForPreTraining
from bertforge.model.config import ModelConfig
from bertforge.training import subclone as sc

from conftest import bertforge, bertforge_ok, needs, one_line_error, randomised
from released import bert_encoder_config, mean_normalized, padded, sentences, wordpiece


def tiny(**shape) -> BertForPreTraining:
    config = ModelConfig(vocab_size=40, hidden_size=8, num_layers=3, num_heads=2, intermediate_size=12,
                         max_position_embeddings=16, **shape)  # fmt: skip
    torch.manual_seed(0)
    return randomised(BertForPreTraining(config)).eval()


def test_the_cut_is_the_one_computed_by_hand():
    """Dimensions 1, 4, 5, 6 of 8; layers 0 and 2 of 3; head 1 (of 2, 4 wide) in the first kept layer and head 0 in
    the second; 6 of 12 neurons; each LayerNorm's gain times its factor: every weight of the subclone is the source's
    element at the kept indices, by explicit loops."""
    source = tiny()
    dims, heads, neurons = [1, 4, 5, 6], [[1], [0]], [[0, 2, 3, 7, 9, 11], [1, 2, 4, 5, 6, 8]]
    gains = {"bert.embeddings.norm": 1.5, "bert.layers.2.ffn_norm": 0.5}
    plan = sc.Plan(layers=[0, 2], dims=dims, heads=heads, neurons=neurons, gains=gains)
    small = sc.cut(source, plan)
    big, got = source.state_dict(), small.state_dict()
    assert small.config.hidden_size == 4 and small.config.num_heads == 1 and small.config.num_layers == 2
    assert small.config.intermediate_size == 6
    for name in ("bert.embeddings.token.weight", "bert.embeddings.position.weight", "bert.embeddings.segment.weight"):
        for row in range(big[name].shape[0]):
            for j, d in enumerate(dims):
                assert got[name][row, j] == big[name][row, d]
    for j, d in enumerate(dims):
        assert got["bert.embeddings.norm.weight"][j] == pytest.approx(
            1.5 * float(big["bert.embeddings.norm.weight"][d])
        )
        assert got["bert.embeddings.norm.bias"][j] == big["bert.embeddings.norm.bias"][d]
    for small_layer, (layer, kept_heads, kept_neurons) in enumerate(zip([0, 2], heads, neurons)):
        ours, theirs = f"bert.layers.{small_layer}.", f"bert.layers.{layer}."
        columns = [h * 4 + c for h in kept_heads for c in range(4)]  # the kept heads' 4 columns each
        for part in range(3):  # q, k, v: rows part·8 + the kept heads' columns
            for i, column in enumerate(columns):
                for j, d in enumerate(dims):
                    got_w = got[ours + "attention.qkv.weight"][part * 4 + i, j]
                    assert got_w == big[theirs + "attention.qkv.weight"][part * 8 + column, d]
                assert (
                    got[ours + "attention.qkv.bias"][part * 4 + i]
                    == big[theirs + "attention.qkv.bias"][part * 8 + column]
                )
        for j, d in enumerate(dims):
            for i, column in enumerate(columns):
                assert got[ours + "attention.out.weight"][j, i] == big[theirs + "attention.out.weight"][d, column]
            for i, n in enumerate(kept_neurons):
                assert got[ours + "ffn.up.weight"][i, j] == big[theirs + "ffn.up.weight"][n, d]
                assert got[ours + "ffn.down.weight"][j, i] == big[theirs + "ffn.down.weight"][d, n]
            factor = 0.5 if layer == 2 else 1.0
            norm = float(big[theirs + "ffn_norm.weight"][d])
            assert float(got[ours + "ffn_norm.weight"][j]) == pytest.approx(factor * norm)
    for j, d in enumerate(dims):
        for i, e in enumerate(dims):
            assert got["bert.pooler.weight"][j, i] == big["bert.pooler.weight"][d, e]
            assert got["mlm_head.transform.weight"][j, i] == big["mlm_head.transform.weight"][d, e]
    assert torch.equal(got["mlm_head.bias"], big["mlm_head.bias"])
    assert got["mlm_head.decoder_weight"].data_ptr() == got["bert.embeddings.token.weight"].data_ptr()  # still tied


def test_keeping_every_part_gives_the_source_back():
    source = tiny()
    plan = sc.Plan(layers=[0, 1, 2], dims=list(range(8)), heads=[[0, 1]] * 3, neurons=[list(range(12))] * 3)
    ids = torch.randint(5, 40, (3, 10))
    mask = torch.ones_like(ids)
    with torch.no_grad():
        torch.testing.assert_close(
            sc.cut(source, plan).bert(ids, None, mask).sequence_output, source.bert(ids, None, mask).sequence_output
        )


def test_importance_and_gains_are_measured_as_defined():
    """The residual dimensions' importance is their mean magnitude over every layer's output; a LayerNorm's factor
    is the spread of its input over the kept dimensions against its spread over all (the embeddings' LayerNorm
    reads token + segment + position embeddings, recomputed here)."""
    source = tiny()
    ids = torch.randint(5, 40, (4, 12))
    batches = [{"input_ids": ids, "attention_mask": torch.ones_like(ids)}]
    found = sc.measure(source, batches)
    with torch.no_grad():
        states = source.bert(ids, None, torch.ones_like(ids), output_hidden_states=True).hidden_states[1:]
        x = source.bert.embeddings.token.weight[ids] + source.bert.embeddings.segment.weight[0]
        x = x + source.bert.embeddings.position.weight[:12]
    torch.testing.assert_close(found.dims, torch.stack(states).abs().mean(dim=(0, 1, 2)))
    kept = [0, 3, 4, 7]
    gains = sc.norm_gains(source, batches, kept)
    expected = (x[..., kept].std(-1, unbiased=False) / x.std(-1, unbiased=False)).mean()
    assert gains["bert.embeddings.norm"] == pytest.approx(float(expected), rel=1e-5)
    assert len(found.heads) == 3 and found.heads[0].shape == (2,) and found.neurons[0].shape == (12,)
    assert sc.choose(found, {"num_layers": 2, "hidden_size": 4, "num_heads": 1, "intermediate_size": 6}).layers == [
        0,
        2,
    ]


@pytest.mark.parametrize(("source", "kept", "expected"), [(6, 4, [0, 2, 3, 5]), (6, 6, list(range(6))), (6, 1, [5]),
                                                          (12, 4, [0, 4, 7, 11]), (3, 2, [0, 2])])  # fmt: skip
def test_layers_are_the_first_the_last_and_the_rest_spread_between(source, kept, expected):
    assert sc.spread_layers(source, kept) == expected


def test_a_shape_not_smaller_or_a_variant_is_refused_in_one_line():
    config = tiny().config
    with pytest.raises(UserError, match="hidden_size 16 is not from 1"):
        sc.target_shape(config, None, num_layers=2, hidden_size=16, intermediate_size=6)
    with pytest.raises(UserError, match="whole number of the source's 4-wide heads"):
        sc.target_shape(config, None, num_layers=2, hidden_size=6, intermediate_size=6)
    for variant in ({"norm_style": "pre"}, {"feed_forward": "glu"}, {"position_embedding": "rotary"}):
        with pytest.raises(UserError, match="subclone"):
            sc.check_cuttable(tiny(**variant))


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    """all-MiniLM-L6-v2's layout at a small size (3 layers of 48, 3 heads of 16), saved by SentenceTransformer.save,
    and text prepared with its tokenizer."""
    needs("sentence_transformers")
    import transformers

    root = tmp_path_factory.mktemp("subclone")
    tok = padded(wordpiece())
    encoder = root / "encoder"
    config = bert_encoder_config(tok.get_vocab_size())
    config.update({"hidden_size": 48, "num_hidden_layers": 3, "num_attention_heads": 3, "intermediate_size": 96})
    randomised(transformers.BertModel(config)).save_pretrained(encoder)
    transformers.BertTokenizerFast(tokenizer_object=tok, model_max_length=128).save_pretrained(encoder)
    model = mean_normalized(encoder, root / "minilm", 48, 128)
    text = sentences(600, seed=3)
    (root / "corpus.txt").write_text("\n\n".join(" ".join(text[i : i + 12]) for i in range(0, 600, 12)) + "\n")
    bertforge_ok(
        "prepare", root / "corpus.txt", "--tokenizer", model, "--out", root / "data", "--valid-fraction", "0.1"
    )
    return root


def test_a_released_sentence_model_is_subcloned_as_itself_and_continues(released, tmp_path):
    """The subclone is a BertModel of 2 layers of 32 (2 heads of 16) with its pooler and the source's modules at the
    new width: transformers and sentence-transformers load it, its card says where it came from, and it continues
    with `pretrain --init-from` (a new masked-LM head warmed up first)."""
    import transformers
    from sentence_transformers import SentenceTransformer

    out = tmp_path / "small"
    done = bertforge_ok("subclone", released / "minilm", "--data", released / "data", "--out", out, "--num-layers",
                        "2", "--hidden-size", "32", "--intermediate-size", "64", "--json")  # fmt: skip
    said = json.loads(done.stdout)
    assert said["layers"] == [0, 2] and said["hidden_size"] == 32 and said["num_heads"] == 2
    config = json.loads((out / "config.json").read_text())
    assert config["architectures"] == ["BertModel"] and config["hidden_size"] == 32
    assert config["num_attention_heads"] == 2 and config["bertforge_pretrain"]["subcloned"]["layers"] == [0, 2]
    loaded = transformers.AutoModel.from_pretrained(out)
    assert loaded.pooler is not None and loaded.config.num_hidden_layers == 2
    vectors = SentenceTransformer(str(out), device="cpu").encode(["the cat sat on the mat", "a bird sang"])
    assert vectors.shape == (2, 32)
    pooling = json.loads((out / "1_Pooling" / "config.json").read_text())
    assert pooling.get("embedding_dimension", pooling.get("word_embedding_dimension")) == 32
    assert "subclone" in (out / "README.md").read_text()
    run = tmp_path / "run"
    quick = ["--max-steps", "6", "--seq-len", "64", "--batch-size", "4", "--precision", "fp32", "--num-workers", "0"]
    bertforge_ok("pretrain", "--data", released / "data", "--out", run, "--init-from", out, *quick, "--quiet")
    assert json.loads((run / "model" / "config.json").read_text())["hidden_size"] == 32


def test_a_source_of_another_tokenizer_or_family_is_one_line(released, tmp_path, wordpiece_tokenizer):
    from bertforge import save_model

    pre_ln = ModelConfig.preset("tiny", vocab_size=wordpiece_tokenizer.get_vocab_size(), norm_style="pre")
    other = save_model(BertForPreTraining(pre_ln), tmp_path / "pre", wordpiece_tokenizer)
    for source, said in ((other, "subclone cuts BERT's own computation"), (released / "minilm", "is not from 1")):
        done = bertforge("subclone", source, "--data", released / "data", "--out", tmp_path / "out", "--preset", "base")
        one_line_error(done, said)
    assert not (tmp_path / "out").exists()
