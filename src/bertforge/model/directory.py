"""Model directories: a Hugging Face BERT directory (config.json, model.safetensors, tokenizer files, README.md).

    save_model(model, directory, tokenizer)   written atomically as a whole, with its model card
    load_model(cls, directory)                any such directory, ours or written by `transformers`
    load_weights(model, directory)            its weights into a model built already (continued pre-training)
    load_model_and_tokenizer(path)            a run or model directory, vocabularies checked against each other

We never unpickle what a user hands us: weights are safetensors, and a
pickle-only directory is refused unless the user says they trust it.
"""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer

from ..errors import UserError, one_line
from ..fileio import asset_path, atomic_directory, write_json
from ..tokenizer import (
    ROLES,
    TOKENIZER_FILES,
    hf_tokenizer_class,
    load_tokenizer,
    save_tokenizer,
    special_ids,
)
from .bert import BertForPreTraining
from .card import CARD, model_card
from .config import ModelConfig
from .families import family_of
from .heads import BertForSentenceEmbedding
from .hf import (
    HEAD_PREFIXES,
    POSITIONS,
    REMOTE_CODE,
    config_from_hf,
    config_to_hf,
    from_hf_state_dict,
    needs_remote_code,
    their_name,
    to_hf_state_dict,
)

PRETRAINING_KEY = "bertforge_pretrain"  # config.json's record of how a model was pre-trained
SENTENCE_EMBEDDING_KEY = "bertforge_sentence_embedding"  # config.json: how a sentence model's vectors are made


