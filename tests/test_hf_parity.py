"""The strongest correctness test: the same weights in bertforge and in `transformers` give the same outputs.

`transformers` is the reference implementation of BERT. Random-weight models
are built there, saved, loaded here (and the reverse), and every output is
compared in fp32 eval mode, with padded batches.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
import torch

from bertforge import BertForPreTraining, ModelConfig, load_model, save_model
from bertforge.errors import UserError
from bertforge.tokenizer import load_tokenizer, save_tokenizer
from bertforge.training.continued import continued_configs
from bertforge.training.trainer import Trainer

from conftest import assert_fill_mask_is_the_pipeline, needs, prepared_data, randomised

HF_CONFIGS = [
    dict(vocab_size=120, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64),
    dict(
        vocab_size=97,
        hidden_size=48,
        num_hidden_layers=1,
        num_attention_heads=4,
        intermediate_size=80,
        hidden_act="relu",
    ),
    dict(
        vocab_size=110,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        hidden_act="silu",
    ),  # fmt: skip
    dict(
        vocab_size=130,
        hidden_size=64,
        num_hidden_layers=3,
        num_attention_heads=8,
        intermediate_size=128,
        tie_word_embeddings=False,
        layer_norm_eps=1e-6,
    ),
]


def hf_model(config_kwargs: dict, seed: int = 0, attn: str = "sdpa"):
    transformers = needs("transformers")
    torch.manual_seed(seed)
    config = transformers.BertConfig(**config_kwargs, attn_implementation=attn)
    model = transformers.BertForPreTraining(config)
    with torch.no_grad():  # every parameter random, biases and LayerNorms included, so nothing matches by accident
        for p in model.parameters():
            p.normal_(0.0, 0.2)
    return model.eval()


def padded_batch(vocab: int, seed: int = 1):
    g = torch.Generator().manual_seed(seed)
    B, T = 3, 14
    input_ids = torch.randint(5, vocab, (B, T), generator=g)
    attention_mask = torch.ones(B, T, dtype=torch.long)
    attention_mask[1, 9:] = 0
    attention_mask[2, 5:] = 0
    input_ids[attention_mask == 0] = 0
    token_type_ids = torch.zeros(B, T, dtype=torch.long)
    token_type_ids[:, 7:] = 1
    token_type_ids[attention_mask == 0] = 0
    labels = torch.full((B, T), -100)
    chosen = (torch.rand(B, T, generator=g) < 0.4) & (attention_mask == 1)
    labels[chosen] = torch.randint(5, vocab, (int(chosen.sum()),), generator=g)
    nsp = torch.tensor([0, 1, 0])
    return input_ids, token_type_ids, attention_mask, labels, nsp


def assert_same_outputs(ours, theirs, vocab: int):
    input_ids, token_type_ids, attention_mask, labels, nsp = padded_batch(vocab)
    with torch.no_grad():
        a = ours(input_ids, token_type_ids, attention_mask)
        b = theirs(input_ids=input_ids, token_type_ids=token_type_ids, attention_mask=attention_mask)
        real = attention_mask.bool()
        torch.testing.assert_close(a.mlm_logits[real], b.prediction_logits[real], rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(a.nsp_logits, b.seq_relationship_logits, rtol=1e-5, atol=1e-5)
        a_loss = ours(input_ids, token_type_ids, attention_mask, mlm_labels=labels, nsp_labels=nsp).loss
        b_loss = theirs(
            input_ids=input_ids,
            token_type_ids=token_type_ids,
            attention_mask=attention_mask,
            labels=labels,
            next_sentence_label=nsp,
        ).loss
        torch.testing.assert_close(a_loss, b_loss, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("config_kwargs", HF_CONFIGS)
@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_transformers_weights_give_the_same_outputs_in_bertforge(config_kwargs, attn, tmp_path):
    theirs = hf_model(config_kwargs, attn=attn)
    theirs.save_pretrained(tmp_path)
    ours = load_model(BertForPreTraining, tmp_path)
    assert_same_outputs(ours, theirs, config_kwargs["vocab_size"])


@pytest.mark.parametrize("config_kwargs", HF_CONFIGS)
def test_bertforge_weights_give_the_same_outputs_in_transformers(config_kwargs, tmp_path):
    transformers = needs("transformers")
    ours = load_model(BertForPreTraining, _saved(hf_model(config_kwargs, seed=3), tmp_path / "src"))
    save_model(ours, tmp_path / "ours", None)
    theirs = transformers.AutoModelForPreTraining.from_pretrained(tmp_path / "ours", attn_implementation="sdpa").eval()
    assert_same_outputs(ours, theirs, config_kwargs["vocab_size"])


def _saved(model, path):
    model.save_pretrained(path)
    return path


def test_our_random_init_round_trips_through_transformers(tmp_path):
    transformers = needs("transformers")
    torch.manual_seed(0)
    ours = BertForPreTraining(
        ModelConfig(vocab_size=150, hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64)
    ).eval()
    save_model(ours, tmp_path, None)
    theirs = transformers.BertForPreTraining.from_pretrained(tmp_path).eval()
    assert_same_outputs(ours, theirs, 150)
    masked = transformers.AutoModelForMaskedLM.from_pretrained(tmp_path).eval()
    ids = torch.randint(5, 150, (2, 9))
    torch.testing.assert_close(masked(input_ids=ids).logits, ours(ids).mlm_logits, rtol=1e-5, atol=1e-5)


def test_a_masked_lm_directory_loads_as_a_masked_lm_with_no_head_it_lacks(tmp_path):
    """A BertForMaskedLM has no pooler and no next-sentence head: loaded, it gets none (no fresh, untrained head to
    answer from or to save) and it is saved as a BertForMaskedLM again."""
    transformers = needs("transformers")
    torch.manual_seed(0)
    config = transformers.BertConfig(**HF_CONFIGS[0])
    theirs = transformers.BertForMaskedLM(config).eval()
    theirs.save_pretrained(tmp_path / "theirs")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no head is initialised fresh
        ours = load_model(BertForPreTraining, tmp_path / "theirs")
    assert ours.nsp_head is None and ours.bert.pooler is None and ours.hf_architecture == "BertForMaskedLM"
    ids = torch.randint(5, 120, (2, 9))
    torch.testing.assert_close(ours(ids).mlm_logits, theirs(input_ids=ids).logits, rtol=1e-5, atol=1e-5)
    save_model(ours, tmp_path / "ours", None)
    assert json.loads((tmp_path / "ours" / "config.json").read_text())["architectures"] == ["BertForMaskedLM"]
    _, info = transformers.BertForMaskedLM.from_pretrained(tmp_path / "ours", output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]


def test_continued_pretraining_starts_from_a_transformers_directory(tmp_path):
    """`pretrain --init-from` a `transformers` BERT directory: before its first step the run's model gives that
    model's outputs."""
    root = prepared_data(tmp_path, seed=3)
    tokenizer = load_tokenizer(root / "tok")
    vocab = tokenizer.get_vocab_size()
    theirs = hf_model({**HF_CONFIGS[0], "vocab_size": vocab, "max_position_embeddings": 64})
    theirs.save_pretrained(root / "hf")
    save_tokenizer(tokenizer, root / "hf")
    model_config, cfg = continued_configs(
        "bert", str(root / "hf"), {}, {"seq_len": 64, "precision": "fp32", "num_workers": 0}
    )
    trainer = Trainer(root / "data", root / "run", model_config, cfg, progress=False)
    assert_same_outputs(trainer.model.eval(), theirs, vocab)


