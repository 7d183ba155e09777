"""The `bertforge` command: parses arguments and calls the modules; no logic of its own.

Flags that configure something come from that thing's dataclass (ModelConfig,
TrainConfig, FinetuneConfig, CorpusOptions): a field `num_layers` is the flag
`--num-layers`, its documentation is the help, and `config.field_parser` parses
it, the same parser `sweep` uses for grid values. One concept has one flag name
on every verb; older spellings still work but are not listed.

Bad input raises UserError, printed as one line on stderr with exit code 2.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .config import (
    DEFAULT_RECIPE,
    PRESETS,
    RECIPES,
    FinetuneConfig,
    ModelConfig,
    TrainConfig,
    field_parser,
    recipe_configs,
)
from .corpus import CorpusOptions
from .errors import UserError

HIDDEN = argparse.SUPPRESS
SMALL_CORPUS_WORDS = 50_000_000  # below this, a 30k vocabulary costs step time for little (README, budget)


def _print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, ensure_ascii=False, default=str))


def _argparse_type(parse: Callable[[str], Any], name: str) -> Callable[[str], Any]:
    def convert(text: str) -> Any:
        try:
            return parse(text)
        except ValueError as e:
            raise argparse.ArgumentTypeError(f"{name}: {e}") from None

    convert.__name__ = name  # argparse names the type in its messages
    return convert


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
        help_text = f"{f.metadata.get('help', '')} (default: {default_text})".replace("%", "%%")
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


# ---------------------------------------------------------------- data


def cmd_tokenizer_train(args: argparse.Namespace) -> None:
    from .corpus import read_paragraphs
    from .tokenizer import save_tokenizer, train_tokenizer

    options = _corpus_options(args)
    paragraph_filter = options.paragraph_filter()
    words = 0

    def texts():
        nonlocal words
        for paragraph in read_paragraphs(args.corpus, options, paragraph_filter=paragraph_filter):
            words += len(paragraph.text.split())
            yield paragraph.text

    tokenizer = train_tokenizer(
        texts(),
        kind=args.kind,
        vocab_size=args.vocab_size,
        min_frequency=args.min_frequency,
        lowercase=args.lowercase,
        strip_accents=args.strip_accents,
    )
    save_tokenizer(tokenizer, args.out)
    if args.filter_report:
        paragraph_filter.report.write(args.filter_report)
    if paragraph_filter.report.dropped and not (args.quiet or args.json):
        print(paragraph_filter.report, file=sys.stderr)
    if args.json:
        _print_json({"kind": args.kind, "vocab_size": tokenizer.get_vocab_size(), "words": words, "out": args.out})
    elif not args.quiet:
        print(
            f"trained a {args.kind} tokenizer with {tokenizer.get_vocab_size()} tokens on {words:,} words "
            f"-> {args.out}",
            file=sys.stderr,
        )
        if args.kind == "wordpiece" and words < SMALL_CORPUS_WORDS and tokenizer.get_vocab_size() > 16384:
            print(
                f"advice: for a corpus of {words:,} words, --vocab-size 8192 makes each pre-training step faster "
                "(0.51 against 0.75 s on mini, measured) with no loss in what is learned at equal time "
                "(README: Pre-training on a budget); BabyLM's best models used 6k-16k tokens for 10M words",
                file=sys.stderr,
            )


def _corpus_options(args: argparse.Namespace) -> CorpusOptions:
    values = config_values(args, CorpusOptions)
    if getattr(args, "pairs", None):  # the old spelling: --pairs A,B
        columns = args.pairs.split(",")
        if len(columns) != 2:
            raise UserError(
                f"--pairs takes two columns, like --pairs 0,1 or --pairs question,answer; got {args.pairs!r}"
            )
        values.update(text_column=columns[0], pair_column=columns[1])
    return CorpusOptions(**values)


def cmd_prepare(args: argparse.Namespace) -> None:
    from .filters import describe_filters
    from .prepare import prepare

    meta = prepare(
        args.corpus,
        args.tokenizer,
        args.out,
        valid_fraction=args.valid_fraction,
        valid_files=args.valid,
        options=_corpus_options(args),
        workers=args.workers,
        progress=not (args.quiet or args.json),
        filter_report=args.filter_report,
    )
    if args.json:
        _print_json(meta)
        return
    if meta["filters"]["dropped"]:
        print(describe_filters(meta["filters"]), file=sys.stderr)
    splits = meta["splits"]
    total = splits["train"]["tokens"] + splits["valid"]["tokens"]
    print(
        f"prepared {splits['train']['tokens']:,} train and {splits['valid']['tokens']:,} held-out tokens "
        f"({splits['valid']['tokens'] / max(total, 1):.1%}; "
        f"{splits['train']['documents']:,} + {splits['valid']['documents']:,} "
        f"documents) -> {args.out}",
        file=sys.stderr,
    )


def cmd_data_show(args: argparse.Namespace) -> None:
    from .show import show_instances

    show_instances(
        args.data,
        n=args.n,
        seed=args.seed,
        as_jsonl=args.json,
        seq_len=args.seq_len,
        mask_prob=args.mask_prob,
        whole_word_mask=args.whole_word_mask,
        pair_objective=args.pair_objective,
    )


def cmd_data_stats(args: argparse.Namespace) -> None:
    from .datadir import SPLITS, data_stats
    from .filters import describe_filters

    stats = data_stats(args.data)
    if args.json:
        _print_json(stats)
        return
    for split in SPLITS:
        s = stats[split]
        print(
            f"{split:5s}  documents {s['documents']:>9,}  sentences {s['sentences']:>10,}  tokens {s['tokens']:>12,}  "
            f"mean sentence {s['mean_sentence_tokens']:6.2f} tokens  [UNK] rate {s['unk_rate']:.4%}"
        )
    if stats.get("filters"):
        print(describe_filters(stats["filters"]))


# ---------------------------------------------------------------- training


def resolve_run_configs(args: argparse.Namespace) -> tuple[ModelConfig, TrainConfig]:
    """Model and train configs for `pretrain`.

    A new run: the recipe's defaults, its preset (or --preset), then the given flags.
    `--resume`: the run's saved configs with the given flags on top (a --preset given
    then must match the saved architecture, which the trainer checks).
    """
    from .checkpoint import run_configs
    from .datadir import read_meta

    model_overrides = config_values(args, ModelConfig)
    train_overrides = config_values(args, TrainConfig)
    saved = run_configs(Path(args.out)) if args.resume else None
    if saved is None:
        model_overrides.setdefault("vocab_size", read_meta(args.data)["vocab_size"])
        return recipe_configs(args.recipe or DEFAULT_RECIPE, args.preset, model_overrides, train_overrides)
    if args.recipe:
        raise UserError(
            "--recipe chooses how a new run starts; a resumed run keeps its saved settings (flags change them)"
        )
    preset = ModelConfig.preset(args.preset, vocab_size=saved["model"]["vocab_size"]).to_dict() if args.preset else {}
    model = ModelConfig.from_dict({**saved["model"], **preset, **model_overrides})
    return model, TrainConfig.from_dict({**saved["train"], **train_overrides})


def cmd_pretrain(args: argparse.Namespace) -> int:
    from .plots import save_figure, training_curves
    from .train import pretrain

    model_config, train_config = resolve_run_configs(args)
    result = pretrain(
        args.data,
        args.out,
        model_config,
        train_config,
        resume=args.resume,
        overwrite=args.overwrite,
        progress=not (args.quiet or args.json),
        tensorboard=args.tensorboard,
    )
    if result.interrupted:
        return 128 + result.interrupted
    if not result.is_main:
        return 0
    run = Path(args.out)
    save_figure(training_curves(run / "metrics.jsonl"), run / "plots" / "training_curves.png")
    if args.json:
        _print_json(
            {
                "steps": result.state.step,
                "tokens": result.state.tokens_seen,
                "elapsed": result.state.elapsed,
                "final_eval": result.final_eval,
                "model": str(run / "model"),
            }
        )
    else:
        print(
            f"done: {result.state.step} steps, {result.state.tokens_seen:,} tokens in {result.state.elapsed:.0f}s; "
            f"model in {run / 'model'}",
            file=sys.stderr,
        )
    if model_config.attention_bias != "none":
        print(
            f"note: the {model_config.attention_bias} attention bias has no transformers class: bertforge loads this "
            "model, transformers refuses it (train with --attention-bias none for one it loads)",
            file=sys.stderr,
        )
    return 0


def cmd_sweep(args: argparse.Namespace) -> None:
    from .sweep import parse_grid, run_sweep

    axes = parse_grid(args.grid)
    fixed = {**config_values(args, ModelConfig), **config_values(args, TrainConfig)}
    clash = sorted(set(axes) & set(fixed))
    if clash:
        raise UserError(f"{clash[0]} is both a --grid axis and a fixed flag")
    base = (["--recipe", args.recipe] if args.recipe else []) + (["--preset", args.preset] if args.preset else [])
    rows = run_sweep(args.data, args.out, base, axes, fixed, parallel=args.parallel, quiet=args.quiet or args.json)
    if args.json:
        _print_json(rows)
        return
    print((Path(args.out) / "results.md").read_text(encoding="utf-8"))
    print(
        f"{len(rows)} runs; table in {Path(args.out) / 'results.md'}, figure in {Path(args.out) / 'curves.png'}",
        file=sys.stderr,
    )


def cmd_evaluate(args: argparse.Namespace) -> None:
    from .evaluate import evaluate_model

    result = evaluate_model(
        args.model,
        args.data,
        batch_size=args.batch_size,
        seq_len=args.seq_len,
        max_batches=args.max_batches,
        device=args.device,
        precision=args.precision,
        trust_pickle=args.trust_pickle,
    )
    if args.json:
        _print_json(result)
        return
    print(
        f"MLM loss {result['mlm_loss']:.4f}  accuracy {result['mlm_acc']:.4f}  perplexity {result['perplexity']:.2f}  "
        f"(unigram baseline accuracy {result['unigram_baseline_acc']:.4f}, {result['masked_tokens']:,} masked tokens)"
    )
    pair = result["pair_objective"]
    if pair != "none":
        print(f"{pair.upper()} loss {result[pair + '_loss']:.4f}  accuracy {result[pair + '_acc']:.4f}")


def cmd_plot(args: argparse.Namespace) -> None:
    from .plots import save_figure, training_curves

    run_dir = Path(args.run_dir)
    out = (
        _with_format(args.out, args.format)
        if args.out
        else run_dir / "plots" / f"training_curves.{args.format or 'png'}"
    )
    print(save_figure(training_curves(run_dir / "metrics.jsonl"), out))


# ---------------------------------------------------------------- inference


def _load(args: argparse.Namespace):
    from .inference import load

    return load(
        args.model, device=args.device, trust_pickle=args.trust_pickle, precision=getattr(args, "precision", "fp32")
    )


def _second_text(args: argparse.Namespace) -> str | None:
    """The second sentence: --pair, or (the older spelling) a second positional argument."""
    if args.pair is not None and args.sentence_b is not None:
        raise UserError("give the second sentence once: --pair B or a second argument, not both")
    return args.pair if args.pair is not None else args.sentence_b


def cmd_fill_mask(args: argparse.Namespace) -> None:
    bert = _load(args)
    targets = [t for t in args.targets.split(",") if t] if args.targets else None
    result = bert.fill_mask(args.text, top_k=args.top_k, targets=targets)
    if args.plot:
        from .plots import fill_mask_bars, save_figure

        print(f"wrote {save_figure(fill_mask_bars(result, args.answer), args.plot)}", file=sys.stderr)
    if args.json:
        _print_json(result)
        return
    for mask in result["masks"]:
        print(f"[MASK] at token {mask['position']}:")
        for p in mask["predictions"]:
            print(f"  {p['score']:6.3f}  {p['token']:<15} {p['sequence']}")


def cmd_nsp(args: argparse.Namespace) -> None:
    from .textfiles import read_texts

    bert = _load(args)
    if args.input:
        texts, pairs = read_texts(args.input, args.text_column, args.pair_column or "1")
    elif args.sentence_a is not None and _second_text(args) is not None:
        texts, pairs = [args.sentence_a], [_second_text(args)]
    else:
        raise UserError("give two sentences (A --pair B), or --input FILE with A<TAB>B per line")
    results = [bert.nsp(a, b) for a, b in zip(texts, pairs)]
    if args.plot:
        from .plots import nsp_bars, save_figure

        print(f"wrote {save_figure(nsp_bars(results), args.plot)}", file=sys.stderr)
    if args.json:
        _print_json(results if args.input else results[0])
        return
    key = next(k for k in results[0] if k.endswith("_prob"))
    for r in results:
        print(f"{key}={r[key]:.3f}  {r['label']:<8} A: {r['a']!r}  B: {r['b']!r}")


def cmd_plot_embeddings(args: argparse.Namespace) -> None:
    from .plots import embedding_heatmaps, save_figure

    figure = embedding_heatmaps(_load(args), args.sentence_a, _second_text(args))
    print(save_figure(figure, _with_format(args.out, args.format)))


def cmd_attention(args: argparse.Namespace) -> None:
    from .plots import attention_maps, save_figure, shorten

    tokens, attention = _load(args).attention(args.text, args.pair)
    title = "Self-attention: " + args.text + (f"  /  {args.pair}" if args.pair else "")
    figure = attention_maps(tokens, attention, args.layer, args.head, shorten(title, 110))
    print(save_figure(figure, _with_format(args.out, args.format)))


def _with_format(out: str, fmt: str | None) -> Path:
    """--format svg turns plot.png into plot.svg; without it the file's own suffix decides."""
    path = Path(out)
    return path.with_suffix(f".{fmt}") if fmt else path


