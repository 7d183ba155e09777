"""Verbs that question a pre-trained model: `fill-mask`, `pll`, `nsp`, `embed`, `search`, `neighbours`, `attention`,
`plot-embeddings`, `plot-words`."""

from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path

from ..errors import UserError
from ..fileio import write_bytes
from ..modelfiles.sentence import POOLING_MODES
from ..tasks.registry import REGRESSION, SENTENCE_SIMILARITY
from .flags import (
    POSITIVE,
    add_verb,
    at_least,
    column_flags,
    image_flags,
    model_flags,
    output_flags,
    pair_flags,
    print_json,
    with_format,
)


def _load(args: argparse.Namespace):
    from ..inference import load

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
        from ..plots import fill_mask_bars, save_figure

        print(f"wrote {save_figure(fill_mask_bars(result, args.answer), args.plot)}", file=sys.stderr)
    if args.json:
        print_json(result)
        return
    for mask in result["masks"]:
        print(f"[MASK] at token {mask['position']}:")
        for p in mask["predictions"]:
            print(f"  {p['score']:6.3f}  {p['token']:<15} {p['sequence']}")


def cmd_pll(args: argparse.Namespace) -> None:
    from ..formats.corpus import read_texts

    if args.input:
        texts, _ = read_texts(args.input, args.text_column)
    elif args.texts:
        texts = args.texts
    else:
        raise UserError("give one or more texts, or --input FILE")
    bert = _load(args)
    results = [bert.pseudo_log_likelihood(text) for text in texts]
    if args.json:
        print_json(results)
        return
    best = max(range(len(results)), key=lambda i: results[i]["pll"])
    for i, r in enumerate(results):
        least = min(r["tokens"], key=lambda t: t["log_prob"])
        mark = "*" if len(results) > 1 and i == best else " "
        print(
            f"{mark} PLL {r['pll']:8.2f}  pseudo-perplexity {r['pseudo_perplexity']:8.2f}  {r['text']!r}  "
            f"(least expected: {least['token']!r}, {least['log_prob']:.2f})"
        )


def cmd_nsp(args: argparse.Namespace) -> None:
    from ..formats.corpus import read_texts

    bert = _load(args)
    if args.input:
        texts, pairs = read_texts(args.input, args.text_column, args.pair_column or "1")
    elif args.sentence_a is not None and _second_text(args) is not None:
        texts, pairs = [args.sentence_a], [_second_text(args)]
    else:
        raise UserError("give two sentences (A --pair B), or --input FILE with A<TAB>B per line")
    results = [bert.nsp(a, b) for a, b in zip(texts, pairs)]
    if args.plot:
        from ..plots import nsp_bars, save_figure

        print(f"wrote {save_figure(nsp_bars(results), args.plot)}", file=sys.stderr)
    if args.json:
        print_json(results if args.input else results[0])
        return
    key = next(k for k in results[0] if k.endswith("_prob"))
    for r in results:
        print(f"{key}={r[key]:.3f}  {r['label']:<8} A: {r['a']!r}  B: {r['b']!r}")


def cmd_plot_embeddings(args: argparse.Namespace) -> None:
    from ..plots import embedding_heatmaps, save_figure

    figure = embedding_heatmaps(_load(args), args.sentence_a, _second_text(args))
    print(save_figure(figure, with_format(args.out, args.format)))


def cmd_attention(args: argparse.Namespace) -> None:
    from ..plots import attention_maps, save_figure, shorten

    tokens, attention = _load(args).attention(args.text, args.pair)
    title = "Self-attention: " + args.text + (f"  /  {args.pair}" if args.pair else "")
    figure = attention_maps(tokens, attention, args.layer, args.head, shorten(title, 110))
    print(save_figure(figure, with_format(args.out, args.format)))


def cmd_neighbours(args: argparse.Namespace) -> None:
    results = _load(args).neighbours(args.words, args.top_k)
    if args.json:
        print_json(results)
        return
    for r in results:
        print(f"{r['word']}: " + ", ".join(f"{n['token']} {n['score']:.2f}" for n in r["neighbours"]))


def cmd_plot_words(args: argparse.Namespace) -> None:
    from ..plots import save_figure, word_map

    groups = [[word.strip() for word in group.split(",") if word.strip()] for group in args.groups]
    figure = word_map(_load(args), [group for group in groups if group])
    print(save_figure(figure, with_format(args.out, args.format)))


def cmd_embed(args: argparse.Namespace) -> None:
    import numpy as np

    from ..fileio import check_writable
    from ..formats.corpus import read_texts

    out = Path(args.out if args.out.endswith(".npy") else args.out + ".npy")  # as numpy.save names it
    out.parent.mkdir(parents=True, exist_ok=True)  # before the work: a folder that cannot be made is said at once
    check_writable(out.parent)
    texts, _ = read_texts(args.input, args.text_column)
    vectors = _load(args).embed(
        texts, args.pooling, args.layer, args.batch_size, args.whole, args.normalize, args.prompt, args.dimensions
    )
    array = io.BytesIO()
    np.save(array, vectors)
    write_bytes(out, array.getvalue())  # whole or not at all
    if args.json:
        print_json({"texts": vectors.shape[0], "dimensions": vectors.shape[1], "out": str(out)})
    else:
        print(f"wrote {vectors.shape[0]} x {vectors.shape[1]} embeddings to {out}", file=sys.stderr)


