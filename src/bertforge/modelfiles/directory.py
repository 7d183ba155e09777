"""Model directories: a Hugging Face BERT directory (config.json, model.safetensors, tokenizer files, README.md).

    save_model(model, directory, tokenizer)   written atomically as a whole, with its model card
    read_model_files(path)                    a run or model directory read once: config, family, weights' index
    load_model(cls, directory)                any such directory, ours or written by `transformers`
    load_weights(model, files)                its weights into a model built already (continued pre-training)
    load_model_and_tokenizer(path)            a run or model directory, vocabularies checked against each other

We never unpickle what a user hands us: weights are safetensors, and a
pickle-only directory is refused unless the user says they trust it.
"""

from __future__ import annotations

import dataclasses
import math
import shutil
import warnings
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer

from ..errors import UserError, one_line
from ..families import Family, encoder_has_pooler, family_of
from ..families.architectures import head_prefixes
from ..fileio import asset_path, atomic_directory, read_json, write_json
from ..model.bert import BertForPreTraining
from ..model.config import ModelConfig
from ..model.heads import BertForSentenceEmbedding
from ..objectives import objective
from ..tokenizer import (
    ROLES,
    TOKENIZER_FILES,
    LoadedTokenizer,
    hf_tokenizer_class,
    max_input_length,
    save_tokenizer,
    special_ids,
)
from .card import CARD, card_with_section, model_card
from .exported import is_exported
from .header import WeightIndex, weight_index
from .hf import (
    HF_IGNORED,
    POSITIONS,
    REMOTE_CODE,
    config_from_hf,
    config_to_hf,
    from_hf_state_dict,
    needs_remote_code,
    their_name,
    to_hf_state_dict,
)
from .schema import check_config
from .sentence import SentencePipeline, write_pipeline
from .vocabulary import model_tokenizer

if TYPE_CHECKING:
    from .origin import Origin

PRETRAINING_KEY = "bertforge_pretrain"  # config.json's record of how a model was pre-trained


def is_model_dir(path: Path) -> bool:
    """A Hugging Face model directory: config.json and its weights, or its exported graph (exported.py)."""
    return (path / "config.json").is_file() and (
        (path / "model.safetensors").is_file() or (path / "pytorch_model.bin").is_file() or is_exported(path)
    )


def resolve_model_dir(path: str | Path) -> Path:
    """A run directory holds its final model in model/; a model directory is itself."""
    path = Path(path)
    if not path.exists():
        raise UserError(f"{path}: no such file or directory")
    if is_model_dir(path):
        return path
    if (path / "model" / "config.json").is_file():
        return path / "model"
    inside = model_dirs_inside(path)
    hint = f"; the run and model directories inside it: {', '.join(map(str, inside[:3]))}" if inside else ""
    raise UserError(
        f"{path}: neither a model directory (config.json + model.safetensors) nor a run directory with model/{hint}"
    )


def model_dirs_inside(path: Path, depth: int = 3) -> list[Path]:
    """The run and model directories up to `depth` levels below `path`, shallowest first, latest name first among
    equals: what a user meant by the demo's stage directory (books/run) or by a run killed before its model/ (its
    checkpoints/step_NNNNNN)."""
    found: list[Path] = []
    level = [path] if path.is_dir() else []
    for _ in range(depth):
        children = sorted((child for parent in level for child in _subdirectories(parent)), reverse=True)
        usable = [child for child in children if is_model_dir(child) or is_model_dir(child / "model")]
        found += usable
        level = [child for child in children if child not in usable]
    return found


def _subdirectories(path: Path) -> list[Path]:
    try:
        return [child for child in path.iterdir() if child.is_dir()]
    except OSError:  # unreadable: nothing to suggest there
        return []


def read_config(directory: Path) -> dict[str, Any]:
    """config.json, read bounded (fileio.read_json) and checked against the one schema (schema.py) before any of
    its values is used."""
    path = directory / "config.json"
    if not path.is_file():
        raise UserError(f"{directory}: not a model directory (no config.json)")
    return check_config(read_json(path, "config"), str(path))


# What a weight may be stored as; anything else (an integer tensor where a weight belongs) is refused unread.
WEIGHT_DTYPES = ("F16", "BF16", "F32", "F64")


