"""What every verb's parser shares: flags made from config dataclasses, and the common flag groups.

A config field `num_layers` is the flag `--num-layers`, its documentation is the
help, and `config.field_parser` parses it, the same parser `sweep` uses for grid
values. One concept has one flag name on every verb; older spellings still work
but are not listed (HIDDEN).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..config import UNPADDING_MODES, field_parser
from ..fileio import check_not_inputs

HIDDEN = argparse.SUPPRESS


def print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, ensure_ascii=False, default=str))


def _argparse_type(parse: Callable[[str], Any], name: str) -> Callable[[str], Any]:
    def convert(text: str) -> Any:
        try:
            return parse(text)
        except ValueError as e:
            raise argparse.ArgumentTypeError(f"{name}: {e}") from None

    convert.__name__ = name  # argparse names the type in its messages
    return convert


def at_least(least: int, most: int | None = None) -> Callable[[str], int]:
    """An integer flag of at least `least` (and at most `most`): a count given as 0 or -1 is one line, not an empty
    or wrong result, and one that would make the output grow past reading is one line too."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"{value} is less than {least}")
        if most is not None and value > most:
            raise argparse.ArgumentTypeError(f"{value} is more than {most}")
        return value

    parse.__name__ = f"integer of at least {least}" + (f" and at most {most}" if most is not None else "")
    return parse


def fraction(text: str) -> float:
    """A float flag between 0 and 1 (finite)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{value} is not between 0 and 1")
    return value


POSITIVE = at_least(1)


def add_config_flags(
    parser: argparse.ArgumentParser, cls, skip: tuple[str, ...] = (), keep_defaults: bool = False, shown_defaults=None
) -> None:
    """One flag per dataclass field (`num_layers` -> `--num-layers`), help from its documentation.

    Without `keep_defaults` the defaults are suppressed, so that only the flags a
    user gives override a recipe, a preset or a resumed run's saved values;
    `shown_defaults` (a config) then supplies the defaults the help shows.
    """
    group = parser.add_argument_group(f"{cls.__name__} ({cls.__doc__.strip().rstrip('.')})")
    for f in dataclasses.fields(cls):
        if f.name in skip:
            continue
        flag = "--" + f.name.replace("_", "-")
        default_text = getattr(shown_defaults, f.name) if shown_defaults is not None else f.default
        shown = "none" if default_text == "" else default_text  # an empty string reads as nothing at all
        described = f.metadata.get("help", "")
        # a default of None is what the help itself says ("default: a tenth of the run"), not "None"
        said = described if default_text is None else f"{described} (default: {shown})"
        help_text = said.replace("%", "%%")
        default = f.default if keep_defaults else argparse.SUPPRESS
        if f.type in ("bool", bool):
            group.add_argument(
                flag, dest=f.name, action=argparse.BooleanOptionalAction, default=default, help=help_text
            )
        else:
            group.add_argument(
                flag,
                dest=f.name,
                type=_argparse_type(field_parser(cls, f.name), f.name),
                default=default,
                choices=f.metadata.get("choices"),
                help=help_text,
                metavar=f.name.upper(),
            )


def config_values(args: argparse.Namespace, cls) -> dict[str, Any]:
    """The fields of `cls` that the command line set."""
    names = {f.name for f in dataclasses.fields(cls)}
    return {k: v for k, v in vars(args).items() if k in names}


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Every flag shows its default, once."""

    def _get_help_string(self, action: argparse.Action) -> str:
        if "(default:" in (action.help or "") or any(
            action.default is nothing for nothing in (None, False, argparse.SUPPRESS)
        ):
            return action.help or ""
        return super()._get_help_string(action)


def add_verb(group, name: str, func: Callable | None, help_text: str) -> argparse.ArgumentParser:
    """A verb's parser; `func(args)` runs it (None for a group of verbs such as `data`)."""
    sub = group.add_parser(name, help=help_text, description=help_text, formatter_class=HelpFormatter)
    sub.set_defaults(verb_parser=sub)  # the deepest verb's, for a mistake argparse lets through to the end
    if func is not None:
        sub.set_defaults(func=func)
    return sub


def output_flags(p: argparse.ArgumentParser, quiet: bool = True) -> None:
    p.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    if quiet:
        p.add_argument("--quiet", action="store_true", help="no progress bar or chatter")


def model_flags(p: argparse.ArgumentParser, many: bool = False) -> None:
    if many:
        p.add_argument("model", nargs="+", help="run or model directories (several: scored on the same instances)")
    else:
        p.add_argument("model", help="run directory or model directory")
    p.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N or auto")
    p.add_argument(
        "--unpad",
        choices=UNPADDING_MODES,
        default="auto",
        help="run padded batches on their real tokens only, packed into fewer rows (the same numbers): auto where "
        "that saves a quarter of the rows or more",
    )
    p.add_argument(
        "--trust-pickle",
        action="store_true",
        help="allow a directory with only pytorch_model.bin (unpickling can run code: only for sources you trust)",
    )


def pair_flags(p: argparse.ArgumentParser, positional: bool) -> None:
    if positional:
        p.add_argument("sentence_b", nargs="?", help=HIDDEN)  # the older spelling of --pair
    p.add_argument("--pair", help="second sentence, as segment B")


def column_flags(p: argparse.ArgumentParser, pair: bool = True, file_flag: str = "--input") -> None:
    p.add_argument(
        "--text-column",
        default="0",
        help=f"with {file_flag}: column (or JSONL key) of the text; a .txt file has a text per line",
    )
    if pair:
        p.add_argument(
            "--pair-column", help=f"with {file_flag}: column of the second text (a .txt file: TEXT<TAB>PAIR lines)"
        )


def image_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", required=True, help="image file")
    p.add_argument("--format", choices=["png", "svg"], help="image format (default: the --out suffix)")


def with_format(out: str, fmt: str | None) -> Path:
    """--format svg turns plot.png into plot.svg; without it the file's own suffix decides."""
    path = Path(out)
    return path.with_suffix(f".{fmt}") if fmt else path


# Every verb's paths by the flags' names: what it reads, and what it writes. One rule (fileio.check_not_inputs)
# compares them before any verb runs, so a verb, old or new, that names its flags so is held to it.
INPUT_FLAGS = ("model", "input", "train", "dev", "data", "corpus", "tokenizer", "init_from", "queries", "vectors",
               "rerank", "context_file", "valid", "check_data")  # fmt: skip
OUTPUT_FLAGS = ("out", "plot", "filter_report")


def check_paths(args: argparse.Namespace) -> None:
    """No verb writes over what it reads (fileio.check_not_inputs), its flags named as the user typed them. A run
    directory given as a model is read in its model/ (what the verb reads of it)."""
    parser = getattr(args, "verb_parser", None)
    if parser is None:
        return
    shown = {
        a.dest: a.option_strings[0] if a.option_strings else (a.metavar or a.dest.upper()) for a in parser._actions
    }
    outputs = {shown.get(d, d): getattr(args, d) for d in OUTPUT_FLAGS if isinstance(getattr(args, d, None), str)}
    if not outputs:
        return
    inputs = {shown.get(d, d): _read_part(getattr(args, d, None)) for d in INPUT_FLAGS if getattr(args, d, None)}
    check_not_inputs(outputs, inputs)


def _read_part(value):
    """A run directory is read in its model/ (its model) alone; every other path as it is."""
    if isinstance(value, (list, tuple)):
        return [_read_part(v) for v in value]
    if isinstance(value, str) and (Path(value) / "model" / "config.json").is_file():
        return str(Path(value) / "model")
    return value