def is_model_dir(path: Path) -> bool:
    """A Hugging Face model directory: config.json and its weights."""
    return (path / "config.json").is_file() and (
        (path / "model.safetensors").is_file() or (path / "pytorch_model.bin").is_file()
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
    path = directory / "config.json"
    if not path.is_file():
        raise UserError(f"{directory}: not a model directory (no config.json)")
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise UserError(f"{path}: not valid JSON ({e})") from None
    if not isinstance(config, dict):
        raise UserError(f"{path}: not a JSON object")
    return config


def label_names(directory: Path, config: dict[str, Any], what: str) -> list[str]:
    """A task model's labels by id, from config.json's id2label, whose keys are the ids 0 to n-1 written as text
    (as `transformers` writes them); `what` the kind of model that needs them."""
    id2label = config.get("id2label")
    if not isinstance(id2label, dict) or not id2label:
        raise UserError(f"{directory}: not a {what} model (no id2label in config.json)")
    if sorted(id2label) != sorted(str(i) for i in range(len(id2label))):
        raise UserError(f"{directory / 'config.json'}: id2label's keys are not the ids 0 to {len(id2label) - 1}")
    return [str(id2label[str(i)]) for i in range(len(id2label))]


def read_weights(directory: Path, trust_pickle: bool = False) -> dict[str, torch.Tensor]:
    """model.safetensors; a pickle-only directory (pytorch_model.bin, as older hub repositories have) is refused
    unless the user trusts it, and even then only tensors are unpickled."""
    path = directory / "model.safetensors"
    if path.is_file():
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


def load_model(cls, directory: str | Path, trust_pickle: bool = False, keep_heads: bool = True, **model_kwargs):
    """Build `cls` from a model directory, in eval mode (its weights as `load_weights` puts them). A pre-training
    model gets a next-sentence head where the directory has one (BertForPreTraining's), none where it has not
    (a masked LM's)."""
    directory = Path(directory)
    if not directory.is_dir():
        raise UserError(f"{directory}: no such model directory")
    config = config_from_hf(read_config(directory), str(directory / "config.json"))
    check_shapes(directory, config)
    weights = read_weights(directory, trust_pickle)
    check_size(directory, config, weights)
    if cls is BertForPreTraining and keep_heads and "pair_head" not in model_kwargs:
        marker = family_of(config).modules.get("nsp_head")
        model_kwargs["pair_head"] = bool(marker) and any(name.endswith(marker + ".weight") for name in weights)
    model = cls(config, **model_kwargs)
    load_weights(model, directory, trust_pickle, keep_heads, weights=weights)
    return model.eval()


def check_shapes(directory: Path, config: ModelConfig) -> None:
    """The token table's shape in the weights' index against config.json, before a model of that config is built:
    a config that disagrees with its weights is refused without allocating what it asks for."""
    weights = directory / "model.safetensors"
    if not weights.is_file():
        return
    table = family_of(config).modules["bert.embeddings.token"] + ".weight"
    try:
        with safe_open(str(weights), framework="pt") as f:
            tables = [name for name in f.keys() if name == table or name == table.split(".", 1)[1]]
            shape = tuple(f.get_slice(tables[0]).get_shape()) if tables else None
    except (SafetensorError, OSError) as e:
        raise UserError(f"{weights}: corrupted or truncated safetensors file ({e})") from None
    if shape is not None and shape != (config.vocab_size, config.embedding_width):
        width = "embedding_size" if config.embedding_size else "hidden_size"
        raise UserError(
            f"{directory}: weights do not match config.json (the token table is {shape[0]} x {shape[1]}; "
            f"config.json says vocab_size {config.vocab_size}, {width} {config.embedding_width})"
        )


def check_size(directory: Path, config: ModelConfig, weights: dict[str, torch.Tensor]) -> None:
    """Weights that are numbers, and a config.json that asks for no model far larger than they are (200 layers
    beside the weights of one): refused before the model is built, which took gigabytes to learn they did not
    fit."""
    broken = next((k for k, t in weights.items() if t.is_floating_point() and not bool(torch.isfinite(t).all())), None)
    if broken is not None:  # such a model answers nan, or nan probabilities, with exit 0
        raise UserError(f"{directory}: the weight {broken} holds values that are not numbers (nan or infinity)")
    held = sum(tensor.numel() for tensor in weights.values())
    asked = config.parameter_estimate()
    if asked > 2 * held + (1 << 20):
        raise UserError(
            f"{directory}: config.json describes a model of about {asked:,} parameters, but its weights hold "
            f"{held:,}; the config does not belong to these weights"
        )


def load_weights(
    model,
    directory: Path,
    trust_pickle: bool = False,
    keep_heads: bool = True,
    longer_positions: bool = False,
    weights: dict[str, torch.Tensor] | None = None,
) -> None:
    """A model directory's weights into `model`, whose architecture they must fit.

    Heads may differ between directory and model (a BertForMaskedLM directory has
    no NSP head; a pre-trained model has no classifier): missing ones start
    fresh, with a warning, and extra ones are dropped. `keep_heads=False` starts
    every head fresh on purpose (fine-tuning a new task on a fine-tuned encoder).
    `longer_positions` lets `model`'s position table be the longer one: its rows past the directory's keep
    their own start (BERT's second phase, on longer sequences, learned them so). `weights`: the directory's, if
    read already.
    """
    weights = weights if weights is not None else read_weights(directory, trust_pickle)
    state, unknown = from_hf_state_dict(weights, model.config)
    own = model.state_dict()
    if longer_positions and POSITIONS in state and POSITIONS in own:
        saved_rows = state[POSITIONS].shape[0]
        state[POSITIONS] = torch.cat([state[POSITIONS], own[POSITIONS][saved_rows:]])  # (model's rows, H)
    if not keep_heads:
        state = {k: v for k, v in state.items() if not k.startswith(HEAD_PREFIXES) or k.startswith("bert.pooler.")}
    expected = set(own)
    missing = sorted(expected - set(state))
    fresh_heads = [k for k in missing if k.startswith(HEAD_PREFIXES)]
    architecture = model.hf_architecture
    lacking = [their_name(k, model.config, architecture) for k in missing if k not in fresh_heads]
    extra = unknown + sorted(
        their_name(k, model.config, architecture) for k in set(state) - expected if not k.startswith(HEAD_PREFIXES)
    )
    if lacking or extra:
        said = [f"missing {', '.join(lacking[:5])}"] if lacking else []
        said += [f"not in its family's layout: {', '.join(extra[:5])}"] if extra else []
        raise UserError(f"{directory}: weights do not match config.json ({'; '.join(said)})")
    if fresh_heads and keep_heads:
        heads = sorted({k.rsplit(".", 1)[0] for k in fresh_heads})
        warnings.warn(f"{directory} has no weights for {', '.join(heads)}: initialised fresh", stacklevel=3)
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
) -> None:
    """config.json, model.safetensors, the tokenizer's files and the model card (README.md, from `card`'s facts
    and how the model was pre-trained), into an existing directory (a part's, below it)."""
    for subdirectory, (part, pretraining) in saved_parts(model).items():
        target = directory / subdirectory
        target.mkdir(exist_ok=True)
        extra = dict(extra_config or {})
        if pretraining:
            extra[PRETRAINING_KEY] = {**extra.get(PRETRAINING_KEY, {}), **pretraining}
        facts = {**extra.get(PRETRAINING_KEY, {}), **(card or {})}
        (target / CARD).write_text(model_card(part.config, part.hf_architecture, facts), encoding="utf-8")
        if needs_remote_code(part.config) and tokenizer is not None:
            # transformers 4.x gives a pipeline a tokenizer only for a model type it knows, or one config.json names
            extra.setdefault("tokenizer_class", hf_tokenizer_class(tokenizer))
        if isinstance(part, BertForSentenceEmbedding):
            extra[SENTENCE_EMBEDDING_KEY] = {"pooling": "mean", "similarity": "cosine"}
            _write_sentence_transformers_files(target, part.config)
        ids = dict(zip(ROLES, special_ids(tokenizer).all)) if tokenizer is not None else None
        write_json(target / "config.json", config_to_hf(part.config, part.hf_architecture, extra, ids))
        save_file(
            to_hf_state_dict(part.state_dict(), part.config, part.hf_architecture),
            str(target / "model.safetensors"),
            metadata={"format": "pt"},
        )
        if needs_remote_code(part.config):  # config.json's auto_map points into this file
            shutil.copyfile(asset_path(f"{REMOTE_CODE}.py"), target / f"{REMOTE_CODE}.py")
        if tokenizer is not None:
            save_tokenizer(tokenizer, target, part.config.max_position_embeddings, part.config.type_vocab_size > 1)


