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


def parse_duration(text: str) -> float:
    """Seconds from "90", "90s", "30m" or "1.5h"."""
    units = {"s": 1, "m": 60, "h": 3600}
    try:
        if text and text[-1] in units:
            return float(text[:-1]) * units[text[-1]]
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (use 90s, 30m or 1.5h)") from None


FLAG_TYPES = {"time_budget": parse_duration}


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
            group.add_argument(flag, dest=f.name, type=FLAG_TYPES.get(f.name, type(f.default)), default=argparse.SUPPRESS,
                               help=help_text, metavar=f.name.upper())


def dataclass_overrides(args: argparse.Namespace, cls) -> dict[str, Any]:
    names = {f.name for f in dataclasses.fields(cls)}
    return {k: v for k, v in vars(args).items() if k in names}


# ---------------------------------------------------------------- data


def _corpus_options(args: argparse.Namespace):
    from .corpus import CorpusOptions

    return CorpusOptions(field=args.field, doc_field=args.doc_field, column=args.column, clean=args.clean,
                         split_sentences=args.split_sentences, on_error=args.on_error)


def cmd_tokenizer_train(args: argparse.Namespace) -> None:
    from .corpus import read_paragraphs
    from .tokenizer import save_tokenizer, train_tokenizer

    texts = (p.text for p in read_paragraphs(args.corpus, _corpus_options(args)))
    tokenizer = train_tokenizer(texts, kind=args.kind, vocab_size=args.vocab_size, min_frequency=args.min_frequency,
                                lowercase=args.lowercase, strip_accents=args.strip_accents)
    save_tokenizer(tokenizer, args.out)
    print(f"trained a {args.kind} tokenizer with {tokenizer.get_vocab_size()} tokens -> {args.out}", file=sys.stderr)


def cmd_prepare(args: argparse.Namespace) -> None:
    from .prepare import prepare, prepare_pairs

    if args.pairs:
        if len(args.corpus) != 1:
            raise UserError("--pairs takes exactly one file")
        columns = tuple(args.pairs.split(","))
        if len(columns) != 2:
            raise UserError(f"--pairs takes two columns, like --pairs 0,1 or --pairs question,answer; got {args.pairs!r}")
        meta = prepare_pairs(args.corpus[0], args.tokenizer, args.out, columns, args.valid_fraction)
    else:
        meta = prepare(args.corpus, args.tokenizer, args.out, valid_fraction=args.valid_fraction, valid_files=args.valid,
                       options=_corpus_options(args), workers=args.workers)
    splits = meta["splits"]
    print(f"prepared {splits['train']['tokens']:,} train and {splits['valid']['tokens']:,} held-out tokens "
          f"({splits['train']['documents']:,} + {splits['valid']['documents']:,} documents) -> {args.out}", file=sys.stderr)


def cmd_data_show(args: argparse.Namespace) -> None:
    from .show import show_instances

    show_instances(args.data, n=args.n, seed=args.seed, as_jsonl=args.jsonl, seq_len=args.seq_len,
                   mask_prob=args.mask_prob, whole_word_mask=args.whole_word_mask)


def cmd_data_stats(args: argparse.Namespace) -> None:
    from .prepare import data_stats

    stats = data_stats(args.data)
    if args.json:
        _print_json(stats)
        return
    for split, s in stats.items():
        print(f"{split:5s}  documents {s['documents']:>9,}  sentences {s['sentences']:>10,}  tokens {s['tokens']:>12,}  "
              f"mean sentence {s['mean_sentence_tokens']:6.2f} tokens  [UNK] rate {s['unk_rate']:.4%}")


# ---------------------------------------------------------------- training


def resolve_run_configs(args: argparse.Namespace):
    """Model and train configs: the preset (or, on --resume, the saved run) with the given flags on top."""
    from .config import ModelConfig, TrainConfig
    from .prepare import read_meta
    from .train import run_configs

    model_overrides = dataclass_overrides(args, ModelConfig)
    train_overrides = dataclass_overrides(args, TrainConfig)
    saved = run_configs(Path(args.out)) if args.resume else None
    if saved is not None and args.preset is None:
        model = ModelConfig.from_dict({**saved["model"], **model_overrides})
        train = TrainConfig.from_dict({**saved["train"], **train_overrides})
    else:
        model_overrides.setdefault("vocab_size", read_meta(args.data)["vocab_size"])
        model = ModelConfig.preset(args.preset or "mini", **model_overrides)
        train = TrainConfig(**train_overrides)
    return model, train


