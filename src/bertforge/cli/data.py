"""Verbs that turn text into data: `tokenizer train`, `tokenizer extend`, `prepare`, `data show`, `data stats`."""

from __future__ import annotations

import argparse
import sys

from ..errors import UserError
from ..formats.catalog import suffix_help
from ..formats.options import CorpusOptions
from ..objectives import PAIR_OBJECTIVES
from .flags import (
    HIDDEN,
    POSITIVE,
    add_config_flags,
    add_verb,
    at_least,
    config_values,
    fraction,
    output_flags,
    print_json,
)


def cmd_tokenizer_train(args: argparse.Namespace) -> None:
    from ..data.vocabulary import train_corpus_tokenizer
    from ..formats.corpus import describe_files

    made = train_corpus_tokenizer(
        args.corpus,
        args.out,
        _corpus_options(args),
        kind=args.kind,
        vocab_size=args.vocab_size,
        min_frequency=args.min_frequency,
        lowercase=args.lowercase,
        strip_accents=args.strip_accents,
        overwrite=args.overwrite,
    )
    tokenizer, report = made.tokenizer, made.filter_report
    if args.filter_report:
        report.write(args.filter_report)
    if args.json:
        print_json(
            {
                "kind": args.kind,
                "vocab_size": tokenizer.get_vocab_size(),
                "words": made.words,
                "strip_accents": made.accents.strip if made.accents else args.strip_accents,
                "accents": made.accents.reason if made.accents else "as asked",
                "out": args.out,
            }
        )
        return
    if report.dropped and not args.quiet:
        print(report, file=sys.stderr)
    if made.accents and not args.quiet:
        print(made.accents.reason, file=sys.stderr)
    print(
        f"trained a {args.kind} tokenizer with {tokenizer.get_vocab_size()} tokens on {made.words:,} words "
        f"from {describe_files(made.files)} -> {args.out}"
    )
    if made.advice and not args.quiet:
        print(f"advice: {made.advice}", file=sys.stderr)


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
    from ..data.prepare import prepare
    from ..formats.corpus import describe_files
    from ..formats.filters import describe_filters

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
        overwrite=args.overwrite,
    )
    if args.json:
        print_json(meta)
        return
    if meta["filters"]["dropped"]:
        print(describe_filters(meta["filters"]), file=sys.stderr)
    splits = meta["splits"]
    total = splits["train"]["tokens"] + splits["valid"]["tokens"]
    print(
        f"prepared {splits['train']['tokens']:,} train and {splits['valid']['tokens']:,} held-out tokens "
        f"({splits['valid']['tokens'] / max(total, 1):.1%}; "
        f"{splits['train']['documents']:,} + {splits['valid']['documents']:,} "
        f"documents) from {describe_files(meta['sources'])} -> {args.out}"
    )


def cmd_data_show(args: argparse.Namespace) -> None:
    from ..data.show import show_instances

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
    from ..data.directory import SPLITS, data_stats
    from ..formats.filters import describe_filters

    stats = data_stats(args.data)
    if args.json:
        print_json(stats)
        return
    for split in SPLITS:
        s = stats[split]
        print(
            f"{split:5s}  documents {s['documents']:>9,}  sentences {s['sentences']:>10,}  tokens {s['tokens']:>12,}  "
            f"mean sentence {s['mean_sentence_tokens']:6.2f} tokens  [UNK] rate {s['unk_rate']:.4%}"
        )
    if stats.get("filters"):
        print(describe_filters(stats["filters"]))


def cmd_tokenizer_extend(args: argparse.Namespace) -> None:
    from ..training.extend import extend_vocabulary

    made = extend_vocabulary(
        args.model,
        args.corpus,
        args.out,
        args.add,
        args.min_frequency,
        _corpus_options(args),
        overwrite=args.overwrite,
        trust_pickle=args.trust_pickle,
    )
    if args.json:
        added = [{"word": word, "occurrences": count, "pieces": pieces} for word, count, pieces in made.added]
        print_json(
            {
                "added": added,
                "words": made.words,
                "pieces_per_word_before": made.pieces_before / max(made.words, 1),
                "pieces_per_word_after": made.pieces_after / max(made.words, 1),
                "other_words_changed": made.others_changed,
                "out": str(made.out),
            }
        )
        return
    print(made.summary())


def corpus_flags(p: argparse.ArgumentParser, skip: tuple[str, ...] = ()) -> None:
    p.add_argument(
        "corpus",
        nargs="+",
        help=suffix_help(),
    )
    add_config_flags(p, CorpusOptions, skip=skip, keep_defaults=True)
    p.add_argument("--filter-report", help="write what each filter dropped (counts and 20 examples) to this JSON")
    p.add_argument("--column", "--field", dest="text_column", default=HIDDEN, help=HIDDEN)  # older spellings
    p.add_argument("--doc-field", dest="doc_column", default=HIDDEN, help=HIDDEN)


