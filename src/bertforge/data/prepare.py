"""prepare: a corpus becomes a data directory (see `directory.py` for the format).

Everything streams: memory stays flat however large the corpus. Paragraphs are
tokenised in chunks by a pool of worker processes, results come back in order,
and the output is byte-identical for any number of workers. This module does not
import torch, so `bertforge prepare` starts fast and its workers fork light.

Prepared data can take hours to make, so it is never lost: the inputs are checked before anything is written,
the directory is built under a temporary name and renamed into place only when whole, an existing one is
replaced only with `overwrite` and only once the new one is complete, and never while a run reads it.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import warnings
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np
from tokenizers import Tokenizer

from ..errors import UserError
from ..fileio import atomic_directory, check_not_inputs, check_output_dir, directory_lock
from ..formats.corpus import Paragraph, read_paragraphs, readable_files
from ..formats.filters import compression_verdict
from ..formats.options import CorpusOptions
from ..formats.spreadsheets import split_sheet
from ..formats.text import split_sentences
from ..formats.textfiles import ReadStats
from ..progress import Progress
from ..tokenizer import load_tokenizer, special_ids, special_tokens
from .directory import SPLITS, SplitWriter, is_data_dir, token_dtype, write_meta

CHUNK_CHARS = 1 << 19  # paragraphs are tokenised in chunks of about 512k characters: bounded transient memory
UNK_WARNING = 0.01  # more [UNK] than this share of the tokens: the tokenizer does not fit the text


_worker_tokenizer: Tokenizer | None = None


def _init_worker(tokenizer_json: str, single_threaded: bool = False) -> None:
    global _worker_tokenizer
    if single_threaded:
        # Ctrl-C reaches the whole process group: the main process alone decides what stops, and cleans up.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        # Parallelism comes from the worker processes; threads inside each would only contend for the cores.
        os.environ["TOKENIZERS_PARALLELISM"] = "false"
    _worker_tokenizer = Tokenizer.from_str(tokenizer_json)


@dataclass(frozen=True)
class Job:
    """A chunk of paragraphs for a worker, where documents start, and how to cut and filter them."""

    paragraphs: list[str]
    new_document: list[bool]
    split: bool
    min_chars_per_token: float
    max_chars_per_token: float


def _tokenize_chunk(job: Job) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[int, str]]:
    """Paragraphs -> (all token ids, tokens per sentence, sentences per paragraph, {dropped paragraph: filter}).

    Whole paragraphs are encoded (one call per paragraph is much cheaper than one
    per sentence), then each token is assigned to its sentence by the offset of
    its last character: a byte-level or SentencePiece token carries the space
    before its word ("ĠThe", "▁The"), which lies in the sentence before. Sentence
    boundaries fall on whitespace, where the pre-tokeniser splits anyway, so the
    tokens are those of encoding each sentence (with the space a word in running
    text has before it).
    A paragraph that breaks a characters-per-token bound contributes nothing.
    """
    encodings = _worker_tokenizer.encode_batch(job.paragraphs, add_special_tokens=False)
    dropped: dict[int, str] = {}
    kept_ids: list[list[int]] = []
    lengths: list[np.ndarray] = []
    counts = np.zeros(len(job.paragraphs), dtype=np.int64)
    bounds = job.min_chars_per_token, job.max_chars_per_token
    for p, (paragraph, encoding) in enumerate(zip(job.paragraphs, encodings)):
        verdict = compression_verdict(len(paragraph), len(encoding.ids), *bounds)
        if verdict:
            dropped[p] = verdict
            continue
        kept_ids.append(encoding.ids)
        starts = _sentence_starts(paragraph) if job.split else [0]
        last_chars = np.fromiter(
            (max(start, end - 1) for start, end in encoding.offsets), dtype=np.int64, count=len(encoding.ids)
        )
        sentence_of_token = np.searchsorted(starts, last_chars, side="right") - 1  # (tokens,)
        per_sentence = np.bincount(sentence_of_token, minlength=len(starts))
        lengths.append(per_sentence)
        counts[p] = len(starts)
    ids = np.fromiter(chain.from_iterable(kept_ids), dtype=np.uint32)
    return ids, np.concatenate(lengths) if lengths else np.zeros(0, np.int64), counts, dropped


def _sentence_starts(paragraph: str) -> np.ndarray:
    """Character offset where each sentence of the paragraph begins."""
    starts, position = [], 0
    for sentence in split_sentences(paragraph):
        position = paragraph.find(sentence, position)
        starts.append(position)
        position += len(sentence)
    return np.array(starts or [0], dtype=np.int64)


def _tokenized(jobs: Iterable[Job], pool, window: int):
    """(job, result) in input order, with at most `window` chunks in flight (Pool.imap would read ahead without
    bound)."""
    if pool is None:
        for job in jobs:
            yield job, _tokenize_chunk(job)
        return
    pending: deque = deque()
    for job in jobs:
        pending.append((job, pool.apply_async(_tokenize_chunk, (job,))))
        if len(pending) >= window:
            done, result = pending.popleft()
            yield done, result.get()
    while pending:
        done, result = pending.popleft()
        yield done, result.get()


def _chunks(paragraphs: Iterable[Paragraph], **settings) -> Iterator[Job]:
    """Group paragraphs into jobs of ~CHUNK_CHARS, keeping each paragraph's new-document flag."""
    texts: list[str] = []
    flags: list[bool] = []
    size = 0
    for paragraph in paragraphs:
        texts.append(paragraph.text)
        flags.append(paragraph.new_document)
        size += len(paragraph.text)
        if size >= CHUNK_CHARS:
            yield Job(texts, flags, **settings)
            texts, flags, size = [], [], 0
    if texts:
        yield Job(texts, flags, **settings)