def cmd_pretrain(args: argparse.Namespace) -> int:
    from .train import pretrain

    model_config, train_config = resolve_run_configs(args)
    result = pretrain(args.data, args.out, model_config, train_config, resume=args.resume, overwrite=args.overwrite,
                      progress=not args.quiet, tensorboard=args.tensorboard)
    if result.interrupted:
        return 128 + result.interrupted
    if result.is_main:
            print(f"done: {result.state.step} steps, {result.state.tokens_seen:,} tokens in {result.state.elapsed:.0f}s; "
              f"model in {Path(args.out) / 'model'}", file=sys.stderr)
    return 0


def cmd_evaluate(args: argparse.Namespace) -> None:
    from .evaluate import evaluate_model

    result = evaluate_model(args.model, args.data, batch_size=args.batch_size, seq_len=args.seq_len, max_batches=args.max_batches)
    if args.json:
        _print_json(result)
        return
    print(f"MLM loss {result['mlm_loss']:.4f}  accuracy {result['mlm_acc']:.4f}  perplexity {result['perplexity']:.2f}  "
          f"(unigram baseline accuracy {result['unigram_baseline_acc']:.4f}, {result['masked_tokens']:,} masked tokens)")
    print(f"NSP loss {result['nsp_loss']:.4f}  accuracy {result['nsp_acc']:.4f}")


def cmd_plot(args: argparse.Namespace) -> None:
    from .plots import plot_training_curves

    run_dir = Path(args.run_dir)
    out = _with_format(args.out, args.format) if args.out else run_dir / "plots" / f"training_curves.{args.format or 'png'}"
    print(plot_training_curves(run_dir / "metrics.jsonl", out))


def cmd_sweep(args: argparse.Namespace) -> None:
    from .config import ModelConfig, TrainConfig
    from .sweep import parse_grid, run_sweep

    axes = parse_grid(args.grid)
    fixed = {**dataclass_overrides(args, ModelConfig), **dataclass_overrides(args, TrainConfig)}
    clash = sorted(set(axes) & set(fixed))
    if clash:
        raise UserError(f"{clash[0]} is both a --grid axis and a fixed flag")
    rows = run_sweep(args.data, args.out, args.preset, axes, fixed, parallel=args.parallel)
    print((Path(args.out) / "results.md").read_text(encoding="utf-8"))
    print(f"{len(rows)} runs; table in {Path(args.out) / 'results.md'}, figure in {Path(args.out) / 'curves.png'}", file=sys.stderr)


# ---------------------------------------------------------------- inference


def cmd_fill_mask(args: argparse.Namespace) -> None:
    from .inference import load

    bert = load(args.model, trust_pickle=args.trust_pickle)
    targets = [t for t in args.targets.split(",") if t] if args.targets else None
    result = bert.fill_mask(args.text, top_k=args.top_k, targets=targets)
    if args.plot:
        from .plots import plot_fill_mask

        print(f"wrote {plot_fill_mask(result, args.plot, args.answer)}", file=sys.stderr)
    if args.json:
        _print_json(result)
        return
    for mask in result["masks"]:
        print(f"[MASK] at token {mask['position']}:")
        for p in mask["predictions"]:
            print(f"  {p['score']:6.3f}  {p['token']:<15} {p['sequence']}")


def cmd_nsp(args: argparse.Namespace) -> None:
    from .prepare import read_pairs_file
    from .inference import load

    bert = load(args.model, trust_pickle=args.trust_pickle)
    if args.input:
        pairs = read_pairs_file(args.input)
    elif args.sentence_a is not None and args.sentence_b is not None:
        pairs = [(args.sentence_a, args.sentence_b)]
    else:
        raise UserError("give two sentences, or --input FILE with A<TAB>B per line")
    results = [bert.nsp(a, b) for a, b in pairs]
    if args.plot:
        from .plots import plot_nsp

        print(f"wrote {plot_nsp(results, args.plot)}", file=sys.stderr)
    if args.json:
        _print_json(results if args.input else results[0])
        return
    for r in results:
        print(f"is_next_prob={r['is_next_prob']:.3f}  {r['label']:<8} A: {r['a']!r}  B: {r['b']!r}")


def cmd_plot_embeddings(args: argparse.Namespace) -> None:
    from .inference import load
    from .plots import plot_embeddings

    bert = load(args.model, trust_pickle=args.trust_pickle)
    print(plot_embeddings(bert, args.sentence_a, args.sentence_b, _with_format(args.out, args.format)))