def _write_sentence_transformers_files(directory: Path, config: ModelConfig) -> None:
    """What `SentenceTransformer(path)` reads: module 0 the encoder in the directory itself, module 1 mean pooling."""
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    ]
    write_json(directory / "modules.json", modules)
    write_json(
        directory / "sentence_bert_config.json",
        {"max_seq_length": config.max_position_embeddings, "do_lower_case": False},
    )
    (directory / "1_Pooling").mkdir(exist_ok=True)
    pooling = {"word_embedding_dimension": config.hidden_size, "pooling_mode_mean_tokens": True}
    pooling |= {f"pooling_mode_{mode}": False for mode in ("cls_token", "max_tokens", "mean_sqrt_len_tokens")}
    write_json(directory / "1_Pooling" / "config.json", pooling)


def sentence_embedding_pooling(directory: Path) -> str | None:
    """How a model fine-tuned for sentence similarity pools its vectors (as it was trained: "mean"); None for others."""
    return (read_config(directory).get(SENTENCE_EMBEDDING_KEY) or {}).get("pooling")


def save_model(
    model,
    directory: str | Path,
    tokenizer: Tokenizer | None,
    extra_config: dict[str, Any] | None = None,
    card: dict[str, Any] | None = None,
) -> Path:
    """A Hugging Face model directory, written atomically as a whole.

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
        write_model_files(model, tmp, tokenizer, extra_config, card)
    return Path(directory)


VOCAB_PADDING = 128  # a table padded for speed has fewer than this many rows beyond its tokenizer's ids


def check_vocab(tokenizer: Tokenizer, vocab_size: int, where: str) -> None:
    """A tokenizer with more ids than the model's table would index out of range, and one with far fewer was not
    trained with the model (its ids mean other words): both are refused. A table padded to a round size for
    speed (fewer than VOCAB_PADDING spare rows) is only warned about: those ids are never predicted."""
    size = tokenizer.get_vocab_size()
    if size > vocab_size or size <= vocab_size - VOCAB_PADDING:
        raise UserError(
            f"{where}: tokenizer has {size} tokens but the model's vocabulary has {vocab_size}; "
            "they were not trained together"
        )
    if size < vocab_size:
        warnings.warn(
            f"{where}: tokenizer has {size} tokens, the model's vocabulary {vocab_size}; "
            f"ids {size}..{vocab_size - 1} have no token and are never predicted",
            stacklevel=3,
        )


def load_model_and_tokenizer(
    path: str | Path, cls=BertForPreTraining, trust_pickle: bool = False, keep_heads: bool = True, **model_kwargs
):
    """(directory, model, tokenizer) from a run or model directory; `keep_heads=False` as for `load_model`."""
    directory = resolve_model_dir(path)
    info = pretraining_info(directory) if cls is BertForPreTraining else {}
    if info.get("objective") == "electra" and keep_heads:
        raise UserError(
            f"{directory} is an ELECTRA discriminator: it tells replaced tokens from original ones and has no "
            f"masked-LM head; its generator fills in blanks: {electra_generator(directory, info)}"
        )
    if cls is BertForPreTraining and keep_heads and sentence_embedding_pooling(directory):
        raise UserError(
            f"{directory} was fine-tuned for sentence similarity: it makes sentence vectors (bertforge embed) and has "
            "no masked-LM head; evaluate the model it was fine-tuned from"
        )
    model = load_model(cls, directory, trust_pickle, keep_heads, **model_kwargs)
    if not any((directory / name).is_file() for name in ("tokenizer.json", "vocab.txt")):
        raise UserError(
            f"{directory}: no tokenizer (tokenizer.json or vocab.txt); the model was saved without one: "
            "save it with its tokenizer, or copy the tokenizer's files into the directory"
        )
    tokenizer = load_tokenizer(directory)
    check_vocab(tokenizer, model.config.vocab_size, str(directory))
    return directory, model, tokenizer


PRETRAINING_HEADS = ("mlm", "nsp")


def electra_generator(directory: Path, info: dict[str, Any]) -> str:
    """Where an ELECTRA discriminator's generator is: bertforge saves it inside (generator/); a released one's is
    a model of its own (google/electra-small-generator beside google/electra-small-discriminator)."""
    if "generator" in info:
        return str(directory / info["generator"])
    return "the generator released with it (an ElectraForMaskedLM directory)"


def pretraining_heads(directory: Path, config: ModelConfig) -> set[str]:
    """Which pre-training heads ("mlm", "nsp") the directory's weights hold: a fine-tuned classifier kept neither,
    and a model loaded from it would answer from freshly initialised ones. Read from the file's index alone: the
    masked LM by its decoder's bias, the next-sentence head by its own name."""
    weights = directory / "model.safetensors"
    if not weights.is_file():
        return set(PRETRAINING_HEADS)  # a pickle the user trusted: loading it warned of any head it lacked
    family = family_of(config)
    try:
        with safe_open(str(weights), framework="pt") as f:
            names = list(f.keys())
    except (SafetensorError, OSError) as e:
        raise UserError(f"{weights}: corrupted or truncated safetensors file ({e})") from None
    markers = {"mlm": family.params["mlm_head.bias"], "nsp": family.modules.get("nsp_head")}
    return {
        head
        for head, marker in markers.items()
        if marker and any(name == marker or name.startswith(marker + ".") for name in names)
    }