@dataclass(frozen=True)
class ModelFiles:
    """A model directory read once, in one pass: config.json (checked by the schema) as its family reads it, and the
    names, shapes and dtypes of its weights from the safetensors header, no tensor yet. What the directory holds
    (its pre-training heads, its pooler, how it was pre-trained) is asked of this record, from the family's names
    for those parts, so that loading a model and its tokenizer opens each file once."""

    directory: Path
    raw: dict[str, Any]  # config.json as written
    config: ModelConfig  # as the model's family reads it
    index: WeightIndex | None  # None: a pickle-only directory, or an export

    @property
    def family(self) -> Family:
        return family_of(self.config)

    @property
    def exported(self) -> bool:
        """`bertforge export`'s directory: a graph that serves (serving/served.py's `load_served`), no weights to
        train."""
        return self.index is None and is_exported(self.directory)

    def refuse_export(self) -> None:
        """One line for a verb that needs the PyTorch model (training, evaluating, extending) given an export."""
        if self.exported:
            raise UserError(
                f"{self.directory} is an exported model (an ONNX graph, no PyTorch weights): it serves embed, "
                "classify, tag, answer and choose; train, evaluate or extend the model it was exported from"
            )

    @property
    def architecture(self) -> str:
        """The class config.json names, as its family names it ("" where it names none)."""
        named = self.raw.get("architectures")
        first = named[0] if isinstance(named, list) and named else ""
        return first if isinstance(first, str) else ""

    @cached_property
    def heads(self) -> frozenset[str]:
        """Which pre-training heads ("mlm", "nsp") the weights hold: a fine-tuned classifier kept neither, a released
        encoder (BertModel) has neither, and a model loaded from it would answer from freshly initialised ones. The
        masked LM by its decoder's bias, the next-sentence head by its own name, as the family names them."""
        if self.index is None:
            return frozenset(PRETRAINING_HEADS)  # a pickle the user trusted: loading it finds any head it lacks
        markers = {"mlm": self.family.params["mlm_head.bias"], "nsp": self.family.modules.get("nsp_head")}
        return frozenset(head for head, marker in markers.items() if marker and self._holds(marker))

    @cached_property
    def pooler(self) -> bool:
        """Whether the weights hold the pooler of the family's bare encoder (BertModel's, RobertaModel's)."""
        if self.index is None or not encoder_has_pooler(self.config):
            return False
        return self._holds(self.family.modules["bert.pooler"])

    @cached_property
    def pretraining(self) -> dict[str, Any]:
        """What pre-training recorded about the model: its pair objective (nsp, sop or none), and for an ELECTRA
        discriminator its objective ("electra") and where its generator is.

        A directory from elsewhere says by its class, as its family names the classes that tell
        (`Family.pretraining_classes`: BertForPreTraining had a next-sentence head, ElectraForPreTraining is a
        discriminator, any other class MLM alone); without a class named, it has a next-sentence head exactly when
        its weights hold one."""
        recorded = self.raw.get(PRETRAINING_KEY)
        if recorded is not None:
            return recorded
        if self.architecture:
            return dict(self.family.pretraining_classes.get(self.architecture, {"pair_objective": "none"}))
        return {"pair_objective": "nsp" if "nsp" in self.heads else "none"}

    def stored_shapes(self, part: str) -> list[tuple[int, ...]]:
        """The shapes the weights' index gives the family's `part` (a parameter), under any name it may have."""
        return [self.index[name][0] for name in self.stored_as(part) if name in (self.index or {})]

    def stored_as(self, part: str) -> tuple[str, ...]:
        """The names the family's `part` (a parameter, or a module) may have in the file: under the encoder's
        prefix, or, in a bare encoder's own file (BertModel's), without it."""
        body = self.family.body + "."
        return (part, part.removeprefix(body)) if part.startswith(body) else (part,)

    def _holds(self, part: str) -> bool:
        """Whether the index holds the family's `part`, or weights of it where it is a module."""
        forms = self.stored_as(part)
        return any(name == form or name.startswith(form + ".") for name in self.index for form in forms)


def read_model_files(path: str | Path) -> ModelFiles:
    """A run or model directory (`resolve_model_dir`), read once: config.json through the schema and its family,
    and the safetensors header (none of the tensors)."""
    directory = resolve_model_dir(path)
    raw = read_config(directory)
    return ModelFiles(directory, raw, config_from_hf(raw, str(directory / "config.json")), weight_index(directory))