def cmd_embed(args: argparse.Namespace) -> None:
    import numpy as np

    from .textfiles import read_texts

    texts, _ = read_texts(args.input, args.text_column)
    vectors = _load(args).embed(texts, pooling=args.pooling, layer=args.layer, batch_size=args.batch_size)
    np.save(args.out, vectors)
    if args.json:
        _print_json({"texts": vectors.shape[0], "dimensions": vectors.shape[1], "out": args.out})
    else:
        print(f"wrote {vectors.shape[0]} x {vectors.shape[1]} embeddings to {args.out}", file=sys.stderr)


def cmd_finetune(args: argparse.Namespace) -> None:
    from .classification import Columns
    from .finetune import finetune

    cfg = FinetuneConfig(**config_values(args, FinetuneConfig))
    columns = None
    if args.task in ("classification", "regression"):
        if not (args.text_column and args.label_column):
            raise UserError(f"--task {args.task} needs --text-column and --label-column")
        columns = Columns(args.text_column, args.label_column, args.pair_column)
    quiet = args.quiet or args.json
    summary = finetune(args.model, args.task, args.train, args.dev, args.out, cfg, columns, progress=not quiet)
    if args.json:
        _print_json(summary)
        return
    best = summary["best"]
    scores = ", ".join(f"{k.removeprefix('dev_')} {v:.4f}" for k, v in best.items() if k.startswith("dev_"))
    print(
        f"best epoch {best['epoch']} (by dev {summary['main_metric']}): {scores}; model in {Path(args.out) / 'model'}"
    )


