"""Verbs for tasks after pre-training: `finetune`, `score`, and the fine-tuned models' `classify`, `tag`, `answer`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..errors import UserError
from ..tasks.config import FinetuneConfig
from ..tasks.registry import CLASSIFICATION, TASKS, ColumnNames
from .flags import (
    HIDDEN,
    POSITIVE,
    add_config_flags,
    add_verb,
    at_least,
    column_flags,
    config_values,
    fraction,
    model_flags,
    output_flags,
    pair_flags,
    print_json,
)


def cmd_finetune(args: argparse.Namespace) -> None:
    from ..tasks.finetune import finetune

    cfg = FinetuneConfig(**config_values(args, FinetuneConfig))
    names = ColumnNames(
        args.text_column,
        args.label_column,
        args.pair_column,
        tuple(args.choice_columns.split(",")) if args.choice_columns else (),
        args.label_until,
        args.label_separator,
        tuple(args.label_columns.split(",")) if args.label_columns else (),
        tuple(args.label_names.split(",")) if args.label_names else (),
    )
    columns = TASKS[args.task].columns(names)  # --task's choices are the registry's names
    quiet = args.quiet or args.json
    summary = finetune(
        args.model, args.task, args.train, args.dev, args.out, cfg, columns, not quiet, args.resume, args.overwrite
    )
    if args.json:
        print_json(summary)
        return
    best = summary["best"]
    scores = ", ".join(f"{k.removeprefix('dev_')} {v:.4f}" for k, v in best.items() if k.startswith("dev_"))
    print(
        f"best epoch {best['epoch']} (by dev {summary['main_metric']}): {scores}; model in {Path(args.out) / 'model'}"
    )


def cmd_score(args: argparse.Namespace) -> None:
    from ..studies.score import parse_task, score

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
        print_json(rows)
        return
    print((Path(args.out) / "results.md").read_text(encoding="utf-8"))


def cmd_classify(args: argparse.Namespace) -> None:
    from ..formats.corpus import read_documents, read_texts
    from ..tasks.classification import Classifier, write_predictions

    _check_answers_out(args, "predictions")
    if args.per_file and not args.input:
        raise UserError("--per-file reads --input's files, a text each")
    if args.per_file and (args.pair_column or args.pairs):
        raise UserError("--per-file reads each file as a single text; give pairs as TEXT<TAB>PAIR lines")
    sources = None
    if args.per_file:
        texts, sources = read_documents(args.input)
        pairs = None
    elif args.input:
        texts, pairs = read_texts(args.input, args.text_column, args.pair_column or ("1" if args.pairs else None))
    elif args.texts:
        if args.pair is not None and len(args.texts) > 1:
            raise UserError("--pair is the second text of one pair; give one text with it (or pairs in --input)")
        texts, pairs = args.texts, [args.pair] if args.pair is not None else None
    else:
        raise UserError("give a text, or --input FILE")
    classifier = Classifier(args.model, device=args.device, trust_pickle=args.trust_pickle)
    results = classifier.classify(texts, pairs, args.threshold, whole=args.per_file or args.whole)
    if sources:  # a file each: its name, not its whole text
        results = [
            {"source": source, **{k: v for k, v in r.items() if k != "text"}} for source, r in zip(sources, results)
        ]
    if args.out:
        write_predictions(args.out, results)
        print(f"wrote {len(results)} predictions to {args.out}", file=sys.stderr)
        return
    if args.json:
        print_json(results if args.input or len(results) > 1 else results[0])
        return
    for r in results:
        shown = r["source"] if sources else repr(r["text"]) + (f" / {r['pair']!r}" if "pair" in r else "")
        shown += f"  ({r['windows']} windows)" if r.get("windows", 1) > 1 else ""
        if "value" in r:
            print(f"{r['value']:10.4f}  {shown}")
            continue
        probabilities = "  ".join(f"{label}={p:.3f}" for label, p in r["probabilities"].items())
        answer = r["label"] if "label" in r else ",".join(r["labels"]) or "(none)"
        print(f"{answer:<12} {probabilities}  {shown}")


def _check_answers_out(args: argparse.Namespace, what: str) -> None:
    """--out goes with --input, and names a file the answers can be written as; checked before a model loads."""
    from ..fileio import table_output

    if args.out and not args.input:
        raise UserError(f"--out writes the {what} for --input's texts")
    if args.out:
        table_output(args.out)


def cmd_tag(args: argparse.Namespace) -> None:
    from ..formats.corpus import read_texts
    from ..tasks.tagging import Tagger, write_entities

    _check_answers_out(args, "entities")
    tagger = Tagger(args.model, device=args.device, trust_pickle=args.trust_pickle)
    if args.input:
        texts, _ = read_texts(args.input, args.text_column)
    elif args.text is not None:
        texts = [args.text]
    else:
        raise UserError("give a text, or --input FILE")
    results = [{"text": text, "entities": tagger.tag(text)} for text in texts]
    if args.out:
        write_entities(args.out, results)
        print(f"wrote the entities of {len(results)} texts to {args.out}", file=sys.stderr)
        return
    if args.json:
        print_json(results if args.input else results[0]["entities"])
        return
    for r in results:
        found = (
            "  ".join(f"[{e['word']}]{e['entity_group']} ({e['score']:.2f})" for e in r["entities"]) or "(no entities)"
        )
        print(f"{r['text']!r}: {found}")


def cmd_choose(args: argparse.Namespace) -> None:
    from ..tasks.multiple_choice import Chooser

    result = Chooser(args.model, device=args.device, trust_pickle=args.trust_pickle).choose(args.context, args.choices)
    if args.json:
        print_json(result)
        return
    for i, (choice, p) in enumerate(zip(args.choices, result["probabilities"])):
        print(f"{'*' if i == result['choice'] else ' '} {p:.3f}  {choice!r}")


def cmd_answer(args: argparse.Namespace) -> None:
    from ..formats.corpus import read_document
    from ..tasks.qa import Answerer, read_squad

    if args.input:
        if args.question or args.context or args.context_file:
            raise UserError("give --input FILE, or --question with --context or --context-file, not both")
    elif args.question is None or (args.context is None) == (args.context_file is None):
        raise UserError("give --question and the context once (--context TEXT or --context-file FILE), or --input")
    if args.out and not args.input:
        raise UserError("--out writes the answers to --input's questions")
    questions = read_squad(args.input, training=False) if args.input else None  # bad input stops before the model
    # a long context (a whole report: a document's paragraphs, a line each) is read in overlapping windows
    context = read_document(args.context_file) if args.context_file else args.context
    answerer = Answerer(
        args.model, device=args.device, trust_pickle=args.trust_pickle, seq_len=args.seq_len, stride=args.stride
    )
    if questions is not None:
        _answer_file(answerer, questions, args)
        return
    result = answerer.answer(args.question, context, args.max_answer_length)
    if args.json:
        print_json(result)
        return
    if not result["answer"]:
        print(f"(no answer: the context does not say; score {result['score']:.3f})")
        return
    print(f"{result['answer']!r}  (score {result['score']:.3f}, characters {result['start']}-{result['end']})")


def _answer_file(answerer, questions: list, args: argparse.Namespace) -> None:
    """Every question of a SQuAD file or table; with --out, the official predictions file ({id: answer}); where
    the file has answers, SQuAD's scores of them."""
    from ..fileio import write_json
    from ..tasks.qa import squad_scores

    answers = answerer.answer_all([(q.question, q.context) for q in questions], args.max_answer_length)
    results = [{"id": q.id, "question": q.question, **a} for q, a in zip(questions, answers)]
    if args.out:
        write_json(args.out, {r["id"]: r["answer"] for r in results})
    scores = None  # a file of bare questions has nothing to score against
    if any(q.answers for q in questions):
        scores = squad_scores([a["answer"] for a in answers], [q.answers for q in questions])
    if args.json:
        print_json({"answers": results, "scores": scores})
        return
    for r in results:
        print(f"{r['id']}: {r['answer']!r}" if r["answer"] else f"{r['id']}: (no answer)")
    if scores is not None:
        print(", ".join(f"{name} {value:.2f}" for name, value in scores.items()) + f" over {len(results)} questions")