def read_weights(directory: Path, trust_pickle: bool = False, model=None, index=None) -> dict[str, torch.Tensor]:
    """model.safetensors; a pickle-only directory (pytorch_model.bin, as older hub repositories have) is refused
    unless the user trusts it, and even then only tensors are unpickled. Given the `model` they are for, the
    safetensors header (its `weight_index`, where read already) is checked against it before any tensor is read
    (`check_index`)."""
    path = directory / "model.safetensors"
    if path.is_file():
        if model is not None:
            check_index(directory, index if index is not None else weight_index(directory), model)
        try:
            return load_file(str(path))
        except (SafetensorError, OSError, ValueError) as e:
            raise UserError(f"{path}: corrupted or truncated safetensors file ({e})") from None
    pickle_path = directory / "pytorch_model.bin"
    if pickle_path.is_file():
        if not trust_pickle:
            raise UserError(
                f"{pickle_path}: only a pickle checkpoint, which can run arbitrary code when loaded; convert it to "
                "model.safetensors, or pass --trust-pickle (tensors alone are read) if you trust its source"
            )
        warnings.warn(f"loading pickle weights from {pickle_path} because --trust-pickle was given", stacklevel=2)
        try:  # tensors only, even when trusted: an object that would run code when unpickled is refused
            return torch.load(pickle_path, map_location="cpu", weights_only=True)
        except Exception as e:  # torch raises several types for refused, torn or foreign files
            raise UserError(
                f"{pickle_path}: not loaded, it holds more than tensors or is damaged ({one_line(e)})"
            ) from None
    raise UserError(f"{directory}: no model.safetensors")


def check_index(directory: Path, index: WeightIndex, model) -> None:
    """A safetensors header against the model its tensors are for, before one is read: every name one of the
    family's (an unknown tensor, however large, is refused unread), every weight stored as a float, and every
    shape the model's own. The names are mapped as the tensors will be (hf.from_hf_state_dict), on the meta device."""
    meta = {name: torch.empty(shape, device="meta") for name, (shape, _) in index.items()}
    state, unknown = from_hf_state_dict(meta, model.config)
    architecture = model.hf_architecture
    if unknown:
        raise UserError(
            f"{directory}: weights do not match config.json (not in its family's layout: {', '.join(unknown[:5])})"
        )
    stored = [name for name, (_, dtype) in index.items() if dtype not in WEIGHT_DTYPES and not HF_IGNORED.match(name)]
    if stored:
        dtype = index[stored[0]][1]
        raise UserError(f"{directory}: {stored[0]} is stored as {dtype}, not as a weight (a float)")
    own = model.state_dict()
    check_file_size(directory, {name: own[name] for name in state if name in own})
    for name, tensor in state.items():
        if name in own and tensor.shape != own[name].shape and name != POSITIONS:  # a longer table may grow
            shape = " x ".join(map(str, tensor.shape))
            raise UserError(
                f"{directory}: weight shapes do not match config.json: {their_name(name, model.config, architecture)} "
                f"is {shape}, the config makes {' x '.join(map(str, own[name].shape))}"
            )


UNREAD_SLACK = 64 << 20  # bytes a weights file may hold beyond twice what the model reads of it (metadata, padding)


def check_file_size(directory: Path, used: dict[str, torch.Tensor]) -> None:
    """A weights file far larger than the tensors the model reads of it (a 2 GB tensor it never uses) is refused
    before it is mapped: reading it whole would bound memory and address space by the file, not by the model. The
    bound is generous: every tensor counted at 4 bytes a number, twice over."""
    size = (directory / "model.safetensors").stat().st_size
    needed = sum(tensor.numel() for tensor in used.values()) * 4
    if size > 2 * needed + UNREAD_SLACK:
        raise UserError(
            f"{directory / 'model.safetensors'}: {size / 1e6:,.0f} MB, far more than the {needed / 1e6:,.1f} MB of "
            "tensors this model reads from it; refused before it is read (another model's file, or padded)"
        )


