"""The `bertforge` command: parses arguments and calls the modules; no logic of its own.

Each verb's flags sit beside its handler, one module per kind of work:
`data` (tokenizer train, prepare, data show/stats), `training` (pretrain, sweep,
evaluate, plot, demo), `inference` (fill-mask, nsp, embed, attention,
plot-embeddings) and `downstream` (finetune, score, classify, tag, answer).
`flags` holds what they share: flags made from the config dataclasses, so that
one concept has one flag name on every verb.

Bad input raises UserError, printed as one line on stderr with exit code 2; a loop stopped by a
signal raises Stopped, exit 128 + the signal.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

from ..errors import Stopped, UserError
from . import data, downstream, inference, training


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bertforge", description="BERT pre-training from scratch: masked LM + next sentence prediction."
    )
    verbs = parser.add_subparsers(dest="verb", required=True, metavar="VERB")
    data.register(verbs)
    training.register(verbs)
    inference.register(verbs)
    downstream.register(verbs)
    training.register_demo(verbs)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    _warnings_as_lines(args.verb)
    try:
        return args.func(args) or 0
    except UserError as e:
        print(f"bertforge {args.verb}: error: {e}", file=sys.stderr)
        return 2
    except Stopped as e:
        print(f"bertforge {args.verb}: {e}", file=sys.stderr)
        return 128 + e.signal_number
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def _warnings_as_lines(verb: str) -> None:
    """Our own warnings as one line each, `bertforge VERB: warning: ...`, as errors are: Python's format adds the
    file and line that raised it and that line's source, which tell a user nothing. Other libraries' warnings keep
    Python's format, which says where they came from."""
    package = str(Path(__file__).resolve().parents[1])
    python_format = warnings.formatwarning

    def one_line(message, category, filename, lineno, line=None) -> str:
        if issubclass(category, UserWarning) and str(Path(filename).resolve()).startswith(package):
            return f"bertforge {verb}: warning: {message}\n"
        return python_format(message, category, filename, lineno, line)

    warnings.formatwarning = one_line