def _add_finetune(verbs) -> None:
    p = add_verb(
        verbs,
        "finetune",
        cmd_finetune,
        "fine-tune for classification (one label or several), regression, tagging (NER), question answering, "
        "multiple choice, or sentence similarity (sentence vectors for search)",
    )
    p.add_argument("model", help="run directory or model directory (pre-trained)")
    p.add_argument(
        "--task",
        choices=list(TASKS),
        default=CLASSIFICATION.name,
        help="what to learn; the files' formats follow from it. "
        + "; ".join(f"{record.name}: {record.summary}" for record in TASKS.records()),
    )
    p.add_argument(
        "--train",
        required=True,
        help="classification, multi-label, regression: TSV, CSV, JSONL or a spreadsheet (.xlsx or .ods; "
        "book.xlsx#sheet for another sheet than the first) with the columns named below; without "
        "them, a directory with a file (an example per line) or a folder (an example per file) per class, or a text "
        "file of LABEL TEXT lines (fastText's __label__ prefix dropped; several for multi-label); Parquet and "
        "Arrow too. Tagging: CoNLL, or JSONL, Parquet or Arrow with a sentence per row (its words and tags as "
        "lists). Question answering: SQuAD v1.1 or v2.0 JSON, or a table with a question per row (datasets' "
        "question, context, answers). Multiple choice: TSV, CSV or JSONL with --text-column, --choice-columns and "
        "--label-column. Sentence similarity: TSV, CSV or JSONL of pairs, --text-column and --pair-column (and "
        "--label-column for a score of how alike they are)",
    )
    p.add_argument(
        "--dev",
        help="the same format as --train; classification, multi-label, regression and sentence similarity "
        "without it hold out --dev-fraction of --train",
    )
    p.add_argument(
        "--text-column",
        help="classification, multi-label, regression: the text's column (a name, or an index); multiple choice: "
        "the context's; tagging from a table: the column of words (default tokens)",
    )
    p.add_argument(
        "--pair-column",
        help="classification, multi-label, regression: the second text of a pair; multiple choice: a text put "
        "before every choice (SWAG's sent2); sentence similarity: the pair's second text",
    )
    p.add_argument(
        "--label-column",
        help="classification, regression: the label's (or the number's) column; multi-label: the column holding "
        "a text's labels (split at --label-separator; a JSONL list as it is); multiple choice: the right "
        "choice's index (0, 1, ...) or letter (A, B, ...); tagging from a table: the column of tags (default "
        "ner_tags); sentence similarity: how alike the pair is (a score, 0-5 or 0/1; without it every pair "
        "matches)",
    )
    p.add_argument(
        "--label-names",
        metavar="NAME,NAME,...",
        help="classification, multi-label, tagging: what labels stored as numbers stand for, in order (0 first): "
        "negative,positive or O,B-person,I-person. Not needed for Parquet or Arrow files from `datasets`, which "
        "name them in their metadata",
    )
    p.add_argument(
        "--label-separator",
        default=",",
        metavar="SEP",
        help="multi-label: what separates the labels in --label-column's cells ('joy,love')",
    )
    p.add_argument(
        "--label-columns",
        metavar="COL,COL,...",
        help="multi-label, instead of --label-column: a 0/1 column per label, the label named after its column "
        "(Jigsaw's toxic,obscene,insult)",
    )
    p.add_argument(
        "--choice-columns",
        metavar="COL,COL,...",
        help="multiple choice: a column per choice, or one column holding the list of choices (JSONL)",
    )
    p.add_argument(
        "--label-until",
        metavar="SEP",
        help="classification: keep each label up to SEP, e.g. ':' for TREC's coarse classes (NUM:dist -> NUM)",
    )
    p.add_argument(
        "--out", required=True, help="output directory (model/, metrics.jsonl, summary.json; checkpoints/ until done)"
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="continue the unfinished fine-tuning in --out from its latest checkpoint, exactly as if never stopped "
        "(give the same command); a finished one is left as it is",
    )
    p.add_argument(
        "--overwrite", action="store_true", help="start over in an --out that holds a fine-tuning, finished or not"
    )
    add_config_flags(p, FinetuneConfig, keep_defaults=True)
    p.add_argument("--max-seq-len", dest="seq_len", type=int, default=HIDDEN, help=HIDDEN)  # older: --seq-len
    output_flags(p)