def load_model(
    cls, directory: str | Path | ModelFiles, trust_pickle: bool = False, keep_heads: bool = True, **model_kwargs
):
    """Build `cls` from a model directory (its path, or its files read already: `read_model_files`), in eval mode
    (its weights as `load_weights` puts them). A pre-training model gets a next-sentence head where the directory
    has one (BertForPreTraining's), none where it has not (a masked LM's). Nothing it asks for is allocated before
    its size is checked against the file's."""
    if not isinstance(directory, ModelFiles) and not Path(directory).is_dir():
        raise UserError(f"{directory}: no such model directory")
    files = directory if isinstance(directory, ModelFiles) else read_model_files(directory)
    files.refuse_export()
    directory, config, index = files.directory, files.config, files.index
    check_shapes(files)
    weights = None
    if index is None:  # a trusted pickle: its tensors are read first, and their names and shapes are its index
        weights = read_weights(directory, trust_pickle)
        files = dataclasses.replace(files, index={k: (tuple(t.shape), "pickled") for k, t in weights.items()})
    check_parameters(directory, config, sum(math.prod(shape) for shape, _ in files.index.values()))
    if cls is BertForPreTraining and keep_heads and "pair_head" not in model_kwargs:
        model_kwargs["pair_head"] = "nsp" in files.heads
        model_kwargs["pooler"] = files.pooler  # a released encoder's, kept to be saved again
    model = cls(config, **model_kwargs)
    weights = weights if weights is not None else read_weights(directory, trust_pickle, model, index)
    check_finite(directory, weights)
    load_weights(model, files, trust_pickle, keep_heads, weights=weights)
    return model.eval()


def check_shapes(files: ModelFiles) -> None:
    """The token and position tables' shapes in the weights' index against config.json, before a model of that
    config is built: a config that disagrees with its weights is refused without allocating what it asks for (a
    position table longer than max_position_embeddings makes, which `transformers` refuses too, is never cut)."""
    config, family = files.config, files.family
    shapes = files.stored_shapes(family.modules["bert.embeddings.token"] + ".weight")
    if shapes and shapes[0] != (config.vocab_size, config.embedding_width):
        width = "embedding_size" if config.embedding_size else "hidden_size"
        raise UserError(
            f"{files.directory}: weights do not match config.json (the token table is {shapes[0][0]} x "
            f"{shapes[0][1]}; config.json says vocab_size {config.vocab_size}, {width} {config.embedding_width})"
        )
    table = family.modules.get("bert.embeddings.position")
    rows = [shape[0] for shape in files.stored_shapes(table + ".weight")] if table else []
    expected = config.max_position_embeddings + family.position_offset(config)
    if rows and rows[0] != expected:
        raise UserError(
            f"{files.directory}: weights do not match config.json (the position table has {rows[0]:,} rows; its "
            f"max_position_embeddings makes {expected:,})"
        )


def check_finite(directory: Path, weights: dict[str, torch.Tensor]) -> None:
    """Weights that are numbers: a model with nan or infinite weights answers nan, or nan probabilities, with exit 0."""
    broken = next((k for k, t in weights.items() if t.is_floating_point() and not bool(torch.isfinite(t).all())), None)
    if broken is not None:
        raise UserError(f"{directory}: the weight {broken} holds values that are not numbers (nan or infinity)")


def check_parameters(directory: Path, config: ModelConfig, held: int) -> None:
    """A config.json that asks for no model far larger than its weights (`held` numbers; 200 layers beside the
    weights of one): refused before the model is built, which took gigabytes to learn they did not fit."""
    asked = config.parameter_estimate()
    if asked > 2 * held + (1 << 20):
        raise UserError(
            f"{directory}: config.json describes a model of about {asked:,} parameters, but its weights hold "
            f"{held:,}; the config does not belong to these weights"
        )