def cmd_attention(args: argparse.Namespace) -> None:
    from .inference import load
    from .plots import plot_attention, shorten

    bert = load(args.model, trust_pickle=args.trust_pickle)
    tokens, attention = bert.attention(args.text, args.pair)
    title = "Self-attention: " + args.text + (f"  /  {args.pair}" if args.pair else "")
    print(plot_attention(tokens, attention, _with_format(args.out, args.format), args.layer, args.head, shorten(title, 110)))


def _with_format(out: str, fmt: str | None) -> Path:
    """--format svg turns plot.png into plot.svg; without it the file's own suffix decides."""
    path = Path(out)
    return path.with_suffix(f".{fmt}") if fmt else path


def cmd_embed(args: argparse.Namespace) -> None:
    import numpy as np

    from .corpus import read_lines
    from .inference import load

    bert = load(args.model, trust_pickle=args.trust_pickle)
    texts = read_lines(args.input)
    vectors = bert.embed(texts, pooling=args.pooling, layer=args.layer, batch_size=args.batch_size)
    np.save(args.out, vectors)
    print(f"wrote {vectors.shape[0]} x {vectors.shape[1]} embeddings to {args.out}", file=sys.stderr)


def cmd_finetune(args: argparse.Namespace) -> None:
    from .finetune import FinetuneConfig, finetune

    cfg = FinetuneConfig(epochs=args.epochs, lr=args.lr, batch_size=args.batch_size, max_seq_len=args.max_seq_len,
                         warmup=args.warmup, seed=args.seed, from_scratch=args.from_scratch, device=args.device,
                         precision=args.precision, dropout=args.dropout)
    summary = finetune(args.model, args.train, args.dev, args.text_column, args.label_column, args.out, args.pair_column, cfg,
                       progress=not args.quiet)
    if args.json:
        _print_json(summary)
        return
    best = summary["best"]
    print(f"best epoch {best['epoch']}: dev accuracy {best['dev_accuracy']:.4f}, macro-F1 {best['dev_macro_f1']:.4f}"
          + (f", MCC {best['dev_mcc']:.4f}" if "dev_mcc" in best else "") + f"; model in {Path(args.out) / 'model'}")