def _add_classify(verbs) -> None:
    p = add_verb(verbs, "classify", cmd_classify, "label texts with a fine-tuned model")
    model_flags(p)
    p.add_argument("texts", nargs="*", metavar="TEXT", help="texts to label (or --input)")
    pair_flags(p, positional=False)
    p.add_argument(
        "--input",
        help="file with one text per line (TEXT<TAB>PAIR with --pair-column 1), a table, or a document (.pdf, "
        ".docx, .epub, ...: a text per paragraph) or a directory of files",
    )
    p.add_argument(
        "--out",
        help="with --input: write the predictions to this .csv, .tsv (a row per text: the label and each label's "
        "probability as p_LABEL) or .jsonl file",
    )
    p.add_argument(
        "--per-file",
        action="store_true",
        help="with --input: a text per file, not per line or paragraph: the file (a directory: every file below it) "
        "read whole, a document's paragraphs joined, as a folder of classes trains; each answer names its file "
        "(`source`); a file longer than the model's position table is read whole, as --whole reads a text",
    )
    p.add_argument(
        "--whole",
        action="store_true",
        help="read a text longer than the model's position table whole, in windows of that length overlapping by "
        "a quarter, and give the mean of their probabilities (without it, such a text is cut at that length)",
    )
    column_flags(p)
    p.add_argument("--pairs", action="store_true", help=HIDDEN)  # older spelling of --pair-column 1
    p.add_argument(
        "--threshold",
        type=fraction,
        help="multi-label: a label is given at this probability or above, for every label (default: each label's "
        "own, from finetune --tune-thresholds, else 0.5; higher: fewer, surer labels)",
    )
    output_flags(p, quiet=False)