VARIANTS = [
    {"norm_style": "pre"},
    {"position_embedding": "sinusoidal"},
    {"norm_style": "pre", "position_embedding": "sinusoidal"},
]


def real_positions(ours_logits, their_logits, attention_mask):
    real = attention_mask.bool()
    torch.testing.assert_close(ours_logits[real], their_logits[real], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_variant_loads_in_transformers_with_the_same_outputs(variant, wordpiece_tokenizer, tmp_path):
    """Pre-LN saves as roberta-prelayernorm (positions offset past the padding index), sinusoidal positions as a
    fixed table: AutoModelForMaskedLM gives our logits on padded batches, and pipeline("fill-mask") our answers."""
    transformers = needs("transformers")
    vocab = wordpiece_tokenizer.get_vocab_size()
    config = ModelConfig(vocab_size=vocab, hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64, **variant)
    ours = randomised(BertForPreTraining(config))
    save_model(ours, tmp_path, wordpiece_tokenizer)
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["model_type"] == ("roberta-prelayernorm" if config.norm_style == "pre" else "bert")
    attn = attention_implementations(config.norm_style)[0]
    theirs = transformers.AutoModelForMaskedLM.from_pretrained(tmp_path, attn_implementation=attn).eval()
    input_ids, token_type_ids, attention_mask, _, _ = padded_batch(vocab)
    with torch.no_grad():
        real_positions(
            ours(input_ids, token_type_ids, attention_mask).mlm_logits,
            theirs(input_ids=input_ids, token_type_ids=token_type_ids, attention_mask=attention_mask).logits,
            attention_mask,
        )
    again = load_model(BertForPreTraining, tmp_path)
    assert again.config == config
    torch.testing.assert_close(again(input_ids).nsp_logits, ours(input_ids).nsp_logits)  # our own keys come back too
    assert_fill_mask_is_the_pipeline(tmp_path, "the cat [MASK] on the mat.")


FAMILY_MASKED_LM = {"post": "BertForMaskedLM", "pre": "RobertaPreLayerNormForMaskedLM"}


def attention_implementations(norm_style: str) -> list[str]:
    """sdpa and eager, or eager alone where the installed transformers has no sdpa for the family (4.x's
    RobertaPreLayerNorm)."""
    transformers = needs("transformers")
    family = getattr(transformers, FAMILY_MASKED_LM[norm_style])
    return ["sdpa", "eager"] if getattr(family, "_supports_sdpa", False) else ["eager"]


# What no transformers class computes, alone and together: an attention bias, a gated feed-forward, rotary positions.
REMOTE_VARIANTS = {
    "alibi": {"attention_bias": "alibi"},
    "glu": {"feed_forward": "glu"},
    "alibi-glu": {"attention_bias": "alibi", "feed_forward": "glu"},
    "rotary": {"position_embedding": "rotary"},
    "rotary-glu": {"position_embedding": "rotary", "feed_forward": "glu"},
}
# (norm style, variant): each variant in both places of the norms, and SwiGLU on post-LN alone (a pre-LN BERT is saved
# as RoBERTa-PreLayerNorm, whose masked-LM head applies gelu whatever hidden_act says: refused, as the test below)
REMOTE_CASES = [(style, name) for name in REMOTE_VARIANTS for style in ("post", "pre")] + [("post", "rotary-swiglu")]
REMOTE_VARIANTS["rotary-swiglu"] = {"position_embedding": "rotary", "feed_forward": "glu", "hidden_act": "silu"}


def test_an_activation_a_familys_head_does_not_apply_is_refused_built_or_read(tmp_path):
    """RoBERTa's and ELECTRA's masked-LM heads apply gelu whatever hidden_act says: a pre-LN BERT (saved as
    RoBERTa-PreLayerNorm) with relu is refused when built, and a RoBERTa config.json with silu when read."""
    transformers = needs("transformers")
    with pytest.raises(UserError, match="applies gelu whatever hidden_act says"):
        ModelConfig(vocab_size=100, hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64,
                    norm_style="pre", hidden_act="relu")  # fmt: skip
    config = transformers.RobertaConfig(vocab_size=100, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                        intermediate_size=64, hidden_act="silu")  # fmt: skip
    transformers.RobertaForMaskedLM(config).save_pretrained(tmp_path / "roberta")
    with pytest.raises(UserError, match="RoBERTa family's masked-LM head applies gelu"):
        load_model(BertForPreTraining, tmp_path / "roberta")


def test_every_variant_transformers_lacks_is_raced_against_the_modeling_file():
    """A position scheme, attention bias or feed-forward registered as not `native` is saved with
    assets/modeling_bertforge.py, a second implementation: the registry leads here, and the case below runs it
    against ours."""
    from bertforge.model.variants import ATTENTION_BIASES, FEED_FORWARDS, POSITION_SCHEMES

    raced = {value for variant in REMOTE_VARIANTS.values() for value in variant.values()}
    registries = (POSITION_SCHEMES, ATTENTION_BIASES, FEED_FORWARDS)
    # A variant that comes with a family's shape (`requires`: MPNet's relative bias) is that family's own
    # transformers class's to compute; tests/test_mpnet.py races it.
    lacking = [
        v.name for registry in registries for v in registry.records() if not v.native and not getattr(v, "requires", 0)
    ]
    assert lacking and set(lacking) <= raced, "add it to REMOTE_VARIANTS, and compute it in modeling_bertforge.py"


@pytest.mark.parametrize(("norm_style", "variant"), REMOTE_CASES)
def test_variants_load_in_transformers_through_their_own_code_with_the_same_outputs(
    norm_style, variant, wordpiece_tokenizer, tmp_path
):
    """No `transformers` class has an attention bias, a gated feed-forward or rotary positions: the directory
    carries modeling_bertforge.py, which transformers runs only when trusted, and which gives our logits and
    fill-mask answers on padded batches."""
    transformers = needs("transformers")

    vocab = wordpiece_tokenizer.get_vocab_size()
    config = ModelConfig(
        vocab_size=vocab,
        hidden_size=32,
        num_layers=2,
        num_heads=4,
        intermediate_size=64,
        norm_style=norm_style,
        **REMOTE_VARIANTS[variant],
    )
    ours = randomised(BertForPreTraining(config))
    # transformers caches a directory's code under the directory's name, for all test workers: one name per case
    directory = tmp_path / f"{variant}-{norm_style}"
    save_model(ours, directory, wordpiece_tokenizer)
    assert (directory / "modeling_bertforge.py").is_file()
    # transformers 4.x's pipeline loads a tokenizer for a model type it does not know only where config.json names one:
    # the class that runs tokenizer.json as it is, NFC included (BertTokenizerFast would rebuild its normaliser)
    assert json.loads((directory / "config.json").read_text())["tokenizer_class"] == "PreTrainedTokenizerFast"
    with pytest.raises(ValueError, match="trust_remote_code"):
        transformers.AutoModelForMaskedLM.from_pretrained(directory)
    input_ids, token_type_ids, attention_mask, _, _ = padded_batch(vocab)
    inputs = dict(input_ids=input_ids, token_type_ids=token_type_ids, attention_mask=attention_mask)
    with torch.no_grad():
        expected = ours(input_ids, token_type_ids, attention_mask)
        for attn in attention_implementations(norm_style):
            theirs = transformers.AutoModelForMaskedLM.from_pretrained(
                directory, trust_remote_code=True, attn_implementation=attn
            ).eval()
            real_positions(expected.mlm_logits, theirs(**inputs).logits, attention_mask)
        if config.feed_forward == "mlp":  # the variant is what makes them agree: the family's own class differs,
            # by far more than the 1e-5 they agree to (rotary's turn moves these small random scores least)
            plain = getattr(transformers, FAMILY_MASKED_LM[norm_style]).from_pretrained(directory).eval()
            assert (plain(**inputs).logits - theirs(**inputs).logits).abs().max() > 1e-4
        # The encoder alone (AutoModel) has the bias however it is called: Sentence-Transformers calls its forward
        # directly, which skips forward hooks.
        encoder = transformers.AutoModel.from_pretrained(directory, trust_remote_code=True).eval()
        hidden = encoder.forward(**inputs).last_hidden_state  # (B, T, H)
        torch.testing.assert_close(hidden, encoder(**inputs).last_hidden_state)
        ours_hidden = ours.bert(input_ids, token_type_ids, attention_mask).sequence_output
        real = attention_mask.bool()
        torch.testing.assert_close(hidden[real], ours_hidden[real], rtol=1e-5, atol=1e-5)
        if norm_style == "post":
            pretraining = transformers.AutoModelForPreTraining.from_pretrained(directory, trust_remote_code=True)
            torch.testing.assert_close(
                pretraining.eval()(**inputs).seq_relationship_logits, expected.nsp_logits, rtol=1e-5, atol=1e-5
            )
    assert_fill_mask_is_the_pipeline(directory, "the cat [MASK] on the mat.", trust_remote_code=True)
    again = load_model(BertForPreTraining, directory)
    assert again.config == ours.config
    torch.testing.assert_close(again(input_ids).mlm_logits, ours(input_ids).mlm_logits)


@pytest.mark.parametrize("norm_style", ["post", "pre"])
def test_a_model_transformers_builds_from_the_config_alone_starts_as_the_family_does(
    norm_style, wordpiece_tokenizer, tmp_path
):
    """`from_config` trains from scratch in `transformers`: the gated and rotary layers the directory's code puts in
    start as every other Linear there, normal(0, initializer_range) with zero bias, not torch's default (whose
    std at width 32 is about 0.1)."""
    transformers = needs("transformers")
    config = ModelConfig(
        vocab_size=wordpiece_tokenizer.get_vocab_size(),
        hidden_size=32,
        num_layers=2,
        num_heads=4,
        intermediate_size=64,
        norm_style=norm_style,
        position_embedding="rotary",
        feed_forward="glu",
    )
    directory = tmp_path / f"from-config-{norm_style}"
    save_model(BertForPreTraining(config), directory, wordpiece_tokenizer)
    hf_config = transformers.AutoConfig.from_pretrained(directory, trust_remote_code=True)
    model = transformers.AutoModelForMaskedLM.from_config(hf_config, trust_remote_code=True)
    layer = model.base_model.encoder.layer[0]
    assert type(layer.intermediate.dense).__name__ == "GatedDense"
    assert type(layer.attention.self.query).__name__ == "RotaryDense"
    linears = [module for module in model.base_model.encoder.modules() if isinstance(module, torch.nn.Linear)]
    assert len(linears) == 2 * 6  # q, k, v, attention output, intermediate, output in each layer
    for module in linears:
        assert module.weight.std().item() == pytest.approx(hf_config.initializer_range, rel=0.15)
        assert not module.bias.any()


def test_the_modeling_file_for_transformers_needs_only_torch_and_transformers():
    """It travels with the model to machines without bertforge, and carries model/positions.py's functions as they
    are written there, byte for byte: one source for the arithmetic both compute."""
    import ast
    import importlib.util

    from bertforge.fileio import asset_path
    from bertforge.model import positions

    path = asset_path("modeling_bertforge.py")
    tree = ast.parse(path.read_text(encoding="utf-8"))
    imported = {
        alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names
    }
    imported |= {
        node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module
    }
    assert imported == {"__future__", "inspect", "types", "torch", "transformers"}  # the standard library, and these

    def functions(text: str) -> dict[str, str]:
        module = ast.parse(text)
        return {n.name: ast.get_source_segment(text, n) for n in module.body if isinstance(n, ast.FunctionDef)}

    carried = functions(path.read_text(encoding="utf-8"))
    for name in ("alibi_bias", "rotary_angles", "rotate"):
        assert carried[name] == functions(Path(positions.__file__).read_text(encoding="utf-8"))[name], name
    spec = importlib.util.spec_from_file_location("modeling_bertforge", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # and it runs
    cos, sin = module.rotary_angles(torch.arange(9), 16)
    assert module.rotate(torch.randn(3, 9, 16), cos, sin).shape == (3, 9, 16)


def head_config(norm_style: str, variant: str) -> ModelConfig:
    """A small encoder under a task head, in either family: BERT's ("none"), or one of REMOTE_VARIANTS."""
    return ModelConfig(
        vocab_size=100,
        hidden_size=32,
        num_layers=2,
        num_heads=2,
        intermediate_size=64,
        norm_style=norm_style,
        **REMOTE_VARIANTS.get(variant, {}),
    )


@pytest.mark.parametrize("norm_style", ["post", "pre"])
@pytest.mark.parametrize("variant", ["none", "alibi", "glu", "rotary"])
def test_fine_tuning_heads_load_in_transformers_with_the_same_outputs(norm_style, variant, tmp_path):
    """Sequence classification (RoBERTa's dense + out_proj head for pre-LN), token classification and QA; with
    ALiBi through the directory's own code. What transformers saves again loads back in bertforge."""
    transformers = needs("transformers")
    from bertforge.model.heads import (
        BertForQuestionAnswering,
        BertForSequenceClassification,
        BertForTokenClassification,
    )

    config = head_config(norm_style, variant)
    input_ids, token_type_ids, attention_mask, _, _ = padded_batch(100)
    cases = [
        (
            BertForSequenceClassification(config, num_labels=3),
            transformers.AutoModelForSequenceClassification,
            {"id2label": {"0": "a", "1": "b", "2": "c"}, "label2id": {"a": 0, "b": 1, "c": 2}},
        ),
        (
            BertForTokenClassification(config, num_labels=4),
            transformers.AutoModelForTokenClassification,
            {"id2label": {str(i): f"T{i}" for i in range(4)}, "label2id": {f"T{i}": i for i in range(4)}},
        ),
        (BertForQuestionAnswering(config), transformers.AutoModelForQuestionAnswering, {}),
    ]
    for ours, auto, extra in cases:
        ours = randomised(ours)
        directory = tmp_path / f"{type(ours).__name__}-{norm_style}-{variant}"  # one code cache name per case
        save_model(ours, directory, None, extra)
        theirs = auto.from_pretrained(directory, trust_remote_code=variant != "none").eval()
        with torch.no_grad():
            ours_logits = ours(input_ids, token_type_ids, attention_mask)[0]
            out = theirs(input_ids=input_ids, token_type_ids=token_type_ids, attention_mask=attention_mask)
        their_logits = out.logits if hasattr(out, "logits") else torch.stack([out.start_logits, out.end_logits], -1)
        if ours_logits.ndim == 2:
            torch.testing.assert_close(ours_logits, their_logits, rtol=1e-5, atol=1e-5)
        else:
            real_positions(ours_logits, their_logits, attention_mask)
        theirs.save_pretrained(directory / "saved_by_transformers")  # e.g. after fine-tuning there; ALiBi's code too
        for saved in (directory, directory / "saved_by_transformers"):
            loaded = load_model(
                type(ours), saved, **({"num_labels": ours.num_labels} if hasattr(ours, "num_labels") else {})
            )
            torch.testing.assert_close(loaded(input_ids, token_type_ids, attention_mask)[0], ours_logits)


@pytest.mark.parametrize("norm_style", ["post", "pre"])
@pytest.mark.parametrize("variant", ["none", "alibi", "glu", "rotary"])
def test_multiple_choice_loads_in_transformers_with_the_same_outputs(norm_style, variant, tmp_path):
    """BertForMultipleChoice (RoBERTa's too scores the pooler's output): (questions, choices, T) in, one logit per
    choice out, padded choices included."""
    transformers = needs("transformers")
    from bertforge.model.heads import BertForMultipleChoice

    config = head_config(norm_style, variant)
    ours = randomised(BertForMultipleChoice(config))
    directory = tmp_path / f"choice-{norm_style}-{variant}"  # one code cache name per case
    save_model(ours, directory, None)
    theirs = transformers.AutoModelForMultipleChoice.from_pretrained(
        directory, trust_remote_code=variant != "none"
    ).eval()
    input_ids, token_type_ids, attention_mask, _, _ = padded_batch(100)  # 3 rows: one question, 3 choices
    question = [x.view(1, 3, -1) for x in (input_ids, token_type_ids, attention_mask)]
    with torch.no_grad():
        ours_logits = ours(*question)[0]  # (1, 3)
        their_logits = theirs(input_ids=question[0], token_type_ids=question[1], attention_mask=question[2]).logits
        torch.testing.assert_close(ours_logits, their_logits, rtol=1e-5, atol=1e-5)
        again = load_model(BertForMultipleChoice, directory)
        torch.testing.assert_close(again(*question)[0], ours_logits)


@pytest.mark.parametrize("pad_token_id", [0, 1])
def test_transformers_roberta_prelayernorm_weights_give_the_same_outputs_in_bertforge(pad_token_id, tmp_path):
    """The other direction, with RoBERTa's own padding id (1) too: positions start at pad_token_id + 1."""
    transformers = needs("transformers")
    torch.manual_seed(0)
    hf_config = transformers.RobertaPreLayerNormConfig(
        vocab_size=100,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=40,
        type_vocab_size=2,
        pad_token_id=pad_token_id,
    )
    theirs = randomised(transformers.RobertaPreLayerNormForMaskedLM(hf_config))
    theirs.save_pretrained(tmp_path)
    ours = load_model(BertForPreTraining, tmp_path)
    assert ours.config.norm_style == "pre" and ours.config.max_position_embeddings == 40 - pad_token_id - 1
    input_ids = torch.randint(5, 100, (2, 12))  # no padding: RoBERTa's positions count the non-pad tokens
    with torch.no_grad():
        torch.testing.assert_close(ours(input_ids).mlm_logits, theirs(input_ids=input_ids).logits, rtol=1e-5, atol=1e-5)


def test_pickle_only_directory_is_refused(tmp_path):
    theirs = hf_model(HF_CONFIGS[0])
    theirs.save_pretrained(tmp_path)
    state = {k: v for k, v in theirs.state_dict().items()}
    torch.save(state, tmp_path / "pytorch_model.bin")
    (tmp_path / "model.safetensors").unlink()
    with pytest.raises(UserError, match="pickle"):
        load_model(BertForPreTraining, tmp_path)


def test_fill_mask_cli_matches_the_transformers_pipeline(wordpiece_tokenizer, tmp_path):
    """Same directory, same text with two masks: the same top-k tokens with the same scores at each."""
    vocab = wordpiece_tokenizer.get_vocab_size()
    theirs = hf_model(
        dict(vocab_size=vocab, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)
    )
    theirs.save_pretrained(tmp_path)
    save_tokenizer(wordpiece_tokenizer, tmp_path)
    assert_fill_mask_is_the_pipeline(tmp_path, "the cat [MASK] on the [MASK].")


@pytest.mark.parametrize("layer", [-1, 1, 0])
@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_embed_matches_transformers_hidden_states_text_by_text(wordpiece_tokenizer, pooling, layer, tmp_path):
    """Batched by length with padding, each vector equals transformers' output for that text alone, at the layer
    asked for (0 = the embeddings, as transformers' hidden_states count)."""
    import bertforge

    vocab = wordpiece_tokenizer.get_vocab_size()
    theirs = hf_model(
        dict(vocab_size=vocab, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)
    )
    theirs.save_pretrained(tmp_path)
    save_tokenizer(wordpiece_tokenizer, tmp_path)
    texts = [
        "the cat sat on the mat and looked at the dog for a long time.",
        "a dog.",
        "the cat sat.",
        "it rained all day long",
    ]
    ours = bertforge.load(tmp_path).embed(texts, pooling=pooling, layer=layer, batch_size=3)  # (4, H); mixed lengths
    assert ours.shape == (len(texts), 32)
    for text, vector in zip(texts, ours):
        ids = torch.tensor([wordpiece_tokenizer.encode(text).ids])  # (1, T)
        with torch.no_grad():
            hidden = theirs.bert(input_ids=ids, output_hidden_states=True).hidden_states[layer][0]  # (T, H)
        expected = hidden[0] if pooling == "cls" else hidden.mean(0)
        assert torch.allclose(torch.from_numpy(vector), expected, atol=1e-5)
