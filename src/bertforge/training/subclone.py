"""`bertforge subclone`: a smaller model of a preset's shape cut out of a larger released one (weight subcloning,
Samragh et al. 2023), a start for `pretrain --init-from` that has learned the language already.

    bertforge prepare corpus/ --tokenizer all-MiniLM-L6-v2 --out data        # the text, with the source's tokenizer
    bertforge subclone all-MiniLM-L6-v2 --data data --preset mini --out minilm-mini
    bertforge pretrain --data data --out run --init-from minilm-mini --recipe budget

What is kept is measured on the user's own text (`measure`, a few batches of the prepared data through the source):

- the residual stream's dimensions: the ones whose values are largest on average over every layer's output (the
  same dimensions carry the most in every layer of a trained transformer, which is what makes one cut serve them
  all); every matrix that reads or writes the stream keeps those rows or columns, the embeddings included;
- each kept layer's attention heads (the source's head width kept: heads are dropped whole), ranked by how much
  they write into the stream (the norm of their output through the output projection);
- each kept layer's feed-forward neurons, ranked by their mean activation's magnitude;
- the layers: the first and the last, and the rest spread evenly between (6 -> 4 keeps 0, 2, 3 and 5).

A LayerNorm normalises over the dimensions it sees: over the kept ones alone, the largest, its spread is wider than
over all of them, and every value it gives would shrink. Each LayerNorm's gain is scaled by that ratio (measured on
the same text, `Plan.gains`), so that the kept dimensions come out as they did in the source. The model's vocabulary
and tokenizer are the source's; it is saved in the source's family and class, its card saying where it came from.
Only the paper's computation is cut (post-LN blocks, a plain feed-forward, learned positions): another family's or
variant's blocks are refused in one line.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from ..data.directory import read_meta
from ..data.instances import PackedDataset
from ..errors import UserError
from ..fileio import check_not_inputs, check_output_dir
from ..model.bert import BertForPreTraining, EncoderLayer, FeedForward, SelfAttention, Sight
from ..model.config import ModelConfig, preset_size
from ..modelfiles.directory import PRETRAINING_KEY, is_model_dir, load_model_and_tokenizer, save_model
from ..modelfiles.origin import read_origin
from ..modelfiles.sentence import SentencePipeline
from ..tokenizer import fingerprint, load_tokenizer, special_ids

MEASURE_BATCHES, MEASURE_BATCH, MEASURE_LENGTH = 16, 16, 128  # 32,768 tokens of the user's text
POOLING_WIDTHS = {"word_embedding_dimension", "embedding_dimension"}  # sentence-transformers' before v6, and since
FACTS_KEY = "subcloned"  # config.json's pre-training record, and the card, of where the model was cut from


@dataclass(frozen=True)
class Importance:
    """How much each part of the source carries on the measured text."""

    dims: torch.Tensor  # (H,) mean |value| of each residual dimension over every layer's output
    heads: list[torch.Tensor]  # L x (nh,) mean norm of what each head writes into the stream
    neurons: list[torch.Tensor]  # L x (I,) mean |activation| of each feed-forward neuron


@dataclass(frozen=True)
class Plan:
    """What the subclone keeps of its source, by index (each list in the source's order)."""

    layers: list[int]
    dims: list[int]
    heads: list[list[int]]  # per kept layer
    neurons: list[list[int]]  # per kept layer
    gains: dict[str, float] = dataclasses.field(default_factory=dict)  # a LayerNorm's name -> its gain's factor

    def facts(self, source: Path) -> dict[str, Any]:
        return {"from": str(source.absolute()), "layers": self.layers, "hidden_size": len(self.dims)}


def target_shape(config: ModelConfig, preset: str | None, **given: int | None) -> dict[str, int]:
    """The subclone's layers, width and feed-forward width: the preset's, then any given; its heads keep the source's
    width. Refused in one line where it is not smaller than (or as large as) the source in every part."""
    shape = {k: v for k, v in preset_size(preset).items() if k != "num_heads"} if preset else {}
    shape |= {key: value for key, value in given.items() if value is not None}
    missing = [key for key in ("num_layers", "hidden_size", "intermediate_size") if key not in shape]
    if missing:
        raise UserError(f"subclone: give --preset or --{missing[0].replace('_', '-')}")
    width = config.hidden_size // config.num_heads
    source = {"num_layers": config.num_layers, "hidden_size": config.hidden_size,
              "intermediate_size": config.intermediate_size}  # fmt: skip
    for key, value in shape.items():
        if not 1 <= value <= source[key]:
            raise UserError(f"subclone: {key} {value} is not from 1 to the source's {source[key]}")
    if shape["hidden_size"] % width:
        raise UserError(
            f"subclone: hidden_size {shape['hidden_size']} is not a whole number of the source's {width}-wide heads"
        )
    return shape | {"num_heads": shape["hidden_size"] // width}


def check_cuttable(model: BertForPreTraining) -> None:
    """The paper's blocks alone are cut: another family's or variant's computation (pre-LN, a gated feed-forward,
    rotary positions, ALiBi, DeBERTa's attention, a factorised embedding) would need its own rules."""
    config, bert = model.config, model.bert
    plain = all(
        type(layer) is EncoderLayer and type(layer.attention) is SelfAttention and type(layer.ffn) is FeedForward
        for layer in bert.layers
    )
    if not plain or type(bert.sight) is not Sight or config.embedding_width != config.hidden_size:
        raise UserError(
            "subclone cuts BERT's own computation (post-LN blocks, a plain feed-forward, learned positions, "
            "embeddings as wide as the layers): this model's family or variant computes otherwise"
        )
    if config.position_embedding != "learned":
        raise UserError(f"subclone: {config.position_embedding} positions are not cut; BERT's learned table is")


def measurement_batches(data_dir: Path, batches: int, seed: int = 0) -> list[dict[str, torch.Tensor]]:
    """Full windows of the user's prepared text, drawn with a fixed seed: what the importances are measured on."""
    ids = special_ids(load_tokenizer(data_dir))
    packed = PackedDataset(data_dir, "train", MEASURE_LENGTH, seed, ids.cls, ids.sep)
    n = packed.num_instances(0)
    if n == 0:
        raise UserError(f"{data_dir}: no window of {MEASURE_LENGTH} tokens to measure the source on")
    order = np.random.default_rng(seed).permutation(n)[: batches * MEASURE_BATCH]
    out = []
    for start in range(0, len(order), MEASURE_BATCH):
        rows = [packed[(0, int(i))].input_ids for i in order[start : start + MEASURE_BATCH]]
        input_ids = torch.from_numpy(np.stack(rows))  # (b, T)
        out.append({"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids)})
    return out


@torch.no_grad()
def measure(model: BertForPreTraining, batches: list[dict[str, torch.Tensor]]) -> Importance:
    """Each part's importance on `batches` (their tokens all real), from the source's own forward passes."""
    layers = model.bert.layers
    hs = model.config.hidden_size // model.config.num_heads
    heads = [torch.zeros(model.config.num_heads) for _ in layers]
    neurons = [torch.zeros(model.config.intermediate_size) for _ in layers]
    dims = torch.zeros(model.config.hidden_size)

    def written(i: int):
        def hook(module: nn.Linear, inputs):
            context = inputs[0]  # (B, T, nh·hs): the heads' outputs side by side, before the output projection
            for h in range(len(heads[i])):
                part = slice(h * hs, (h + 1) * hs)
                into_stream = context[..., part] @ module.weight[:, part].T  # (B, T, H)
                heads[i][h] += into_stream.norm(dim=-1).mean()

        return hook

    def activated(i: int):
        def hook(module: nn.Linear, inputs):
            neurons[i] += inputs[0].abs().mean(dim=(0, 1))  # (I,)

        return hook

    handles = [layer.attention.out.register_forward_pre_hook(written(i)) for i, layer in enumerate(layers)]
    handles += [layer.ffn.down.register_forward_pre_hook(activated(i)) for i, layer in enumerate(layers)]
    try:
        for batch in batches:
            out = model.bert(batch["input_ids"], None, batch["attention_mask"], output_hidden_states=True)
            dims += torch.stack(out.hidden_states[1:]).abs().mean(dim=(0, 1, 2))  # (H,) over layers and tokens
    finally:
        for handle in handles:
            handle.remove()
    return Importance(dims, heads, neurons)


def spread_layers(source: int, kept: int) -> list[int]:
    """`kept` of `source` layers: the first and the last, the rest spread evenly between."""
    if kept == 1:
        return [source - 1]
    return sorted({round(i * (source - 1) / (kept - 1)) for i in range(kept)})


def choose(importance: Importance, shape: dict[str, int]) -> Plan:
    """The most important parts, as many as `shape` holds, each kept in the source's order."""

    def top(scores: torch.Tensor, k: int) -> list[int]:
        return sorted(torch.topk(scores, k).indices.tolist())

    layers = spread_layers(len(importance.heads), shape["num_layers"])
    return Plan(
        layers=layers,
        dims=top(importance.dims, shape["hidden_size"]),
        heads=[top(importance.heads[i], shape["num_heads"]) for i in layers],
        neurons=[top(importance.neurons[i], shape["intermediate_size"]) for i in layers],
    )


@torch.no_grad()
def norm_gains(model: BertForPreTraining, batches: list[dict[str, torch.Tensor]], dims: list[int]) -> dict[str, float]:
    """Each LayerNorm's spread over the kept dimensions against its spread over all, on the source's own inputs to
    it: the factor its gain is scaled by, so that the kept dimensions are normalised as they were."""
    norms = {name: module for name, module in model.named_modules() if isinstance(module, nn.LayerNorm)}
    ratios: dict[str, list[float]] = {name: [] for name in norms}
    kept = torch.tensor(dims)

    def hook(name: str):
        def record(module, inputs):
            x = inputs[0]  # (..., H)
            ratios[name].append(float((x[..., kept].std(-1, unbiased=False) / x.std(-1, unbiased=False)).mean()))

        return record

    handles = [module.register_forward_pre_hook(hook(name)) for name, module in norms.items()]
    try:
        for batch in batches:
            hidden = model.bert(batch["input_ids"], None, batch["attention_mask"]).sequence_output  # (B, T, H)
            model.mlm_head.transformed(hidden)  # its LayerNorm's input too
    finally:
        for handle in handles:
            handle.remove()
    return {name: float(np.mean(found)) for name, found in ratios.items() if found}


def cut(model: BertForPreTraining, plan: Plan) -> BertForPreTraining:
    """The subclone: a model of the plan's shape holding the plan's parts of `model`'s weights, each LayerNorm's
    gain scaled by its factor."""
    config = model.config
    hs = config.hidden_size // config.num_heads
    shape = {"num_layers": len(plan.layers), "hidden_size": len(plan.dims), "num_heads": len(plan.heads[0]),
             "intermediate_size": len(plan.neurons[0])}  # fmt: skip
    small = BertForPreTraining(
        dataclasses.replace(config, **shape), pair_head=model.nsp_head is not None, pooler=model.bert.pooler is not None
    )
    dims = torch.tensor(plan.dims)
    state = model.state_dict()
    small.load_state_dict({name: _part(name, state, plan, dims, hs, config.hidden_size) for name in small.state_dict()})
    small.untrained_heads = getattr(model, "untrained_heads", frozenset())
    return small.train(model.training)


def _part(name: str, state: dict[str, torch.Tensor], plan: Plan, dims: torch.Tensor, hs: int, hidden: int):
    """The source's weights that parameter `name` of the subclone takes."""
    if name.startswith("bert.layers."):
        index, rest = name.removeprefix("bert.layers.").split(".", 1)
        return _layer_part(rest, f"bert.layers.{plan.layers[int(index)]}.", int(index), state, plan, dims, hs, hidden)
    value = state[name]
    if name.endswith("norm.weight"):
        return value[dims] * plan.gains.get(name.removesuffix(".weight"), 1.0)
    if name in ("bert.embeddings.token.weight", "bert.embeddings.segment.weight", "bert.embeddings.position.weight",
                "mlm_head.decoder_weight", "nsp_head.weight"):  # fmt: skip
        return value[:, dims]  # (rows, H')
    if name in ("bert.pooler.weight", "mlm_head.transform.weight"):
        return value[dims][:, dims]  # (H', H')
    if name in ("bert.pooler.bias", "mlm_head.transform.bias") or name.endswith("norm.bias"):
        return value[dims]
    if name in ("mlm_head.bias", "nsp_head.bias"):
        return value
    raise UserError(f"subclone: no rule to cut the weights {name}")


def _layer_part(rest: str, source: str, index: int, state, plan: Plan, dims: torch.Tensor, hs: int, hidden: int):
    """A kept layer's parameter `rest` from the source layer whose names start with `source`."""
    value = state[source + rest]
    heads = torch.tensor([h * hs + j for h in plan.heads[index] for j in range(hs)])  # the kept heads' columns
    neurons = torch.tensor(plan.neurons[index])
    if rest.startswith("attention.qkv."):
        rows = torch.cat([part * hidden + heads for part in range(3)])  # q, k and v: each its kept heads
        return value[rows][:, dims] if rest.endswith("weight") else value[rows]
    if rest == "attention.out.weight":
        return value[dims][:, heads]
    if rest == "ffn.up.weight":
        return value[neurons][:, dims]
    if rest == "ffn.up.bias":
        return value[neurons]
    if rest == "ffn.down.weight":
        return value[dims][:, neurons]
    if rest.endswith("norm.weight"):
        return value[dims] * plan.gains.get(source + rest.removesuffix(".weight"), 1.0)
    if rest in ("attention.out.bias", "ffn.down.bias") or rest.endswith("norm.bias"):
        return value[dims]
    raise UserError(f"subclone: no rule to cut the weights {source}{rest}")


def with_width(pipeline: SentencePipeline | None, hidden: int) -> SentencePipeline | None:
    """A sentence-transformers pipeline written back for a narrower encoder: its Pooling module's width the new one."""
    if pipeline is None:
        return None
    files = dict(pipeline.files)
    for path, data in pipeline.files.items():
        settings = json.loads(data) if path.endswith("/config.json") else None
        if isinstance(settings, dict) and POOLING_WIDTHS & set(settings):
            settings.update({key: hidden for key in POOLING_WIDTHS & set(settings)})
            files[path] = json.dumps(settings, indent=2).encode()
    return dataclasses.replace(pipeline, files=files)


def subclone(
    source: str | Path,
    data_dir: str | Path,
    out: str | Path,
    preset: str | None = None,
    batches: int = MEASURE_BATCHES,
    overwrite: bool = False,
    trust_pickle: bool = False,
    **shape: int | None,
) -> tuple[Path, Plan]:
    """Cut a model of `preset`'s shape (or the given num_layers, hidden_size, intermediate_size) out of `source`,
    measured on `data_dir` (prepared with the source's tokenizer); written whole to `out`."""
    data_dir, out = Path(data_dir), Path(out)
    files, model, tokenizer = load_model_and_tokenizer(source, BertForPreTraining, trust_pickle)
    check_not_inputs({"--out": out}, {"SOURCE": files.directory, "--data": data_dir})
    check_output_dir(out, overwrite, "a model", out.is_dir() and is_model_dir(out))
    origin = read_origin(files)
    origin.check_computable()
    check_cuttable(model)
    if fingerprint(tokenizer) != read_meta(data_dir)["tokenizer_fingerprint"]:
        raise UserError(
            f"--data {data_dir}: prepared with another tokenizer than {files.directory}'s; prepare the text with "
            f"the source's: bertforge prepare TEXT --tokenizer {files.directory} --out DATA"
        )
    target = target_shape(model.config, preset, **shape)
    model = model.float().eval()
    measured_on = measurement_batches(data_dir, batches)
    plan = choose(measure(model, measured_on), target)
    plan = dataclasses.replace(plan, gains=norm_gains(model, measured_on, plan.dims))
    small = cut(model, plan)
    origin = dataclasses.replace(origin, sentence=with_width(origin.sentence, len(plan.dims)))
    facts = {FACTS_KEY: plan.facts(files.directory)}
    save_model(small, out, tokenizer, {PRETRAINING_KEY: {**files.pretraining, **facts}}, facts, origin)
    return out, plan
