"""The `bertforge` command: parses arguments and calls the modules; no logic of its own.

Bad input raises UserError, printed as one line on stderr with exit code 2.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any, Callable

from .errors import UserError


def _print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, ensure_ascii=False))


def add_dataclass_flags(parser: argparse.ArgumentParser, cls, skip: tuple[str, ...] = ()) -> None:
    """One flag per dataclass field (`num_layers` -> `--num-layers`), help from its docstring.

    Defaults are suppressed, so only the flags a user gives override a preset.
    """
    group = parser.add_argument_group(cls.__name__)
    for f in dataclasses.fields(cls):
        if f.name in skip:
            continue
        flag = "--" + f.name.replace("_", "-")
        help_text = f"{f.metadata.get('help', '')} (default: {f.default})"
        if isinstance(f.default, bool):
            group.add_argument(flag, dest=f.name, action=argparse.BooleanOptionalAction, default=argparse.SUPPRESS, help=help_text)
        else:
            group.add_argument(flag, dest=f.name, type=type(f.default), default=argparse.SUPPRESS, help=help_text, metavar=f.name.upper())


def dataclass_overrides(args: argparse.Namespace, cls) -> dict[str, Any]:
    names = {f.name for f in dataclasses.fields(cls)}
    return {k: v for k, v in vars(args).items() if k in names}


# ---------------------------------------------------------------- inference


def cmd_fill_mask(args: argparse.Namespace) -> None:
    from .inference import load

    bert = load(args.model)
    targets = [t for t in args.targets.split(",") if t] if args.targets else None
    result = bert.fill_mask(args.text, top_k=args.top_k, targets=targets)
    if args.json:
        _print_json(result)
        return
    for mask in result["masks"]:
        print(f"[MASK] at token {mask['position']}:")
        for p in mask["predictions"]:
            print(f"  {p['score']:6.3f}  {p['token']:<15} {p['sequence']}")


def cmd_nsp(args: argparse.Namespace) -> None:
    from .data import read_pairs_file
    from .inference import load

    bert = load(args.model)
    if args.input:
        pairs = read_pairs_file(args.input)
    elif args.sentence_a is not None and args.sentence_b is not None:
        pairs = [(args.sentence_a, args.sentence_b)]
    else:
        raise UserError("give two sentences, or --input FILE with A<TAB>B per line")
    results = [bert.nsp(a, b) for a, b in pairs]
    if args.json:
        _print_json(results if args.input else results[0])
        return
    for r in results:
        print(f"is_next_prob={r['is_next_prob']:.3f}  {r['label']:<8} A: {r['a']!r}  B: {r['b']!r}")


def cmd_embed(args: argparse.Namespace) -> None:
    import numpy as np

    from .corpus import read_lines
    from .inference import load

    bert = load(args.model)
    texts = read_lines(args.input)
    vectors = bert.embed(texts, pooling=args.pooling, layer=args.layer, batch_size=args.batch_size)
    np.save(args.out, vectors)
    print(f"wrote {vectors.shape[0]} x {vectors.shape[1]} embeddings to {args.out}", file=sys.stderr)


def cmd_demo(args: argparse.Namespace) -> None:
    from .demo import run_demo

    run_demo(Path(args.out), fast=args.fast)


# ---------------------------------------------------------------- parser


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bertforge", description="BERT pre-training from scratch: MLM + NSP.")
    verbs = parser.add_subparsers(dest="verb", required=True, metavar="VERB")

    def verb(name: str, func: Callable, help_text: str) -> argparse.ArgumentParser:
        sub = verbs.add_parser(name, help=help_text, description=help_text)
        sub.set_defaults(func=func)
        return sub

    p = verb("fill-mask", cmd_fill_mask, "predict the tokens behind each [MASK]")
    p.add_argument("model", help="run directory or model directory")
    p.add_argument("text", help='text with one or more [MASK], e.g. "the cat sat on the [MASK]."')
    p.add_argument("--top-k", type=int, default=5)
    p.add_argument("--targets", help="comma-separated words to score instead of the whole vocabulary")
    p.add_argument("--json", action="store_true")

    p = verb("nsp", cmd_nsp, "probability that sentence B follows sentence A")
    p.add_argument("model")
    p.add_argument("sentence_a", nargs="?")
    p.add_argument("sentence_b", nargs="?")
    p.add_argument("--input", help="TSV file of A<TAB>B pairs, one per line")
    p.add_argument("--json", action="store_true")

    p = verb("embed", cmd_embed, "sentence embeddings for each line of a file")
    p.add_argument("model")
    p.add_argument("--input", required=True, help="text file, one sentence per line")
    p.add_argument("--out", required=True, help="output .npy file")
    p.add_argument("--pooling", choices=["cls", "mean"], default="cls")
    p.add_argument("--layer", type=int, default=-1, help="hidden layer to read (-1 = last, 0 = embeddings)")
    p.add_argument("--batch-size", type=int, default=64)

    p = verb("demo", cmd_demo, "train tokenizers and tiny BERTs on the bundled corpora, then question them")
    p.add_argument("--out", default="demo_runs")
    p.add_argument("--fast", action="store_true", help="fewer steps, for a smoke test")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        args.func(args)
    except UserError as e:
        print(f"bertforge {args.verb}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