def register(verbs) -> None:
    tokenizer_verbs = add_verb(verbs, "tokenizer", None, "train a tokenizer, or extend a model's").add_subparsers(
        dest="tokenizer_verb", required=True, metavar="VERB"
    )
    p = add_verb(tokenizer_verbs, "train", cmd_tokenizer_train, "train a WordPiece or word-level tokenizer on a corpus")
    corpus_flags(p, skip=("pair_column", "min_chars_per_token", "max_chars_per_token"))
    p.add_argument("--out", required=True, help="directory for the Hugging Face tokenizer files")
    p.add_argument(
        "--kind", choices=["wordpiece", "word"], default="wordpiece", help="WordPiece (BERT's) or whole words"
    )
    p.add_argument(
        "--vocab-size", type=at_least(6), default=30522, help="tokens in the vocabulary, special tokens included"
    )
    p.add_argument("--min-frequency", type=POSITIVE, default=2, help="a word or piece needs this many occurrences")
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
        help="strip diacritics (default: measured on the corpus: kept where stripping would merge its words, as in "
        "Vietnamese, French or German; stripped for English-like text when lowercasing, as BERT uncased)",
    )
    p.add_argument(
        "--keep-accents", dest="strip_accents", action="store_false", help="keep diacritics (default: measured)"
    )
    p.add_argument("--overwrite", action="store_true", help="replace the tokenizer already in --out")
    output_flags(p)

    p = add_verb(
        tokenizer_verbs,
        "extend",
        cmd_tokenizer_extend,
        "add a corpus's words to a model's vocabulary: the N its tokenizer cuts into the most pieces (by occurrence) "
        "become whole tokens, their embeddings the mean of their pieces'; a model for prepare and pretrain "
        "--init-from",
    )
    p.add_argument("model", help="the model (a run or model directory: bertforge's, or a downloaded BERT, ...)")
    corpus_flags(p, skip=("pair_column", "min_chars_per_token", "max_chars_per_token"))
    p.add_argument("--add", type=POSITIVE, required=True, help="words to add")
    p.add_argument("--min-frequency", type=POSITIVE, default=2, help="a word needs this many occurrences to be added")
    p.add_argument("--out", required=True, help="directory for the extended model (and its tokenizer)")
    p.add_argument("--overwrite", action="store_true", help="replace the model already in --out")
    p.add_argument(
        "--trust-pickle",
        action="store_true",
        help="allow a model with only pytorch_model.bin (unpickling can run code: only for sources you trust)",
    )
    output_flags(p)

    p = add_verb(
        verbs,
        "prepare",
        cmd_prepare,
        "tokenise a corpus into a data directory (token memmap + sentence/document index)",
    )
    corpus_flags(p)
    p.add_argument("--pairs", metavar="A,B", help=HIDDEN)  # older spelling of --text-column A --pair-column B
    p.add_argument(
        "--tokenizer",
        required=True,
        help="tokenizer directory, or a model or run directory (its tokenizer: to continue pre-training that model)",
    )
    p.add_argument("--out", required=True, help="data directory to write")
    p.add_argument(
        "--valid-fraction",
        type=fraction,
        default=0.01,
        help="share of tokens held out, as whole documents (never exceeded)",
    )
    p.add_argument("--valid", nargs="+", help="held-out files (instead of --valid-fraction)")
    p.add_argument(
        "--workers", type=POSITIVE, default=1, help="tokenising processes; output is identical for any number"
    )
    p.add_argument("--overwrite", action="store_true", help="replace the prepared data already in --out")
    output_flags(p)

    data_verbs = add_verb(verbs, "data", None, "look at prepared data").add_subparsers(
        dest="data_verb", required=True, metavar="VERB"
    )
    p = add_verb(data_verbs, "show", cmd_data_show, "print training instances as the model sees them")
    p.add_argument("data", help="prepared data directory")
    p.add_argument("--n", type=POSITIVE, default=5, help="instances to show")
    p.add_argument("--seed", type=int, default=0, help="data and masking seed")
    p.add_argument("--seq-len", type=at_least(8), default=128, help="instance length")
    p.add_argument("--mask-prob", type=fraction, default=0.15, help="fraction of tokens chosen for MLM")
    p.add_argument("--whole-word-mask", action="store_true", help="mask all pieces of a word together")
    p.add_argument(
        "--pair-objective", choices=list(PAIR_OBJECTIVES), default="nsp", help="instances for this pair task"
    )
    p.add_argument("--json", action="store_true", help="one JSON object per instance")
    p.add_argument("--jsonl", dest="json", action="store_true", help=HIDDEN)  # the older spelling
    p = add_verb(data_verbs, "stats", cmd_data_stats, "documents, sentences, tokens, [UNK] rate")
    p.add_argument("data", help="prepared data directory")
    output_flags(p, quiet=False)