def _add_score(verbs) -> None:
    p = add_verb(
        verbs, "score", cmd_score, "downstream evaluation: fine-tune on tasks over seeds, against from-scratch weights"
    )
    p.add_argument("model", help="run directory or model directory (pre-trained)")
    p.add_argument(
        "--tasks",
        nargs="+",
        required=True,
        metavar="NAME=PATH",
        help="sst2=DIR, mrpc=DIR, rte=DIR, cola=DIR, stsb=DIR (GLUE task directories), ner=DIR (CoNLL, or `datasets` "
        "tables), squad=DIR (SQuAD v1.1 or v2.0 JSON, or `datasets` tables), swag=DIR (train.csv, val.csv), mr=DIR, "
        "subj=DIR, trec=DIR (dev held out of train), or NAME=TRAIN[,DEV][:task=KIND,text=COL,label=COL,pair=COL,label"
        "_until=SEP,choices=COL+COL,labels=COL+COL,separator=SEP,names=NAME+NAME,tune=yes] (without DEV, dev is held "
        "out of TRAIN; without text and label, TRAIN is a directory of classes or label-first lines; a multi-label "
        "task's labels=COL+COL names its 0/1 columns; names are what labels stored as numbers stand for; tune=yes, "
        "also squad=DIR:tune=yes for SQuAD v2.0, fits thresholds on dev as finetune --tune-thresholds does and scores "
        "by the tuned metric)",
    )
    p.add_argument("--out", required=True, help="score directory: every run, and results.md/.csv/.json/.png")
    p.add_argument("--seeds", type=POSITIVE, default=3, help="fine-tuning seeds per task and arm")
    p.add_argument("--lrs", help="learning rates to choose from on dev with seed 0, e.g. 1e-4,3e-4 (default: --lr)")
    p.add_argument(
        "--from-scratch", action="store_true", help="also the same architecture from random weights: the baseline"
    )
    add_config_flags(p, FinetuneConfig, skip=("seed", "from_scratch", "tune_thresholds"), keep_defaults=True)
    output_flags(p)


def _add_tag(verbs) -> None:
    p = add_verb(verbs, "tag", cmd_tag, "named entities (tags) in texts, from a token-classification model")
    model_flags(p)
    p.add_argument("text", nargs="?", help="the text")
    p.add_argument(
        "--input",
        help="file with one text per line, a table with --text-column, or a document (.pdf, .docx, .epub, ...: "
        "a text per paragraph) or a directory of files",
    )
    p.add_argument(
        "--out",
        help="with --input: write the entities to this .csv or .tsv (a row per entity: the text's number from 1, "
        "the text, the entity's type, words, start, end and score) or .jsonl file (a line per text)",
    )
    column_flags(p, pair=False)
    output_flags(p, quiet=False)


def _add_choose(verbs) -> None:
    p = add_verb(verbs, "choose", cmd_choose, "pick the continuation that fits a context, with a multiple-choice model")
    model_flags(p)
    p.add_argument("--context", required=True, help="the context (SWAG: the first sentence)")
    p.add_argument("--choices", nargs="+", required=True, help="the candidate continuations, at least two")
    output_flags(p, quiet=False)


def _add_answer(verbs) -> None:
    p = add_verb(verbs, "answer", cmd_answer, "answer a question from a context, with a question-answering model")
    model_flags(p)
    p.add_argument("--question", help="the question")
    p.add_argument("--context", help="the text holding the answer")
    p.add_argument(
        "--context-file", help="read the context from this file: text, or a document (.pdf, .docx, .epub, .html, ...)"
    )
    p.add_argument(
        "--input",
        help="many questions: SQuAD v1.1 or v2.0 JSON, or a table with question and context (and answers) per row; "
        "where the file has answers, SQuAD's exact match and F1 are printed",
    )
    p.add_argument("--out", help="with --input: write SQuAD's predictions file, {id: answer} ('' for no answer)")
    p.add_argument(
        "--max-answer-length", type=POSITIVE, default=15, help="longest answer in tokens (the pipeline's default)"
    )
    p.add_argument("--seq-len", type=at_least(8), default=384, help="tokens per window over a long context")
    p.add_argument("--stride", type=at_least(0), default=128, help="context tokens that consecutive windows share")
    output_flags(p, quiet=False)


def register(verbs) -> None:
    _add_finetune(verbs)
    _add_classify(verbs)
    _add_score(verbs)
    _add_tag(verbs)
    _add_choose(verbs)
    _add_answer(verbs)