def pretraining_info(directory: Path) -> dict[str, Any]:
    """What pre-training recorded about the model: its pair objective (nsp, sop or none), and for an ELECTRA
    discriminator its objective ("electra") and where its generator is.

    A directory from elsewhere says by its class: `transformers`' BertForPreTraining has an NSP head, a masked LM
    (BertForMaskedLM, RobertaForMaskedLM, ...) none, and ElectraForPreTraining is a discriminator; without a
    class named, it has an NSP head exactly when its weights hold one.
    """
    config = read_config(directory)
    info = config.get(PRETRAINING_KEY)
    if info is not None:
        return info
    architecture = (config.get("architectures") or [None])[0]
    if architecture == "ElectraForPreTraining":
        return {"objective": "electra", "pair_objective": "none"}
    if isinstance(architecture, str):
        return {"pair_objective": "nsp" if architecture == "BertForPreTraining" else "none"}
    weights = directory / "model.safetensors"
    if not weights.is_file():
        return {"pair_objective": "nsp"}
    try:
        with safe_open(str(weights), framework="pt") as f:
            has_head = any(name.startswith("cls.seq_relationship.") for name in f.keys())
    except (SafetensorError, OSError) as e:
        raise UserError(f"{weights}: corrupted or truncated safetensors file ({e})") from None
    return {"pair_objective": "nsp" if has_head else "none"}