def load_weights(
    model,
    files: ModelFiles,
    trust_pickle: bool = False,
    keep_heads: bool = True,
    longer_positions: bool = False,
    weights: dict[str, torch.Tensor] | None = None,
) -> None:
    """A model directory's weights (its `files`, as read_model_files read them) into `model`, whose architecture they
    must fit.

    Heads may differ between directory and model (a BertForMaskedLM directory has
    no NSP head; a pre-trained model has no classifier): missing ones start
    fresh, and extra ones are dropped; the pre-training heads that start fresh are
    the model's `untrained_heads` (a released encoder's masked LM). `keep_heads=False` starts
    every head fresh on purpose (fine-tuning a new task on a fine-tuned encoder).
    `longer_positions` lets `model`'s position table be the longer one: its rows past the directory's keep
    their own start (BERT's second phase, on longer sequences, learned them so). `weights`: the directory's, if
    read already.
    """
    files.refuse_export()
    directory = files.directory
    weights = weights if weights is not None else read_weights(directory, trust_pickle, model, files.index)
    state, unknown = from_hf_state_dict(weights, model.config)
    own = model.state_dict()
    if longer_positions and POSITIONS in state and POSITIONS in own:
        saved_rows = state[POSITIONS].shape[0]
        state[POSITIONS] = torch.cat([state[POSITIONS], own[POSITIONS][saved_rows:]])  # (model's rows, H)
    heads = head_prefixes()
    if not keep_heads:
        state = {k: v for k, v in state.items() if not k.startswith(heads) or k.startswith("bert.pooler.")}
    expected = set(own)
    missing = sorted(expected - set(state))
    fresh_heads = [k for k in missing if k.startswith(heads)]
    architecture = model.hf_architecture
    lacking = [their_name(k, model.config, architecture) for k in missing if k not in fresh_heads]
    extra = unknown + sorted(
        their_name(k, model.config, architecture) for k in set(state) - expected if not k.startswith(heads)
    )
    if lacking or extra:
        said = [f"missing {', '.join(lacking[:5])}"] if lacking else []
        said += [f"not in its family's layout: {', '.join(extra[:5])}"] if extra else []
        raise UserError(f"{directory}: weights do not match config.json ({'; '.join(said)})")
    # Heads the directory lacks start fresh: said by the verbs where that matters (pretrain, evaluate, fill-mask,
    # extend), and never saved as if trained (write_model_files).
    model.untrained_heads = frozenset(
        head for head in PRETRAINING_MODULES if any(k.startswith(head + ".") for k in fresh_heads)
    )
    model.fresh_heads = frozenset(head.rstrip(".") for head in heads if any(k.startswith(head) for k in fresh_heads))
    try:
        model.load_state_dict({k: v for k, v in state.items() if k in expected}, strict=False)
    except RuntimeError as e:
        raise UserError(
            f"{directory}: weight shapes do not match config.json: {str(e).splitlines()[-1].strip()}"
        ) from None


def saved_parts(model) -> dict[str, tuple[torch.nn.Module, dict[str, Any]]]:
    """subdirectory -> (model, what pre-training recorded about it): a model saves as itself, ELECTRA as two."""
    return getattr(model, "saved_parts", {"": (model, {})})


def write_model_files(
    model,
    directory: Path,
    tokenizer: Tokenizer | None,
    extra_config: dict[str, Any] | None = None,
    card: dict[str, Any] | None = None,
    origin: Origin | None = None,
) -> None:
    """config.json, model.safetensors, the tokenizer's files and the model card (README.md, from `card`'s facts
    and how the model was pre-trained), into an existing directory (a part's, below it). A model read from a
    directory (`origin`) goes back out as itself: its bare-encoder class, its sentence-transformers modules and
    its card, a section added. A pre-training head that never trained (a released encoder's masked LM, before
    pre-training) is left out."""
    for subdirectory, (part, pretraining) in saved_parts(model).items():
        target = directory / subdirectory
        target.mkdir(exist_ok=True)
        extra = dict(extra_config or {})
        if pretraining:
            extra[PRETRAINING_KEY] = {**extra.get(PRETRAINING_KEY, {}), **pretraining}
        facts = {**extra.get(PRETRAINING_KEY, {}), **(card or {})}
        task_head = getattr(part, "task_head", None)
        architecture = task_head.architecture if task_head is not None else saved_architecture(part, origin)
        extra.update(task_head.config if task_head is not None else {})
        (target / CARD).write_text(card_text(part.config, architecture, facts, origin), encoding="utf-8")
        if needs_remote_code(part.config) and tokenizer is not None:
            # transformers 4.x gives a pipeline a tokenizer only for a model type it knows, or one config.json names
            extra.setdefault("tokenizer_class", hf_tokenizer_class(tokenizer))
        pipeline = origin.sentence if origin is not None else None
        if pipeline is not None or isinstance(part, BertForSentenceEmbedding):
            limit = max_input_length(tokenizer, part.config.max_position_embeddings) if tokenizer is not None else 512
            write_pipeline(target, pipeline or SentencePipeline(part.pooling), part.config.hidden_size, limit)
        ids = dict(zip(ROLES, special_ids(tokenizer).all)) if tokenizer is not None else None
        write_json(target / "config.json", config_to_hf(part.config, architecture, extra, ids))
        untrained = getattr(part, "untrained_heads", frozenset())
        state = {k: v for k, v in part.state_dict().items() if k.split(".", 1)[0] not in untrained}
        state.update(task_head.weights if task_head is not None else {})
        save_file(
            to_hf_state_dict(state, part.config, architecture),
            str(target / "model.safetensors"),
            metadata={"format": "pt"},
        )
        if needs_remote_code(part.config):  # config.json's auto_map points into this file
            shutil.copyfile(asset_path(f"{REMOTE_CODE}.py"), target / f"{REMOTE_CODE}.py")
        if tokenizer is not None:
            save_tokenizer(tokenizer, target, part.config.max_position_embeddings, part.config.type_vocab_size > 1)