def cmd_search(args: argparse.Namespace) -> None:
    import numpy as np

    from ..formats.corpus import read_lines, read_passages
    from ..tasks.classification import Classifier

    if (args.query is None) == (args.queries is None):
        raise UserError("give a query, or --queries FILE with one per line (not both)")
    if args.top_k < 1:
        raise UserError(f"--top-k must be at least 1, not {args.top_k}")
    queries = [args.query] if args.query is not None else read_lines(args.queries)
    corpus, sources = read_passages(args.corpus, args.text_column)
    vectors = None
    if args.vectors:
        try:
            vectors = np.load(args.vectors)
        except (OSError, ValueError) as e:
            raise UserError(f"{args.vectors}: not a .npy file of vectors from `bertforge embed` ({e})") from None
    reranker = Classifier(args.rerank, device=args.device, trust_pickle=args.trust_pickle) if args.rerank else None
    results = _load(args).search(
        queries, corpus, args.top_k, vectors, args.whole, reranker, args.candidates, args.relevant_label, args.prompt
    )
    if sources:  # a directory: which file each text is in
        results = [[{**hit, "source": sources[hit["index"]]} for hit in found] for found in results]
    if args.json:
        print_json([{"query": query, "results": found} for query, found in zip(queries, results)])
        return
    for query, found in zip(queries, results):
        print(query)
        for hit in found:
            source = f"{hit['source']}: " if sources else ""
            cosine = f"  (cosine {hit['cosine']:.3f})" if "cosine" in hit else ""
            print(f"  {hit['score']:.3f}  {source}{hit['text']}{cosine}")


def prompt_flag(p: argparse.ArgumentParser, where: str) -> None:
    p.add_argument(
        "--prompt",
        metavar="NAME",
        help=f"the model's prompt of that name (config_sentence_transformers.json's prompts), put {where} (default: "
        "the model's default prompt, or its query prompt for a search's queries, as sentence-transformers does)",
    )


def whole_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--whole",
        action="store_true",
        help="read a text longer than the model's position table whole, in windows of that length overlapping by "
        "a quarter, its vector the mean of theirs (default: cut at the table's length)",
    )


def precision_flag(p: argparse.ArgumentParser, default: str = "fp32") -> None:
    """bf16 pays for batches (embed: 1.6x on an AMX CPU), not for one sentence (fill-mask: slower), as measured."""
    p.add_argument(
        "--precision",
        choices=["auto", "fp32", "bf16"],
        default=default,
        help="bf16 agrees with fp32 to about 1e-2 in probabilities; auto picks it on machines measured fast at it",
    )


def _add_fill_mask(verbs) -> None:
    p = add_verb(verbs, "fill-mask", cmd_fill_mask, "predict the tokens behind each [MASK]")
    model_flags(p)
    p.add_argument("text", help='text with one or more [MASK], e.g. "the cat sat on the [MASK]."')
    p.add_argument("--top-k", type=at_least(1, most=1000), default=5, help="predictions per [MASK] (at most 1000)")
    p.add_argument("--targets", help="comma-separated words to score instead of the whole vocabulary")
    p.add_argument("--plot", help="also draw the top-k as a bar chart into this file (.png or .svg)")
    p.add_argument("--answer", help="with --plot: highlight this word")
    precision_flag(p)
    output_flags(p, quiet=False)


def _add_pll(verbs) -> None:
    p = add_verb(
        verbs,
        "pll",
        cmd_pll,
        "how natural the model finds each text: its pseudo-log-likelihood, each token masked in turn (higher: more)",
    )
    model_flags(p)
    p.add_argument("texts", nargs="*", help='texts to compare, e.g. "the keys are here." "the keys is here."')
    p.add_argument(
        "--input", help="a file of texts: a line, a table row (--text-column) or a document's paragraph each"
    )
    column_flags(p, pair=False)
    precision_flag(p)
    output_flags(p, quiet=False)