def prepare(
    corpus: Sequence[str | Path],
    tokenizer_dir: str | Path,
    out: str | Path,
    valid_fraction: float = 0.01,
    valid_files: Sequence[str | Path] | None = None,
    options: CorpusOptions | None = None,
    workers: int = 1,
    progress: bool = True,
    filter_report: str | Path | None = None,
    overwrite: bool = False,
) -> dict:
    """Tokenise a corpus into DATA_DIR; returns its meta.json. The held-out split is whole documents.

    With `valid_files`, those files are the held-out split. Otherwise each finished
    document moves to the held-out split when that keeps it within `valid_fraction`
    of the tokens so far: deterministic, streaming, never over the fraction (except
    that a corpus of two or more documents always holds one out).
    With `options.pair_column`, each row is an explicit pair: a document of two segments.
    The filters of `options` drop paragraphs; what they dropped goes to meta.json["filters"],
    and with `filter_report` also examples, to that JSON file.
    An existing DATA_DIR is replaced only with `overwrite`, and only once the new one is complete.
    """
    options = options or CorpusOptions()
    pairs = options.pair_column is not None
    if pairs and (options.min_chars_per_token or options.max_chars_per_token):
        raise UserError("the characters-per-token filters judge single paragraphs; they do not apply to --pair-column")
    tokenizer = load_tokenizer(tokenizer_dir)
    sources = [("train", corpus)] + ([("valid", valid_files)] if valid_files else [])
    files = [file for _, paths in sources for file in readable_files(paths)]  # before anything is written
    out = Path(out)
    check_not_inputs({"--out": out}, {"CORPUS": [split_sheet(f)[0] for f in files], "--tokenizer": tokenizer_dir})
    check_output_dir(out, overwrite, "prepared data", out.is_dir() and is_data_dir(out))
    with directory_lock(out) if out.exists() else contextlib.nullcontext(), atomic_directory(out) as tmp:
        meta = _write_data(tmp, tokenizer, sources, files, valid_fraction, options, workers, progress, filter_report)
    unk_share = meta["unk_tokens"] / max(meta["splits"]["train"]["tokens"] + meta["splits"]["valid"]["tokens"], 1)
    if unk_share > UNK_WARNING:
        warnings.warn(
            f"{unk_share:.1%} of the tokens are {special_tokens(tokenizer)['unk']}: the tokenizer does not know much "
            "of this text (trained on other text, in another script, or cased differently); "
            + _unk_advice(tokenizer_dir),
            stacklevel=2,
        )
    return meta


def _unk_advice(tokenizer_dir: str | Path) -> str:
    """What to do about unknown tokens: a model's tokenizer cannot be replaced without the model's embeddings
    meaning nothing, so a model's is extended; a tokenizer of its own is trained again on the text."""
    tokenizer_dir = Path(tokenizer_dir)
    if (tokenizer_dir / "config.json").is_file() or (tokenizer_dir / "model" / "config.json").is_file():
        return (
            f"a new tokenizer would make the model's embeddings meaningless: add the text's words to this one with "
            f"`bertforge tokenizer extend {tokenizer_dir} CORPUS --add N --out EXTENDED` and prepare with EXTENDED"
        )
    return "train one on this corpus with `bertforge tokenizer train` and prepare again"


