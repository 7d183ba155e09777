"""Sentence-transformers' modules: how a sentence-embedding model (all-MiniLM-L6-v2 and its kin) turns the encoder's
token vectors into one vector a text, read from the files `SentenceTransformer.save` writes, and written back.

    modules.json                 the pipeline in order: the encoder (this directory, path ""), Pooling, Normalize
    1_Pooling/config.json        which pooling: `pooling_mode` ("mean", or a list of modes, concatenated), or in
                                 older files one `pooling_mode_*` flag a mode
    sentence_bert_config.json    older files: `max_seq_length`; newer ones keep it as the tokenizer's
                                 model_max_length
    config_sentence_transformers.json
                                 `prompts` (name -> text put before each input: "query: ") and
                                 `default_prompt_name`, the one every input gets unless another is named

`read_pipeline` gives what bertforge computes (pooling, normalisation, length) and every file of the modules, as
bytes, so that a model saved from one (continued, extended, fine-tuned) carries them back unchanged
(`write_pipeline`). A module bertforge does not compute (a Dense layer) is carried too; computing embeddings
through it is refused in one line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..errors import UserError
from ..fileio import parse_json, read_bounded, write_json

MODULES = "modules.json"
SETTINGS_FILES = ("sentence_bert_config.json", "config_sentence_transformers.json")
POOLING_MODES = ("cls", "mean", "max", "mean_sqrt_len_tokens", "weightedmean", "lasttoken")
LEGACY_POOLING_FLAGS = {  # sentence-transformers before v6: one flag a mode, in the order it concatenates them
    "pooling_mode_cls_token": "cls",
    "pooling_mode_max_tokens": "max",
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens": "weightedmean",
    "pooling_mode_lasttoken": "lasttoken",
}
QUERY_PROMPT = "query"  # what `SentenceTransformer.encode_query` puts before a query, where the model has it
DOCUMENT_PROMPTS = ("document", "passage", "corpus")  # and `encode_document` before a text searched, the first found
MAX_PROMPTS, MAX_PROMPT_CHARACTERS = 64, 2000  # no released model has more, or longer
MODULE_KINDS = ("Transformer", "Pooling", "Normalize")  # what bertforge computes, by the class's name
MAX_MODULE_BYTES = 64 << 20  # the modules' files, all together (a Dense layer's weights are a few MB)


@dataclass(frozen=True)
class SentencePipeline:
    """What a sentence-embedding model does after its encoder, and the files that say so."""

    pooling: tuple[str, ...] = ("mean",)  # modes of POOLING_MODES, their vectors concatenated in this order
    normalize: bool = False  # unit length, as a Normalize module makes them
    max_seq_length: int | None = None  # the longest input it embeds (tokens), where its files say
    others: tuple[str, ...] = ()  # modules bertforge does not compute, by class name
    files: dict[str, bytes] = field(default_factory=dict, compare=False)  # relative path -> bytes, as read
    prompts: dict[str, str] = field(default_factory=dict, compare=False)  # name -> text put before each input
    default_prompt: str | None = None  # the prompt's name every input gets unless another is named
    include_prompt: bool = True  # whether pooling reads the prompt's tokens (Pooling's include_prompt)

    def check_computable(self, where: str) -> None:
        if self.others:
            raise UserError(
                f"{where}: its sentence-transformers pipeline has a {', '.join(self.others)} module after pooling, "
                "which bertforge does not compute (its vectors would not be the model's); use sentence-transformers"
            )

    def prompt(self, name: str | None = None, role: str | None = None) -> str:
        """The text put before each input, as sentence-transformers chooses it: the prompt `name`d; else, for a
        search's queries (`role` "query") or its texts ("document"), the model's prompt for that role where it has
        one (encode_query's, encode_document's); else its default prompt; else none."""
        if name is not None:
            if name not in self.prompts:
                held = f"its prompts: {', '.join(self.prompts)}" if self.prompts else "it has none"
                raise UserError(f"--prompt {name}: the model has no prompt of that name ({held})")
            return self.prompts[name]
        roles = {"query": (QUERY_PROMPT,), "document": DOCUMENT_PROMPTS}.get(role or "", ())
        named = next((candidate for candidate in roles if candidate in self.prompts), self.default_prompt)
        text = self.prompts.get(named, "") if named is not None else ""
        if text and not self.include_prompt:
            raise UserError(
                "the model pools without its prompt's tokens (include_prompt false, as Instructor models do), which "
                "bertforge does not compute; use sentence-transformers"
            )
        return text


def read_pipeline(directory: Path) -> SentencePipeline | None:
    """The sentence-transformers pipeline of a model directory; None where it has no modules.json."""
    path = directory / MODULES
    if not path.is_file():
        if path.exists() or path.is_symlink():  # a FIFO, a folder, a dangling link: not a file to read or to skip
            raise UserError(f"{path}: not a regular file")
        return None
    files = {MODULES: read_bounded(path, "config")}  # every file, read once: parsed, and carried back out as it was
    modules = parse_json(files[MODULES], path)
    if not isinstance(modules, list) or not all(isinstance(m, dict) for m in modules):
        raise UserError(f"{path}: not a list of modules")
    pooling: tuple[str, ...] = ()
    normalize, others = False, []
    for number, module in enumerate(modules):
        kind = str(module.get("type", "")).rsplit(".", 1)[-1]
        folder = module.get("path", "")
        if not isinstance(folder, str) or Path(folder).is_absolute() or ".." in Path(folder).parts:
            raise UserError(f"{path}: module {number}'s path {folder!r} is not a folder inside the model directory")
        if kind == "Transformer":
            if folder:
                raise UserError(f"{path}: the encoder is in {folder}/, not in the model directory itself")
            continue
        files.update(_module_files(directory, folder))
        if kind == "Pooling":
            settings = (Path(folder) / "config.json").as_posix()
            pooling = _pooling_modes(files.get(settings), directory / settings)
        elif kind == "Normalize":
            normalize = True
        else:
            others.append(kind or f"module {number}")
    for name in SETTINGS_FILES:
        if (directory / name).is_file():
            files[name] = read_bounded(directory / name, "config")
    if sum(map(len, files.values())) > MAX_MODULE_BYTES:
        raise UserError(f"{directory}: its sentence-transformers modules hold more than {MAX_MODULE_BYTES >> 20} MB")
    if not pooling:
        raise UserError(f"{path}: no Pooling module; bertforge embeds with one")
    max_seq_length = _max_seq_length(files.get(SETTINGS_FILES[0]), directory / SETTINGS_FILES[0])
    prompts, default = _prompts(files.get(SETTINGS_FILES[1]), directory / SETTINGS_FILES[1])
    include = _include_prompt(files, modules)
    return SentencePipeline(pooling, normalize, max_seq_length, tuple(others), files, prompts, default, include)


def _prompts(data: bytes | None, path: Path) -> tuple[dict[str, str], str | None]:
    """config_sentence_transformers.json's prompts and default prompt's name (its bytes, None where there is no
    such file), checked: names and texts are strings, bounded, and the default is one of them."""
    settings = parse_json(data, path) if data is not None else {}
    if not isinstance(settings, dict):
        raise UserError(f"{path}: not a JSON object")
    prompts = settings.get("prompts") or {}
    fits = isinstance(prompts, dict) and len(prompts) <= MAX_PROMPTS
    if not fits or not all(isinstance(v, str) and len(v) <= MAX_PROMPT_CHARACTERS for v in prompts.values()):
        raise UserError(f"{path}: prompts is not a table of at most {MAX_PROMPTS} names and texts")
    default = settings.get("default_prompt_name")
    if default is not None and default not in prompts:
        raise UserError(f"{path}: default_prompt_name {str(default)[:60]!r} is not one of its prompts")
    return prompts, default


def _include_prompt(files: dict[str, bytes], modules: list[dict]) -> bool:
    """Whether the Pooling module reads the prompt's tokens (its config's include_prompt, true by default)."""
    for module in modules:
        if str(module.get("type", "")).endswith("Pooling"):
            config = parse_json(files.get(f"{module.get('path', '')}/config.json", b"{}"), Path("Pooling"))
            return not isinstance(config, dict) or config.get("include_prompt", True) is not False
    return True


def _pooling_modes(data: bytes | None, path: Path) -> tuple[str, ...]:
    """A Pooling module's modes (its config.json's bytes, None where it has none), from sentence-transformers v6's
    `pooling_mode` or the older flags."""
    config = parse_json(data, path) if data is not None else {}
    if not isinstance(config, dict):
        raise UserError(f"{path}: not a JSON object")
    modes = config.get("pooling_mode")
    if modes is None:
        modes = [mode for flag, mode in LEGACY_POOLING_FLAGS.items() if config.get(flag)]
    modes = (modes,) if isinstance(modes, str) else tuple(modes) if isinstance(modes, list) else ()
    unknown = [mode for mode in modes if mode not in POOLING_MODES]
    if unknown or not modes:
        raise UserError(f"{path}: pooling {unknown or 'none'}; bertforge pools by {', '.join(POOLING_MODES)}")
    if len(set(modes)) != len(modes):  # 100,000 times "mean" made vectors 3.2 million wide
        raise UserError(f"{path}: pooling names a mode more than once ({len(modes):,} modes); each once")
    return modes


def _max_seq_length(data: bytes | None, path: Path) -> int | None:
    """sentence_bert_config.json's `max_seq_length` (its bytes, None where there is no such file)."""
    settings = parse_json(data, path) if data is not None else {}
    value = settings.get("max_seq_length") if isinstance(settings, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _module_files(directory: Path, folder: str) -> dict[str, bytes]:
    """Every regular file of a module's folder (none for a module without one: a Normalize saved with no folder).
    The folder must resolve inside the model directory: one linked elsewhere (another model, /proc) is refused,
    never read nor copied into what a verb writes."""
    if not folder or not (directory / folder).is_dir():
        return {}
    if not (directory / folder).resolve().is_relative_to(directory.resolve()):
        raise UserError(f"{directory / folder}: a module folder that lies outside the model directory (a link)")
    files = [path for path in sorted((directory / folder).rglob("*")) if path.is_file() and not path.is_symlink()]
    if sum(path.stat().st_size for path in files) > MAX_MODULE_BYTES:  # sized before anything is read
        raise UserError(f"{directory / folder}: more than {MAX_MODULE_BYTES >> 20} MB of module files")
    return {path.relative_to(directory).as_posix(): path.read_bytes() for path in files}


def write_pipeline(directory: Path, pipeline: SentencePipeline | None, hidden_size: int, max_length: int) -> None:
    """The files `SentenceTransformer(directory)` reads: a pipeline read from a model's files written back as they
    were; else (a model bertforge fine-tuned for sentence similarity) the encoder then mean pooling."""
    if pipeline is not None and pipeline.files:
        for name, data in pipeline.files.items():
            (directory / name).parent.mkdir(parents=True, exist_ok=True)
            (directory / name).write_bytes(data)
        return
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    ]
    write_json(directory / MODULES, modules)
    write_json(directory / "sentence_bert_config.json", {"max_seq_length": max_length, "do_lower_case": False})
    (directory / "1_Pooling").mkdir(exist_ok=True)
    modes = pipeline.pooling if pipeline is not None else ("mean",)
    pooling = {"word_embedding_dimension": hidden_size}
    pooling |= {flag: mode in modes for flag, mode in LEGACY_POOLING_FLAGS.items()}
    write_json(directory / "1_Pooling" / "config.json", pooling)