def _add_nsp(verbs) -> None:
    p = add_verb(
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
    precision_flag(p)
    output_flags(p, quiet=False)


def _add_plot_embeddings(verbs) -> None:
    p = add_verb(
        verbs,
        "plot-embeddings",
        cmd_plot_embeddings,
        "heatmaps of the token, segment and position embeddings and their sum",
    )
    model_flags(p)
    p.add_argument("sentence_a", help="sentence A")
    pair_flags(p, positional=True)
    image_flags(p)


def _add_neighbours(verbs) -> None:
    p = add_verb(
        verbs, "neighbours", cmd_neighbours, "the words nearest to each word in the model's token embedding table"
    )
    model_flags(p)
    p.add_argument("words", nargs="+", help="words (one split by WordPiece is the mean of its pieces)")
    p.add_argument("--top-k", type=POSITIVE, default=10, help="neighbours per word")
    output_flags(p, quiet=False)


def _add_plot_words(verbs) -> None:
    p = add_verb(
        verbs,
        "plot-words",
        cmd_plot_words,
        "a map of words where the token embedding table puts them (its two principal components), a colour per group",
    )
    model_flags(p)
    p.add_argument(
        "groups", nargs="+", help="comma-separated words, a group (and a colour) each: monday,friday red,green,blue"
    )
    image_flags(p)


def _add_attention(verbs) -> None:
    p = add_verb(verbs, "attention", cmd_attention, "attention heatmap of one head, or a grid of all heads of a layer")
    model_flags(p)
    p.add_argument("text", help="sentence A")
    pair_flags(p, positional=False)
    p.add_argument("--layer", type=int, default=-1, help="layer index (negative counts from the top)")
    p.add_argument("--head", type=at_least(0), help="one head; all heads of the layer when omitted")
    image_flags(p)


def _add_embed(verbs) -> None:
    p = add_verb(verbs, "embed", cmd_embed, "sentence embeddings for each line (or row) of a file")
    model_flags(p)
    p.add_argument(
        "--input",
        required=True,
        help="text file, one sentence per line; a table with --text-column; or a document (.pdf, .docx, .epub, ...: "
        "a sentence vector per paragraph) or a directory of files",
    )
    column_flags(p, pair=False)
    p.add_argument("--out", required=True, help="output .npy file")
    p.add_argument(
        "--pooling",
        choices=POOLING_MODES,
        help="how the token vectors become one: the [CLS] vector, their mean, ... (default: a sentence-embedding "
        "model's own, from its sentence-transformers modules, as a model fine-tuned with --task "
        f"{SENTENCE_SIMILARITY.name} has; else cls)",
    )
    p.add_argument(
        "--normalize",
        action=argparse.BooleanOptionalAction,
        help="make every vector unit length (default: as the model's modules say: a Normalize module does)",
    )
    p.add_argument("--layer", type=int, default=-1, help="hidden layer to read (-1 = last, 0 = embeddings)")
    p.add_argument("--batch-size", type=POSITIVE, default=64, help="texts per batch")
    prompt_flag(p, "before each text")
    p.add_argument(
        "--dimensions",
        type=POSITIVE,
        help="keep each vector's first D dimensions (a Matryoshka-trained model's: nomic-embed-text's 512, 256, ...), "
        "unit length again where the model's vectors are",
    )
    whole_flag(p)
    precision_flag(p, default="auto")
    output_flags(p, quiet=False)


def _add_search(verbs) -> None:
    p = add_verb(
        verbs,
        "search",
        cmd_search,
        "the texts of a corpus nearest in meaning to a query, by the cosine of their vectors (a model fine-tuned "
        f"with --task {SENTENCE_SIMILARITY.name})",
    )
    model_flags(p)
    p.add_argument("query", nargs="?", help="the text to search for")
    p.add_argument("--queries", help="instead of a query: a file of them, one per line")
    p.add_argument(
        "--corpus",
        required=True,
        help="the texts to search: a text per line, a table with --text-column, a document (.pdf, .docx, .epub, "
        "...: a text per paragraph), or a directory of them (each hit names its file)",
    )
    column_flags(p, pair=False, file_flag="--corpus")
    p.add_argument(
        "--vectors",
        help="the corpus's vectors, from `bertforge embed` with the same model and file (.npy): a large corpus "
        "is encoded once, not at every search",
    )
    p.add_argument("--top-k", type=POSITIVE, default=5, help="texts to show per query")
    p.add_argument(
        "--rerank",
        metavar="CLASSIFIER",
        help="re-rank the --candidates hits with a cross-encoder: a classifier fine-tuned on (query, text) pairs "
        f"labelled 1 for a match and 0 for not (or scored, --task {REGRESSION.name}), which reads each query with "
        "each hit",
    )
    p.add_argument(
        "--candidates", type=POSITIVE, default=50, help="with --rerank: hits found by the vectors, to re-rank"
    )
    p.add_argument(
        "--relevant-label",
        help="with --rerank: the classifier's label whose probability is the score (default: 1)",
    )
    prompt_flag(p, "before each query (the corpus gets the model's document prompt)")
    whole_flag(p)
    precision_flag(p, default="auto")
    output_flags(p, quiet=False)


def register(verbs) -> None:
    _add_fill_mask(verbs)
    _add_pll(verbs)
    _add_nsp(verbs)
    _add_plot_embeddings(verbs)
    _add_neighbours(verbs)
    _add_plot_words(verbs)
    _add_attention(verbs)
    _add_embed(verbs)
    _add_search(verbs)