def _write_data(
    out: Path,
    tokenizer: Tokenizer,
    sources: list[tuple[str, Sequence[str | Path]]],
    files: list[Path],
    valid_fraction: float,
    options: CorpusOptions,
    workers: int,
    progress: bool,
    filter_report: str | Path | None,
) -> dict:
    """The data directory's contents, written into `out` (a temporary directory that becomes DATA_DIR)."""
    pairs = options.pair_column is not None
    split = options.split_sentences and not pairs
    writers = {name: SplitWriter(out / name, token_dtype(tokenizer)) for name in SPLITS}
    held_out = HeldOutSplit(writers["train"], writers["valid"], 0.0 if len(sources) > 1 else valid_fraction)
    stats = ReadStats()
    paragraph_filter = options.paragraph_filter()  # one for all files: dedupe across them
    report = paragraph_filter.report
    settings = {
        "split": split,
        "min_chars_per_token": options.min_chars_per_token,
        "max_chars_per_token": options.max_chars_per_token,
    }
    total_bytes = sum(split_sheet(p)[0].stat().st_size for p in files)
    unk_id, unk_tokens = special_ids(tokenizer).unk, 0
    bar = Progress(total_bytes, "prepare", unit="B", enabled=progress, unit_scale=True)
    try:
        with _tokenizing_workers(tokenizer, workers) as pool:
            for name, paths in sources:
                writer = writers[name]
                jobs = _chunks(read_paragraphs(paths, options, stats, paragraph_filter), **settings)
                for job, tokenized in _tokenized(jobs, pool, window=2 * workers):
                    unk_tokens += _write_paragraphs(job, tokenized, writer, held_out, report, unk_id)
                    bar.update(max(0, min(stats.bytes_read, total_bytes) - bar.n))
                held_out.end_document(writer)
            held_out.finish()
    except BaseException:  # interrupted or failed: nothing half-written stays
        for writer in writers.values():
            writer.abandon()
        raise
    finally:
        bar.close()
    counts = {name: writer.close() for name, writer in writers.items()}
    if filter_report:
        report.write(filter_report)
    if counts["train"]["tokens"] == 0:
        filtered = f" ({report})" if report.dropped else ""
        raise UserError(f"no tokens produced from {', '.join(str(p) for _, paths in sources for p in paths)}{filtered}")
    if counts["valid"]["documents"] == 0:
        warnings.warn(
            "no held-out documents (the corpus has a single document): evaluation will be skipped", stacklevel=3
        )
    return write_meta(
        out,
        tokenizer,
        counts,
        sources=stats.files,
        invalid_utf8_replaced=stats.invalid_utf8,
        skipped_lines=stats.skipped_lines,
        split_sentences=split,
        pairs=pairs,
        filters=report.summary(),
        unk_tokens=unk_tokens,
    )


@contextlib.contextmanager
def _tokenizing_workers(tokenizer: Tokenizer, workers: int) -> Iterator[Any]:
    """A pool of `workers` tokenizing processes (None for one: this process tokenizes), closed when the block
    ends and terminated when it fails, its chunks no longer wanted."""
    # fork where the platform has it: spawned workers would re-import the package, seconds each.
    context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
    pool = context.Pool(workers, _init_worker, (tokenizer.to_str(), True)) if workers > 1 else None
    if pool is None:
        _init_worker(tokenizer.to_str())
        yield None
        return
    try:
        yield pool
    except BaseException:
        pool.terminate()
        raise
    else:
        pool.close()
    finally:
        pool.join()


def _write_paragraphs(job, tokenized, writer: SplitWriter, held_out: HeldOutSplit, report, unk_id: int) -> int:
    """One tokenized chunk's paragraphs into `writer`, documents ending where the job says; what the filters
    dropped into the report. Returns the chunk's [UNK] count."""
    ids, lengths, counts, dropped = tokenized
    for p, verdict in dropped.items():
        report.drop(verdict, job.paragraphs[p])
    token_ends = np.cumsum(lengths)
    sentence_ends = np.cumsum(counts)
    for p, new_document in enumerate(job.new_document):
        if new_document:
            held_out.end_document(writer)
        first = sentence_ends[p] - counts[p]
        if counts[p]:
            start = token_ends[first] - lengths[first]
            paragraph_lengths = lengths[first : sentence_ends[p]]
            nonempty = paragraph_lengths[paragraph_lengths > 0]
            if len(nonempty):
                writer.add_sentences(ids[start : token_ends[sentence_ends[p] - 1]], nonempty)
    return int(np.count_nonzero(ids == unk_id))


class HeldOutSplit:
    """Decides, as each document ends, whether it stays in train or moves to the held-out split."""

    def __init__(self, train: SplitWriter, valid: SplitWriter, fraction: float):
        self.train, self.valid, self.fraction = train, valid, fraction

    def end_document(self, writer: SplitWriter) -> None:
        tokens = writer.end_document()
        seen = self.train.num_tokens + self.valid.num_tokens
        if writer is self.train and tokens and self.valid.num_tokens + tokens <= self.fraction * seen:
            self.train.move_last_document(self.valid)

    def finish(self) -> None:
        """A corpus of several documents always holds one out, even when every document is over the share."""
        if self.fraction > 0 and self.valid.num_documents == 0 and self.train.num_documents >= 2:
            self.train.move_last_document(self.valid)
            share = self.valid.num_tokens / (self.train.num_tokens + self.valid.num_tokens)
            warnings.warn(
                f"every document is larger than --valid-fraction {self.fraction} of the corpus; "
                f"held out the last one ({share:.1%} of the tokens)",
                stacklevel=3,
            )