def saved_architecture(part, origin: Origin | None) -> str:
    """The class a model is saved as (ours, which its family names): its own; the bare encoder's for a
    pre-training model whose masked LM never trained (there is nothing else to save), or that was read from a
    bare encoder (a released BertModel goes back out as a BertModel, a masked-LM head trained here beside it)."""
    if not isinstance(part, BertForPreTraining):
        return part.hf_architecture
    if "mlm_head" in getattr(part, "untrained_heads", ()) or (origin is not None and origin.encoder_only):
        return "BertModel"
    return part.hf_architecture


def card_text(config: ModelConfig, architecture: str, facts: dict[str, Any], origin: Origin | None) -> str:
    """README.md: a model read from a directory keeps that directory's card, with a section on what bertforge did
    (a fine-tuned model is another model, and gets a card of its own, which names the one it came from)."""
    if origin is not None and origin.card and not facts.get("task"):
        return card_with_section(origin.card, facts)
    return model_card(config, architecture, facts)


def save_model(
    model,
    directory: str | Path,
    tokenizer: Tokenizer | None,
    extra_config: dict[str, Any] | None = None,
    card: dict[str, Any] | None = None,
    origin: Origin | None = None,
) -> Path:
    """A Hugging Face model directory, written atomically as a whole; a model read from a directory (`origin`)
    goes back out as itself (write_model_files).

    Without a tokenizer, `transformers` can still load the weights, but bertforge's
    commands (which tokenise text) cannot use the directory; a warning says so.
    """
    if tokenizer is None:
        warnings.warn(
            f"{directory}: saved without a tokenizer; `transformers` loads the weights, but bertforge's "
            f"commands need the tokenizer's files ({', '.join(TOKENIZER_FILES)}): pass tokenizer=",
            stacklevel=2,
        )
    with atomic_directory(directory) as tmp:
        write_model_files(model, tmp, tokenizer, extra_config, card, origin)
    return Path(directory)


def load_model_and_tokenizer(
    path: str | Path | ModelFiles,
    cls=BertForPreTraining,
    trust_pickle: bool = False,
    keep_heads: bool = True,
    **model_kwargs,
) -> tuple[ModelFiles, Any, LoadedTokenizer]:
    """(the directory's files, model, tokenizer) from a run or model directory (or its files read already), each
    file read once; `keep_heads=False` as for `load_model`. Always the network: an export is refused in one line
    (the verbs that answer load through serving/served.py's `load_served`, which serves its graph)."""
    files = path if isinstance(path, ModelFiles) else read_model_files(path)
    refuse_discriminator(files, cls, keep_heads)
    model = load_model(cls, files, trust_pickle, keep_heads, **model_kwargs)
    return files, model, model_tokenizer(files, model, cls)


def refuse_discriminator(files: ModelFiles, cls, keep_heads: bool) -> None:
    """One line where a masked LM is asked of an ELECTRA discriminator, saying where its generator is."""
    info = files.pretraining if cls is BertForPreTraining else {}
    if objective(info.get("objective")).discriminator and keep_heads:
        raise UserError(
            f"{files.directory} is an ELECTRA discriminator: it tells replaced tokens from original ones and has no "
            f"masked-LM head; its generator fills in blanks: {electra_generator(files.directory, info)}"
        )


def refuse_fresh_heads(model, directory: Path) -> None:
    """One line where a model that answers with its head (classify, tag, answer, an export) would answer from a
    head its directory lacks, started fresh: at random, with exit 0."""
    if model.fresh_heads:
        raise UserError(
            f"{directory}: its weights lack the {model.hf_architecture} head's {', '.join(sorted(model.fresh_heads))}; "
            "a new one would answer at random. Fine-tune it for the task (bertforge finetune), or use the directory "
            "that holds the trained head"
        )


PRETRAINING_HEADS = ("mlm", "nsp")
PRETRAINING_MODULES = ("mlm_head", "nsp_head")  # our modules of those heads


def electra_generator(directory: Path, info: dict[str, Any]) -> str:
    """Where an ELECTRA discriminator's generator is: bertforge saves it inside (generator/); a released one's is
    a model of its own (google/electra-small-generator beside google/electra-small-discriminator)."""
    if "generator" in info:
        return str(directory / info["generator"])
    return "the generator released with it (an ElectraForMaskedLM directory)"
