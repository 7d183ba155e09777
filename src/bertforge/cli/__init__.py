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
import errno
import signal
import sys
import threading
import warnings
from importlib.metadata import version
from pathlib import Path

from ..errors import Interrupted, Stopped, TrainingFailed, UserError
from . import data, deploy, downstream, inference, training
from .flags import check_paths


class Parser(argparse.ArgumentParser):
    """argparse's parser, but a mistake on the command line is two lines: the verb's short usage (what it
    needs), and the error. argparse's own prints every flag of the verb first, 50 lines for pretrain."""

    def error(self, message: str):
        print(f"usage: {self.short_usage()}", file=sys.stderr)
        print(f"{self.prog}: error: {message} (see {self.prog} --help)", file=sys.stderr)
        sys.exit(2)

    def short_usage(self) -> str:
        """The verb, its positional arguments and its required flags; "[options]" for the rest."""
        parts = [self.prog]
        for action in self._actions:
            if action.help == argparse.SUPPRESS:
                continue
            metavar = action.metavar or action.dest.upper()
            if not action.option_strings:
                parts.append(metavar if action.nargs not in ("+", "*") else f"{metavar} [...]")
            elif action.required:
                parts.append(f"{action.option_strings[0]} {metavar}")
        return " ".join(parts + ["[options]"])


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="bertforge", description="BERT pre-training from scratch: masked LM + next sentence prediction."
    )
    parser.add_argument("--version", action="version", version=f"bertforge {version('bertforge')}")
    verbs = parser.add_subparsers(dest="verb", required=True, metavar="VERB")
    data.register(verbs)
    training.register(verbs)
    inference.register(verbs)
    downstream.register(verbs)
    deploy.register(verbs)
    training.register_demo(verbs)
    return parser


def main(argv: list[str] | None = None) -> int:
    args, unknown = build_parser().parse_known_args(argv)
    if unknown:  # told with the verb's usage, not the top level's
        args.verb_parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    _warnings_as_lines(args.verb)
    _signals_as_interruptions()
    if getattr(args, "unpad", "auto") != "auto":  # imported only then: most verbs start without torch
        from ..model.unpadding import set_unpadding

        set_unpadding(args.unpad)
    try:
        check_paths(args)
        return args.func(args) or 0
    except UserError as e:
        print(f"bertforge {args.verb}: error: {e}", file=sys.stderr)
        return 2
    except TrainingFailed as e:
        print(f"bertforge {args.verb}: error: {e}", file=sys.stderr)
        return 1
    except OSError as e:  # what the machine refused a writer or reader: one line, the last good state kept
        if e.errno in (errno.ENOSPC, errno.EDQUOT):
            where = f" writing {e.filename}" if e.filename else ""
            message = f"the disk is full{where}; nothing was left half-written"
        elif e.errno in (errno.EROFS, errno.EACCES, errno.EPERM, errno.EIO):
            what = f"{e.filename}: {e.strerror}" if e.filename else str(e.strerror)
            message = f"{what}; nothing was left half-written"
        else:
            raise
        print(f"bertforge {args.verb}: error: {message}", file=sys.stderr)
        return 2
    except Stopped as e:
        print(f"bertforge {args.verb}: {e}", file=sys.stderr)
        return 128 + e.signal_number
    except KeyboardInterrupt as e:
        number = e.signal_number if isinstance(e, Interrupted) else signal.SIGINT
        print(f"bertforge {args.verb}: interrupted (signal {number}); nothing was left half-written", file=sys.stderr)
        return 128 + number


def _signals_as_interruptions() -> None:
    """SIGTERM (what `timeout`, systemd and Slurm send) unwinds the program as Ctrl-C does, so that temporary
    directories are removed and the exit status says which signal it was. Training loops take both signals over
    while they run, to save a checkpoint first (runtime.StopSignals)."""
    if threading.current_thread() is not threading.main_thread():
        return

    def interrupt(signum, frame):
        raise Interrupted(signum)

    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, interrupt)


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