def cmd_classify(args: argparse.Namespace) -> None:
    from .classification import Classifier
    from .textfiles import read_texts

    classifier = Classifier(args.model, device=args.device, trust_pickle=args.trust_pickle)
    if args.input:
        texts, pairs = read_texts(args.input, args.text_column, args.pair_column or ("1" if args.pairs else None))
    elif args.text is not None:
        texts, pairs = [args.text], [args.pair] if args.pair is not None else None
    else:
        raise UserError("give a text, or --input FILE")
    results = classifier.classify(texts, pairs)
    if args.json:
        _print_json(results if args.input else results[0])
        return
    for r in results:
        pair = f" / {r['pair']!r}" if "pair" in r else ""
        if "value" in r:
            print(f"{r['value']:10.4f}  {r['text']!r}{pair}")
            continue
        probabilities = "  ".join(f"{label}={p:.3f}" for label, p in r["probabilities"].items())
        print(f"{r['label']:<12} {probabilities}  {r['text']!r}{pair}")


def cmd_tag(args: argparse.Namespace) -> None:
    from .tagging import Tagger
    from .textfiles import read_texts

    tagger = Tagger(args.model, device=args.device, trust_pickle=args.trust_pickle)
    if args.input:
        texts, _ = read_texts(args.input, args.text_column)
    elif args.text is not None:
        texts = [args.text]
    else:
        raise UserError("give a text, or --input FILE")
    results = [{"text": text, "entities": tagger.tag(text)} for text in texts]
    if args.json:
        _print_json(results if args.input else results[0]["entities"])
        return
    for r in results:
        found = (
            "  ".join(f"[{e['word']}]{e['entity_group']} ({e['score']:.2f})" for e in r["entities"]) or "(no entities)"
        )
        print(f"{r['text']!r}: {found}")