def cmd_classify(args: argparse.Namespace) -> None:
    from .corpus import read_lines
    from .finetune import Classifier

    classifier = Classifier(args.model)
    if args.input:
        rows = [line.split("\t", 1) for line in read_lines(args.input)]
        results = classifier.classify([r[0] for r in rows], [r[1] if len(r) > 1 else "" for r in rows] if args.pairs else None)
    elif args.text is not None:
        results = classifier.classify([args.text], [args.pair] if args.pair is not None else None)
    else:
        raise UserError("give a text, or --input FILE")
    if args.json:
        _print_json(results if args.input else results[0])
        return
    for r in results:
        probabilities = "  ".join(f"{label}={p:.3f}" for label, p in r["probabilities"].items())
        print(f"{r['label']:<12} {probabilities}  {r['text']!r}" + (f" / {r['pair']!r}" if "pair" in r else ""))


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

    def trust_pickle_flag(p: argparse.ArgumentParser) -> None:
        p.add_argument("--trust-pickle", action="store_true",
                       help="allow a directory with only pytorch_model.bin: unpickling can run code, so only for sources you trust")

    def corpus_flags(p: argparse.ArgumentParser) -> None:
        p.add_argument("corpus", nargs="+", help="text files or directories (.txt, .jsonl, .csv, .tsv, optionally .gz)")
        p.add_argument("--field", default="text", help="JSONL key holding the text")
        p.add_argument("--doc-field", help="JSONL key whose change starts a new document")
        p.add_argument("--column", help="CSV/TSV column holding the text (name, or index for headerless files)")
        p.add_argument("--clean", choices=["html"], help="strip HTML tags, entities, URLs and control characters")
        p.add_argument("--split-sentences", action=argparse.BooleanOptionalAction, default=True,
                       help="split paragraphs into sentences (--no-split-sentences if lines are sentences already)")
        p.add_argument("--on-error", choices=["fail", "skip"], default="fail", help="what to do with broken JSONL lines")

    tokenizer_verbs = verbs.add_parser("tokenizer", help="train a tokenizer").add_subparsers(dest="tokenizer_verb", required=True)
    p = tokenizer_verbs.add_parser("train", help="train a WordPiece or word-level tokenizer on a corpus")
    p.set_defaults(func=cmd_tokenizer_train)
    corpus_flags(p)
    p.add_argument("--out", required=True, help="directory for the Hugging Face tokenizer files")
    p.add_argument("--kind", choices=["wordpiece", "word"], default="wordpiece")
    p.add_argument("--vocab-size", type=int, default=30522)
    p.add_argument("--min-frequency", type=int, default=2)
    p.add_argument("--lowercase", action=argparse.BooleanOptionalAction, default=True, help="--no-lowercase (or --cased) keeps case")
    p.add_argument("--cased", dest="lowercase", action="store_false", help="same as --no-lowercase")
    p.add_argument("--strip-accents", dest="strip_accents", action="store_true", default=None)
    p.add_argument("--keep-accents", dest="strip_accents", action="store_false", help="keep diacritics (default: strip when lowercasing, as BERT)")

    p = verb("prepare", cmd_prepare, "tokenise a corpus into a data directory (token memmap + sentence/document index)")
    corpus_flags(p)
    p.add_argument("--tokenizer", required=True, help="tokenizer directory")
    p.add_argument("--out", required=True, help="data directory to write")
    p.add_argument("--valid-fraction", type=float, default=0.01, help="share of tokens held out, as whole documents")
    p.add_argument("--valid", nargs="+", help="held-out files (instead of --valid-fraction)")
    p.add_argument("--workers", type=int, default=1, help="tokenising processes; output is identical for any number")
    p.add_argument("--pairs", metavar="A,B", help="the file holds explicit pairs: two columns (names or indexes) or JSONL keys")

    data_verbs = verbs.add_parser("data", help="look at prepared data").add_subparsers(dest="data_verb", required=True)
    p = data_verbs.add_parser("show", help="print training instances as the model sees them")
    p.set_defaults(func=cmd_data_show)
    p.add_argument("data")
    p.add_argument("--n", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--mask-prob", type=float, default=0.15)
    p.add_argument("--whole-word-mask", action="store_true")
    p.add_argument("--jsonl", action="store_true", help="one JSON object per instance")
    p = data_verbs.add_parser("stats", help="documents, sentences, tokens, [UNK] rate")
    p.set_defaults(func=cmd_data_stats)
    p.add_argument("data")
    p.add_argument("--json", action="store_true")

    from .config import ModelConfig, TrainConfig

    p = verb("pretrain", cmd_pretrain, "pre-train a BERT with masked LM and next sentence prediction")
    p.add_argument("--data", required=True, help="prepared data directory (bertforge prepare)")
    p.add_argument("--out", required=True, help="run directory")
    p.add_argument("--preset", choices=["tiny", "mini", "small", "medium", "base", "large"], help="model size (default mini)")
    p.add_argument("--resume", action="store_true", help="continue from the latest checkpoint in --out")
    p.add_argument("--overwrite", action="store_true", help="replace a run already in --out")
    p.add_argument("--tensorboard", action="store_true", help="also write TensorBoard event files")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    add_dataclass_flags(p, ModelConfig)
    add_dataclass_flags(p, TrainConfig)

    p = verb("sweep", cmd_sweep, "pre-train every combination of a grid (ablations) and tabulate the results")
    p.add_argument("--data", required=True)
    p.add_argument("--out", required=True, help="sweep directory")
    p.add_argument("--preset", default="mini", choices=["tiny", "mini", "small", "medium", "base", "large"])
    p.add_argument("--grid", action="append", required=True, metavar="FIELD=V1,V2", help="an axis: any model or training setting")
    p.add_argument("--parallel", type=int, default=1, help="runs at once (the cores are shared among them)")
    add_dataclass_flags(p, ModelConfig)
    add_dataclass_flags(p, TrainConfig)

    p = verb("evaluate", cmd_evaluate, "held-out MLM loss, accuracy, perplexity and NSP accuracy")
    p.add_argument("model", help="run directory or model directory")
    p.add_argument("--data", nargs="+", required=True, help="a prepared data directory, or raw text files")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--max-batches", type=int, default=50)
    p.add_argument("--json", action="store_true")

    p = verb("plot", cmd_plot, "draw a run's training curves (also while it is running)")
    p.add_argument("run_dir")
    p.add_argument("--out", help="output file (default RUN_DIR/plots/training_curves.png)")
    p.add_argument("--format", choices=["png", "svg"])

    p = verb("fill-mask", cmd_fill_mask, "predict the tokens behind each [MASK]")
    p.add_argument("model", help="run directory or model directory")
    trust_pickle_flag(p)
    p.add_argument("text", help='text with one or more [MASK], e.g. "the cat sat on the [MASK]."')
    p.add_argument("--top-k", type=int, default=5)
    p.add_argument("--targets", help="comma-separated words to score instead of the whole vocabulary")
    p.add_argument("--plot", help="also draw the top-k as a bar chart into this file (.png or .svg)")
    p.add_argument("--answer", help="with --plot: highlight this word")
    p.add_argument("--json", action="store_true")

    p = verb("nsp", cmd_nsp, "probability that sentence B follows sentence A")
    p.add_argument("model")
    trust_pickle_flag(p)
    p.add_argument("sentence_a", nargs="?")
    p.add_argument("sentence_b", nargs="?")
    p.add_argument("--input", help="TSV file of A<TAB>B pairs, one per line")
    p.add_argument("--plot", help="also draw is_next_prob per pair into this file (.png or .svg)")
    p.add_argument("--json", action="store_true")

    p = verb("plot-embeddings", cmd_plot_embeddings, "heatmaps of the token, segment and position embeddings and their sum")
    p.add_argument("model")
    trust_pickle_flag(p)
    p.add_argument("sentence_a")
    p.add_argument("sentence_b", nargs="?")
    p.add_argument("--out", required=True)
    p.add_argument("--format", choices=["png", "svg"])

    p = verb("attention", cmd_attention, "attention heatmap of one head, or a grid of all heads of a layer")
    p.add_argument("model")
    trust_pickle_flag(p)
    p.add_argument("text")
    p.add_argument("--pair", help="second sentence, as segment B")
    p.add_argument("--layer", type=int, default=-1, help="layer index (negative counts from the top)")
    p.add_argument("--head", type=int, help="one head; all heads of the layer when omitted")
    p.add_argument("--out", required=True)
    p.add_argument("--format", choices=["png", "svg"])

    p = verb("embed", cmd_embed, "sentence embeddings for each line of a file")
    p.add_argument("model")
    trust_pickle_flag(p)
    p.add_argument("--input", required=True, help="text file, one sentence per line")
    p.add_argument("--out", required=True, help="output .npy file")
    p.add_argument("--pooling", choices=["cls", "mean"], default="cls")
    p.add_argument("--layer", type=int, default=-1, help="hidden layer to read (-1 = last, 0 = embeddings)")
    p.add_argument("--batch-size", type=int, default=64)

    p = verb("finetune", cmd_finetune, "fine-tune for sentence or sentence-pair classification")
    p.add_argument("model", help="run directory or model directory (pre-trained)")
    p.add_argument("--train", required=True, help="TSV, CSV or JSONL")
    p.add_argument("--dev", required=True, help="TSV, CSV or JSONL, same columns")
    p.add_argument("--text-column", required=True, help="name, or index for headerless files")
    p.add_argument("--pair-column", help="second text of a sentence pair")
    p.add_argument("--label-column", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--lr", type=float, default=5e-5)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--max-seq-len", type=int, default=128)
    p.add_argument("--warmup", type=float, default=0.1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="auto")
    p.add_argument("--precision", choices=["auto", "fp32", "bf16", "fp16"], default="auto", help="as for pretrain")
    p.add_argument("--dropout", type=float, help="hidden and attention dropout while fine-tuning (default: the model's own)")
    p.add_argument("--from-scratch", action="store_true", help="same architecture, random init: the baseline")
    p.add_argument("--quiet", action="store_true")
    p.add_argument("--json", action="store_true")

    p = verb("classify", cmd_classify, "label texts with a fine-tuned model")
    p.add_argument("model")
    p.add_argument("text", nargs="?")
    p.add_argument("--pair", help="second text of a pair")
    p.add_argument("--input", help="file with one text per line (TEXT<TAB>PAIR with --pairs)")
    p.add_argument("--pairs", action="store_true", help="lines of --input are TEXT<TAB>PAIR")
    p.add_argument("--json", action="store_true")

    p = verb("demo", cmd_demo, "train tokenizers and tiny BERTs on the bundled corpora, then question them")
    p.add_argument("--out", default="demo_runs")
    p.add_argument("--fast", action="store_true", help="fewer steps, for a smoke test")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args) or 0
    except UserError as e:
        print(f"bertforge {args.verb}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