def cmd_answer(args: argparse.Namespace) -> None:
    from .qa import Answerer
    from .textfiles import open_text

    if (args.context is None) == (args.context_file is None):
        raise UserError("give the context once: --context TEXT or --context-file FILE")
    context = args.context
    if args.context_file:
        with open_text(args.context_file) as f:
            context = f.read()
    answerer = Answerer(
        args.model, device=args.device, trust_pickle=args.trust_pickle, seq_len=args.seq_len, stride=args.stride
    )
    result = answerer.answer(args.question, context, args.max_answer_length)
    if args.json:
        _print_json(result)
        return
    print(f"{result['answer']!r}  (score {result['score']:.3f}, characters {result['start']}-{result['end']})")


def cmd_score(args: argparse.Namespace) -> None:
    from .score import parse_task, score

    tasks = [parse_task(spec) for spec in args.tasks]
    cfg = FinetuneConfig(**config_values(args, FinetuneConfig))
    lrs = [float(x) for x in args.lrs.split(",")] if args.lrs else None
    rows = score(
        args.model,
        tasks,
        args.out,
        cfg,
        seeds=args.seeds,
        lrs=lrs,
        from_scratch=args.from_scratch,
        progress=not (args.quiet or args.json),
    )
    if args.json:
        _print_json(rows)
        return
    print((Path(args.out) / "results.md").read_text(encoding="utf-8"))


def cmd_demo(args: argparse.Namespace) -> None:
    from .demo import run_demo

    run_demo(Path(args.out), fast=args.fast)


# ---------------------------------------------------------------- parser


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bertforge", description="BERT pre-training from scratch: masked LM + next sentence prediction."
    )
    verbs = parser.add_subparsers(dest="verb", required=True, metavar="VERB")

    def verb(group, name: str, func: Callable | None, help_text: str) -> argparse.ArgumentParser:
        sub = group.add_parser(name, help=help_text, description=help_text, formatter_class=HelpFormatter)
        if func is not None:
            sub.set_defaults(func=func)
        return sub

    def output_flags(p: argparse.ArgumentParser, quiet: bool = True) -> None:
        p.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
        if quiet:
            p.add_argument("--quiet", action="store_true", help="no progress bar or chatter")

    def model_flags(p: argparse.ArgumentParser) -> None:
        p.add_argument("model", help="run directory or model directory")
        p.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N or auto")
        p.add_argument(
            "--trust-pickle",
            action="store_true",
            help="allow a directory with only pytorch_model.bin (unpickling can run code: only for sources you trust)",
        )

    def inference_precision_flag(p: argparse.ArgumentParser, default: str = "fp32") -> None:
        """bf16 pays for batches (embed: 1.6x on an AMX CPU), not for one sentence (fill-mask: slower), as measured."""
        p.add_argument(
            "--precision",
            choices=["auto", "fp32", "bf16"],
            default=default,
            help="bf16 agrees with fp32 to about 1e-2 in probabilities; auto picks it on machines measured fast at it",
        )

    def pair_flags(p: argparse.ArgumentParser, positional: bool) -> None:
        if positional:
            p.add_argument("sentence_b", nargs="?", help=HIDDEN)  # the older spelling of --pair
        p.add_argument("--pair", help="second sentence, as segment B")

    def column_flags(p: argparse.ArgumentParser, pair: bool = True) -> None:
        p.add_argument(
            "--text-column",
            default="0",
            help="with --input: column (or JSONL key) of the text; a .txt file has a text per line",
        )
        if pair:
            p.add_argument(
                "--pair-column", help="with --input: column of the second text (a .txt file: TEXT<TAB>PAIR lines)"
            )

    def corpus_flags(p: argparse.ArgumentParser, skip: tuple[str, ...] = ()) -> None:
        p.add_argument(
            "corpus",
            nargs="+",
            help="text files or directories (.txt, .jsonl, .csv, .tsv, each optionally .gz, .bz2, .xz, .zst; "
            ".parquet; datasets.save_to_disk directories)",
        )
        add_config_flags(p, CorpusOptions, skip=skip, keep_defaults=True)
        p.add_argument("--filter-report", help="write what each filter dropped (counts and 20 examples) to this JSON")
        p.add_argument(
            "--column", "--field", dest="text_column", default=HIDDEN, help=HIDDEN
        )  # older spellings of --text-column
        p.add_argument("--doc-field", dest="doc_column", default=HIDDEN, help=HIDDEN)

    tokenizer_verbs = verb(verbs, "tokenizer", None, "train a tokenizer").add_subparsers(
        dest="tokenizer_verb", required=True, metavar="VERB"
    )
    p = verb(tokenizer_verbs, "train", cmd_tokenizer_train, "train a WordPiece or word-level tokenizer on a corpus")
    corpus_flags(p, skip=("pair_column", "min_chars_per_token", "max_chars_per_token"))
    p.add_argument("--out", required=True, help="directory for the Hugging Face tokenizer files")
    p.add_argument(
        "--kind", choices=["wordpiece", "word"], default="wordpiece", help="WordPiece (BERT's) or whole words"
    )
    p.add_argument("--vocab-size", type=int, default=30522, help="tokens in the vocabulary, special tokens included")
    p.add_argument("--min-frequency", type=int, default=2, help="a word or piece needs this many occurrences")
    p.add_argument(
        "--lowercase",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="--no-lowercase (or --cased) keeps case",
    )
    p.add_argument("--cased", dest="lowercase", action="store_false", help="same as --no-lowercase")
    p.add_argument(
        "--strip-accents",
        dest="strip_accents",
        action="store_true",
        default=None,
        help="strip diacritics even when cased",
    )
    p.add_argument(
        "--keep-accents",
        dest="strip_accents",
        action="store_false",
        help="keep diacritics (default: strip when lowercasing, as BERT)",
    )
    output_flags(p)

    p = verb(
        verbs,
        "prepare",
        cmd_prepare,
        "tokenise a corpus into a data directory (token memmap + sentence/document index)",
    )
    corpus_flags(p)
    p.add_argument("--pairs", metavar="A,B", help=HIDDEN)  # older spelling of --text-column A --pair-column B
    p.add_argument("--tokenizer", required=True, help="tokenizer directory")
    p.add_argument("--out", required=True, help="data directory to write")
    p.add_argument(
        "--valid-fraction",
        type=float,
        default=0.01,
        help="share of tokens held out, as whole documents (never exceeded)",
    )
    p.add_argument("--valid", nargs="+", help="held-out files (instead of --valid-fraction)")
    p.add_argument("--workers", type=int, default=1, help="tokenising processes; output is identical for any number")
    output_flags(p)

    data_verbs = verb(verbs, "data", None, "look at prepared data").add_subparsers(
        dest="data_verb", required=True, metavar="VERB"
    )
    p = verb(data_verbs, "show", cmd_data_show, "print training instances as the model sees them")
    p.add_argument("data", help="prepared data directory")
    p.add_argument("--n", type=int, default=5, help="instances to show")
    p.add_argument("--seed", type=int, default=0, help="data and masking seed")
    p.add_argument("--seq-len", type=int, default=128, help="instance length")
    p.add_argument("--mask-prob", type=float, default=0.15, help="fraction of tokens chosen for MLM")
    p.add_argument("--whole-word-mask", action="store_true", help="mask all pieces of a word together")
    p.add_argument(
        "--pair-objective", choices=["nsp", "sop", "none"], default="nsp", help="instances for this pair task"
    )
    p.add_argument("--json", action="store_true", help="one JSON object per instance")
    p.add_argument("--jsonl", dest="json", action="store_true", help=HIDDEN)  # the older spelling
    p = verb(data_verbs, "stats", cmd_data_stats, "documents, sentences, tokens, [UNK] rate")
    p.add_argument("data", help="prepared data directory")
    output_flags(p, quiet=False)

    default_model, default_train = recipe_configs(DEFAULT_RECIPE, None, {}, {})
    recipes = "; ".join(f"{name}: {recipe.description}" for name, recipe in RECIPES.items()).replace("%", "%%")

    def run_flags(p: argparse.ArgumentParser) -> None:
        """What a new run starts from (recipe, size) and every model and training setting."""
        p.add_argument(
            "--recipe", choices=list(RECIPES), help=f"defaults to start from (default: {DEFAULT_RECIPE}). {recipes}"
        )
        p.add_argument(
            "--preset", choices=list(PRESETS), help="model size (default: the recipe's; on --resume, the saved one)"
        )
        add_config_flags(p, ModelConfig, shown_defaults=default_model)
        add_config_flags(p, TrainConfig, shown_defaults=default_train)
        _pair_objective_aliases(p)

    p = verb(verbs, "pretrain", cmd_pretrain, "pre-train a BERT with masked LM and a sentence-pair objective")
    p.add_argument("--data", required=True, help="prepared data directory (bertforge prepare)")
    p.add_argument("--out", required=True, help="run directory")
    p.add_argument(
        "--resume", action="store_true", help="continue from the latest checkpoint in --out, with its settings"
    )
    p.add_argument("--overwrite", action="store_true", help="replace a run already in --out")
    p.add_argument("--tensorboard", action="store_true", help="also write TensorBoard event files")
    output_flags(p)
    run_flags(p)

    p = verb(verbs, "sweep", cmd_sweep, "pre-train every combination of a grid (ablations) and tabulate the results")
    p.add_argument("--data", required=True, help="prepared data directory")
    p.add_argument("--out", required=True, help="sweep directory")
    p.add_argument(
        "--grid", action="append", required=True, metavar="FIELD=V1,V2", help="an axis: any model or training setting"
    )
    p.add_argument("--parallel", type=int, default=1, help="runs at once (the cores are shared among them)")
    output_flags(p)
    run_flags(p)

    p = verb(
        verbs, "evaluate", cmd_evaluate, "held-out MLM loss, accuracy and perplexity, and the pair head's accuracy"
    )
    model_flags(p)
    p.add_argument("--data", nargs="+", required=True, help="a prepared data directory, or raw text files")
    p.add_argument("--batch-size", type=int, default=32, help="sequences per batch")
    p.add_argument("--seq-len", type=int, default=128, help="instance length")
    p.add_argument("--max-batches", type=int, default=50, help="batches to evaluate (fixed masks, fixed order)")
    p.add_argument("--precision", choices=["auto", "fp32", "bf16", "fp16"], default="fp32", help="as for pretrain")
    output_flags(p, quiet=False)

    p = verb(verbs, "plot", cmd_plot, "draw a run's training curves (also while it is running)")
    p.add_argument("run_dir", help="run directory")
    p.add_argument("--out", help="output file (default RUN_DIR/plots/training_curves.png)")
    p.add_argument("--format", choices=["png", "svg"], help="image format (default: the --out suffix)")

    p = verb(verbs, "fill-mask", cmd_fill_mask, "predict the tokens behind each [MASK]")
    model_flags(p)
    p.add_argument("text", help='text with one or more [MASK], e.g. "the cat sat on the [MASK]."')
    p.add_argument("--top-k", type=int, default=5, help="predictions per [MASK]")
    p.add_argument("--targets", help="comma-separated words to score instead of the whole vocabulary")
    p.add_argument("--plot", help="also draw the top-k as a bar chart into this file (.png or .svg)")
    p.add_argument("--answer", help="with --plot: highlight this word")
    inference_precision_flag(p)
    output_flags(p, quiet=False)

    p = verb(
        verbs,
        "nsp",
        cmd_nsp,
        "probability that sentence B follows sentence A (for an SOP model: that they are in order)",
    )
    model_flags(p)
    p.add_argument("sentence_a", nargs="?", help="sentence A")
    pair_flags(p, positional=True)
    p.add_argument("--input", help="file of pairs: A<TAB>B lines, or a table with --text-column/--pair-column")
    column_flags(p)
    p.add_argument("--plot", help="also draw the probability per pair into this file (.png or .svg)")
    inference_precision_flag(p)
    output_flags(p, quiet=False)

    p = verb(
        verbs,
        "plot-embeddings",
        cmd_plot_embeddings,
        "heatmaps of the token, segment and position embeddings and their sum",
    )
    model_flags(p)
    p.add_argument("sentence_a", help="sentence A")
    pair_flags(p, positional=True)
    p.add_argument("--out", required=True, help="image file")
    p.add_argument("--format", choices=["png", "svg"], help="image format (default: the --out suffix)")

    p = verb(verbs, "attention", cmd_attention, "attention heatmap of one head, or a grid of all heads of a layer")
    model_flags(p)
    p.add_argument("text", help="sentence A")
    pair_flags(p, positional=False)
    p.add_argument("--layer", type=int, default=-1, help="layer index (negative counts from the top)")
    p.add_argument("--head", type=int, help="one head; all heads of the layer when omitted")
    p.add_argument("--out", required=True, help="image file")
    p.add_argument("--format", choices=["png", "svg"], help="image format (default: the --out suffix)")

    p = verb(verbs, "embed", cmd_embed, "sentence embeddings for each line (or row) of a file")
    model_flags(p)
    p.add_argument("--input", required=True, help="text file, one sentence per line; or a table with --text-column")
    column_flags(p, pair=False)
    p.add_argument("--out", required=True, help="output .npy file")
    p.add_argument(
        "--pooling", choices=["cls", "mean"], default="cls", help="the [CLS] vector, or the mean over tokens"
    )
    p.add_argument("--layer", type=int, default=-1, help="hidden layer to read (-1 = last, 0 = embeddings)")
    p.add_argument("--batch-size", type=int, default=64, help="texts per batch")
    inference_precision_flag(p, default="auto")
    output_flags(p, quiet=False)

    p = verb(
        verbs, "finetune", cmd_finetune, "fine-tune for classification, regression, tagging (NER) or question answering"
    )
    p.add_argument("model", help="run directory or model directory (pre-trained)")
    p.add_argument(
        "--task",
        choices=["classification", "regression", "token-classification", "question-answering"],
        default="classification",
        help="what to learn; the files' formats follow from it",
    )
    p.add_argument(
        "--train",
        required=True,
        help="TSV, CSV or JSONL (classification, regression); CoNLL (tagging); SQuAD v1.1 JSON (question answering)",
    )
    p.add_argument("--dev", required=True, help="the same format as --train")
    p.add_argument("--text-column", help="classification, regression: the text's column (a name, or an index)")
    p.add_argument("--pair-column", help="classification, regression: the second text of a pair")
    p.add_argument("--label-column", help="classification, regression: the label's (or the number's) column")
    p.add_argument("--out", required=True, help="output directory (model/, metrics.jsonl, summary.json)")
    add_config_flags(p, FinetuneConfig, keep_defaults=True)
    p.add_argument(
        "--max-seq-len", dest="seq_len", type=int, default=HIDDEN, help=HIDDEN
    )  # older spelling of --seq-len
    output_flags(p)

    p = verb(verbs, "classify", cmd_classify, "label texts with a fine-tuned model")
    model_flags(p)
    p.add_argument("text", nargs="?", help="the text")
    pair_flags(p, positional=False)
    p.add_argument("--input", help="file with one text per line (TEXT<TAB>PAIR with --pair-column 1), or a table")
    column_flags(p)
    p.add_argument("--pairs", action="store_true", help=HIDDEN)  # older spelling of --pair-column 1
    output_flags(p, quiet=False)

    p = verb(
        verbs, "score", cmd_score, "downstream evaluation: fine-tune on tasks over seeds, against from-scratch weights"
    )
    p.add_argument("model", help="run directory or model directory (pre-trained)")
    p.add_argument(
        "--tasks",
        nargs="+",
        required=True,
        metavar="NAME=PATH",
        help="sst2=DIR, mrpc=DIR, rte=DIR, cola=DIR, stsb=DIR (GLUE task directories), ner=DIR (CoNLL), "
        "squad=DIR (SQuAD JSON), or NAME=TRAIN,DEV:task=KIND,text=COL,label=COL[,pair=COL]",
    )
    p.add_argument("--out", required=True, help="score directory: every run, and results.md/.csv/.json/.png")
    p.add_argument("--seeds", type=int, default=3, help="fine-tuning seeds per task and arm")
    p.add_argument("--lrs", help="learning rates to choose from on dev with seed 0, e.g. 1e-4,3e-4 (default: --lr)")
    p.add_argument(
        "--from-scratch", action="store_true", help="also the same architecture from random weights: the baseline"
    )
    add_config_flags(p, FinetuneConfig, skip=("seed", "from_scratch"), keep_defaults=True)
    output_flags(p)

    p = verb(verbs, "tag", cmd_tag, "named entities (tags) in texts, from a token-classification model")
    model_flags(p)
    p.add_argument("text", nargs="?", help="the text")
    p.add_argument("--input", help="file with one text per line, or a table with --text-column")
    column_flags(p, pair=False)
    output_flags(p, quiet=False)

    p = verb(verbs, "answer", cmd_answer, "answer a question from a context, with a question-answering model")
    model_flags(p)
    p.add_argument("--question", required=True, help="the question")
    p.add_argument("--context", help="the text holding the answer")
    p.add_argument("--context-file", help="read the context from this file")
    p.add_argument(
        "--max-answer-length", type=int, default=15, help="longest answer in tokens (the pipeline's default)"
    )
    p.add_argument("--seq-len", type=int, default=384, help="tokens per window over a long context")
    p.add_argument("--stride", type=int, default=128, help="context tokens that consecutive windows share")
    output_flags(p, quiet=False)

    p = verb(verbs, "demo", cmd_demo, "train tokenizers and tiny BERTs on the bundled corpora, then question them")
    p.add_argument("--out", default="demo_runs", help="where the demo writes")
    p.add_argument("--fast", action="store_true", help="fewer steps, for a smoke test")
    return parser


def _pair_objective_aliases(p: argparse.ArgumentParser) -> None:
    """--nsp / --no-nsp, from before there were pair objectives: --pair-objective nsp / none."""
    p.add_argument("--nsp", dest="pair_objective", action="store_const", const="nsp", default=HIDDEN, help=HIDDEN)
    p.add_argument("--no-nsp", dest="pair_objective", action="store_const", const="none", default=HIDDEN, help=HIDDEN)


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
