"""prepare: a corpus becomes a data directory of token ids with sentence and document offsets.

    DATA_DIR/meta.json            tokenizer fingerprint, counts, sources
    DATA_DIR/tokenizer.json       the tokenizer the ids come from
    DATA_DIR/{train,valid}/
        tokens.bin                token ids, uint16 when the vocabulary fits, else uint32
        sentence_offsets.bin      int64, S + 1 values: sentence i is tokens[off[i]:off[i+1]]
        document_offsets.bin      int64, D + 1 values: document j is sentences [off[j], off[j+1])

Everything streams: memory stays flat however large the corpus. This module
does not import torch, so `bertforge prepare` starts fast and its workers fork light.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import warnings
from collections import deque
from itertools import chain
from pathlib import Path
from typing import Iterable, Iterator, Sequence

import numpy as np
from tokenizers import Tokenizer
from tqdm import tqdm

from .corpus import CorpusOptions, Paragraph, ReadStats, column_index, find_files, read_paragraphs, split_sentences
from .errors import UserError
from .fileio import write_json
from .tokenizer import fingerprint, load_tokenizer, special_ids

SPLITS = ("train", "valid")
TOKENS, SENTENCES, DOCUMENTS = "tokens.bin", "sentence_offsets.bin", "document_offsets.bin"
CHUNK_CHARS = 1 << 19  # paragraphs are tokenised in chunks of about 512k characters: bounded transient memory


class _SplitWriter:
    """Appends token ids and offsets of one split to flat binary files: memory stays constant."""

    def __init__(self, directory: Path, dtype: np.dtype):
        directory.mkdir(parents=True, exist_ok=True)
        self.dtype = dtype
        self.tokens = open(directory / TOKENS, "wb")
        self.sentences = open(directory / SENTENCES, "wb")
        self.documents = open(directory / DOCUMENTS, "wb")
        self.num_tokens = self.num_sentences = self.num_documents = 0
        self.sentences.write(np.int64(0).tobytes())
        self.documents.write(np.int64(0).tobytes())
        self.open_document = False

    def add_sentences(self, ids: np.ndarray, lengths: np.ndarray) -> None:
        self.tokens.write(ids.astype(self.dtype, copy=False).tobytes())
        self.sentences.write((self.num_tokens + np.cumsum(lengths, dtype=np.int64)).tobytes())
        self.num_tokens += int(lengths.sum())
        self.num_sentences += len(lengths)
        self.open_document = True

    def end_document(self) -> None:
        if self.open_document:
            self.num_documents += 1
            self.documents.write(np.int64(self.num_sentences).tobytes())
            self.open_document = False

    def close(self) -> dict:
        self.end_document()
        for f in (self.tokens, self.sentences, self.documents):
            f.close()
        return {"documents": self.num_documents, "sentences": self.num_sentences, "tokens": self.num_tokens}


_worker_tokenizer: Tokenizer | None = None


def _init_worker(tokenizer_json: str, single_threaded: bool = False) -> None:
    global _worker_tokenizer
    if single_threaded:
        # Parallelism comes from the worker processes; threads inside each would only contend for the cores.
        os.environ["TOKENIZERS_PARALLELISM"] = "false"
    _worker_tokenizer = Tokenizer.from_str(tokenizer_json)


def _tokenize_chunk(job: tuple[list[str], bool]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Paragraphs -> (all token ids, tokens per sentence, sentences per paragraph).

    Whole paragraphs are encoded (one call per paragraph is much cheaper than one
    per sentence), then each token is assigned to its sentence by character
    offset. Sentence boundaries fall on whitespace, where the pre-tokeniser
    splits anyway, so the tokens are exactly those of encoding each sentence.
    """
    paragraphs, split = job
    encodings = _worker_tokenizer.encode_batch(paragraphs, add_special_tokens=False)
    ids = np.fromiter(chain.from_iterable(e.ids for e in encodings), dtype=np.uint32)
    lengths: list[np.ndarray] = []
    counts = np.zeros(len(paragraphs), dtype=np.int64)
    for p, (paragraph, encoding) in enumerate(zip(paragraphs, encodings)):
        starts = _sentence_starts(paragraph) if split else [0]
        token_starts = np.fromiter((start for start, _ in encoding.offsets), dtype=np.int64, count=len(encoding.ids))
        sentence_of_token = np.searchsorted(starts, token_starts, side="right") - 1  # (tokens,)
        per_sentence = np.bincount(sentence_of_token, minlength=len(starts))
        lengths.append(per_sentence)
        counts[p] = len(starts)
    return ids, np.concatenate(lengths) if lengths else np.zeros(0, np.int64), counts


def _sentence_starts(paragraph: str) -> np.ndarray:
    """Character offset where each sentence of the paragraph begins."""
    starts, position = [], 0
    for sentence in split_sentences(paragraph):
        position = paragraph.find(sentence, position)
        starts.append(position)
        position += len(sentence)
    return np.array(starts or [0], dtype=np.int64)


def _tokenized(jobs, pool, window: int):
    """Results in input order, with at most `window` chunks in flight (Pool.imap would read ahead without bound)."""
    if pool is None:
        for job, flags in jobs:
            yield _tokenize_chunk(job), flags
        return
    pending: deque = deque()
    for job, flags in jobs:
        pending.append((pool.apply_async(_tokenize_chunk, (job,)), flags))
        if len(pending) >= window:
            result, flags_out = pending.popleft()
            yield result.get(), flags_out
    while pending:
        result, flags_out = pending.popleft()
        yield result.get(), flags_out


def _chunks(paragraphs: Iterable[Paragraph], split: bool) -> Iterator[tuple[tuple[list[str], bool], list[bool]]]:
    """Group paragraphs into jobs of ~CHUNK_CHARS, keeping each paragraph's new-document flag."""
    texts: list[str] = []
    flags: list[bool] = []
    size = 0
    for paragraph in paragraphs:
        texts.append(paragraph.text)
        flags.append(paragraph.new_document)
        size += len(paragraph.text)
        if size >= CHUNK_CHARS:
            yield (texts, split), flags
            texts, flags, size = [], [], 0
    if texts:
        yield (texts, split), flags


def prepare(
    corpus: Sequence[str | Path],
    tokenizer_dir: str | Path,
    out: str | Path,
    valid_fraction: float = 0.01,
    valid_files: Sequence[str | Path] | None = None,
    options: CorpusOptions | None = None,
    workers: int = 1,
    progress: bool = True,
) -> dict:
    """Tokenise a corpus into DATA_DIR. The held-out split is whole documents.

    With `valid_files`, those files are the held-out split. Otherwise a document
    goes to the held-out split whenever that keeps it at or under `valid_fraction`
    of the tokens seen so far: deterministic, streaming, and always at least one
    document once there are two.
    """
    options = options or CorpusOptions()
    tokenizer = load_tokenizer(tokenizer_dir)
    dtype = _token_dtype(tokenizer)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    writers = {name: _SplitWriter(out / name, dtype) for name in SPLITS}
    stats = ReadStats()
    sources = [("train", corpus)] + ([("valid", valid_files)] if valid_files else [])
    total_bytes = sum(p.stat().st_size for _, paths in sources for p in find_files(paths))
    # delay: nothing is drawn for a run that fails (or finishes) within a second, so an error stays one line
    bar = tqdm(total=total_bytes, unit="B", unit_scale=True, desc="prepare", disable=not progress, mininterval=0.5, delay=1.0)
    # fork where the platform has it: spawned workers would re-import torch, seconds each.
    context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
    pool = context.Pool(workers, _init_worker, (tokenizer.to_str(), True)) if workers > 1 else None
    if pool is None:
        _init_worker(tokenizer.to_str())
    try:
        for fixed_split, paths in sources:
            writer = writers[fixed_split]
            jobs = _chunks(read_paragraphs(paths, options, stats), options.split_sentences)
            for (ids, lengths, counts), flags in _tokenized(jobs, pool, window=2 * workers):
                token_ends = np.cumsum(lengths)
                sentence_ends = np.cumsum(counts)
                for p, new_document in enumerate(flags):
                    if new_document:
                        writer.end_document()
                        if not valid_files:
                            writer = _pick_split(writers, valid_fraction)
                    first = sentence_ends[p] - counts[p]
                    if counts[p]:
                        start = token_ends[first] - lengths[first]
                        paragraph_lengths = lengths[first : sentence_ends[p]]
                        nonempty = paragraph_lengths[paragraph_lengths > 0]
                        if len(nonempty):
                            writer.add_sentences(ids[start : token_ends[sentence_ends[p] - 1]], nonempty)
                bar.update(max(0, min(stats.bytes_read, total_bytes) - bar.n))
    finally:
        if pool is not None:
            pool.close()
            pool.join()
        bar.close()
    counts = {name: writer.close() for name, writer in writers.items()}
    if counts["train"]["tokens"] == 0:
        raise UserError(f"no tokens produced from {', '.join(map(str, corpus))}")
    if counts["valid"]["documents"] == 0:
        warnings.warn("no held-out documents (the corpus has a single document): evaluation will be skipped", stacklevel=2)
    return _finish(out, tokenizer, counts, stats, options.split_sentences, pairs=False)


def _token_dtype(tokenizer: Tokenizer) -> np.dtype:
    """uint16 when every id fits (vocabularies up to 65,536): half the disk and page cache."""
    return np.dtype(np.uint16 if tokenizer.get_vocab_size() <= 1 << 16 else np.uint32)


def _finish(out: Path, tokenizer: Tokenizer, counts: dict, stats: ReadStats, split_sentences: bool, pairs: bool) -> dict:
    """meta.json and a copy of the tokenizer: a data directory is self-describing."""
    meta = {
        "format": "bertforge-data-v1",
        "tokenizer_fingerprint": fingerprint(tokenizer),
        "vocab_size": tokenizer.get_vocab_size(),
        "dtype": _token_dtype(tokenizer).name,
        "splits": counts,
        "sources": stats.files,
        "invalid_utf8_replaced": stats.invalid_utf8,
        "skipped_lines": stats.skipped_lines,
        "split_sentences": split_sentences,
        "pairs": pairs,
    }
    write_json(out / "meta.json", meta)
    tokenizer.save(str(out / "tokenizer.json"))
    return meta


def _pick_split(writers: dict[str, _SplitWriter], valid_fraction: float) -> _SplitWriter:
    train, valid = writers["train"], writers["valid"]
    seen = train.num_tokens + valid.num_tokens
    if valid_fraction > 0 and seen > 0 and valid.num_tokens < valid_fraction * seen:
        return valid
    return train


def prepare_pairs(
    path: str | Path,
    tokenizer_dir: str | Path,
    out: str | Path,
    columns: tuple[str, str] = ("0", "1"),
    valid_fraction: float = 0.01,
) -> dict:
    """Explicit pairs (question/answer, dialogue turns, A<TAB>B lines): each row is a two-sentence document.

    IsNext uses the row's own B; NotNext takes B from another row.
    """
    path = Path(path)
    tokenizer = load_tokenizer(tokenizer_dir)
    rows = list(_read_pair_rows(path, columns))
    if not rows:
        raise UserError(f"{path}: no pairs found")
    out = Path(out)
    writers = {name: _SplitWriter(out / name, _token_dtype(tokenizer)) for name in SPLITS}
    valid_every = int(round(1 / valid_fraction)) if valid_fraction > 0 else 0
    for i, (a, b) in enumerate(rows):
        a_ids, b_ids = (e.ids for e in tokenizer.encode_batch([a, b], add_special_tokens=False))
        if not a_ids or not b_ids:
            continue
        writer = writers["valid" if valid_every and i % valid_every == valid_every - 1 else "train"]
        writer.add_sentences(np.array(a_ids + b_ids, dtype=np.uint32), np.array([len(a_ids), len(b_ids)]))
        writer.end_document()
    counts = {name: writer.close() for name, writer in writers.items()}
    return _finish(out, tokenizer, counts, ReadStats(files=[str(path)]), split_sentences=False, pairs=True)


def _read_pair_rows(path: Path, columns: tuple[str, str]) -> Iterator[tuple[str, str]]:
    """Two text fields per row from a TSV/CSV (names or indexes) or a JSONL (keys)."""
    if path.suffix == ".jsonl":
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if line.strip():
                try:
                    row = json.loads(line)
                    yield str(row[columns[0]]), str(row[columns[1]])
                except (json.JSONDecodeError, KeyError) as e:
                    raise UserError(f"{path}:{number}: cannot read pair ({e})") from None
        return
    delimiter = "," if path.suffix == ".csv" else "\t"
    lines = path.read_text(encoding="utf-8-sig", errors="replace").splitlines()
    rows = [line.split(delimiter) for line in lines if line.strip()]
    if not rows:
        return
    has_header = not all(c.isdigit() for c in columns)
    header = rows[0] if has_header else []
    first, second = (column_index(header, c, path) for c in columns)
    for number, row in enumerate(rows[1:] if has_header else rows, 2 if has_header else 1):
        if max(first, second) >= len(row):
            raise UserError(f"{path}:{number}: expected at least {max(first, second) + 1} columns, found {len(row)}")
        yield row[first].strip(), row[second].strip()


def read_pairs_file(path: str | Path) -> list[tuple[str, str]]:
    """A<TAB>B per line, for scoring pairs with NSP."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: no such file")
    pairs = list(_read_pair_rows(path, ("0", "1")))
    if not pairs:
        raise UserError(f"{path}: empty file")
    return pairs


def read_meta(data_dir: str | Path) -> dict:
    data_dir = Path(data_dir)
    path = data_dir / "meta.json"
    if not path.is_file():
        raise UserError(f"{data_dir}: not a prepared data directory (no meta.json); run `bertforge prepare` first")
    return json.loads(path.read_text(encoding="utf-8"))


# ================================================================ reading a data directory


class TokenStore:
    """Read-only view of one split: token ids plus sentence and document offsets (memory-mapped)."""

    def __init__(self, directory: Path, dtype: str):
        self.directory = directory
        self.dtype = dtype
        self._arrays = None

    def _open(self):
        # Opened lazily, so the object pickles cheaply into data-loader workers.
        if self._arrays is None:
            d = self.directory
            tokens = np.memmap(d / TOKENS, dtype=self.dtype, mode="r") if (d / TOKENS).stat().st_size else np.zeros(0, self.dtype)
            self._arrays = (tokens, np.fromfile(d / SENTENCES, dtype=np.int64), np.fromfile(d / DOCUMENTS, dtype=np.int64))
        return self._arrays

    def __getstate__(self):
        return {"directory": self.directory, "dtype": self.dtype, "_arrays": None}

    @property
    def tokens(self) -> np.ndarray:
        return self._open()[0]

    @property
    def sentence_offsets(self) -> np.ndarray:
        return self._open()[1]  # (S + 1,)

    @property
    def document_offsets(self) -> np.ndarray:
        return self._open()[2]  # (D + 1,)

    @property
    def num_documents(self) -> int:
        return len(self.document_offsets) - 1

    def sentence_range_tokens(self, first: int, last: int) -> np.ndarray:
        """Tokens of sentences first..last-1, concatenated."""
        offsets = self.sentence_offsets
        return np.asarray(self.tokens[offsets[first] : offsets[last]], dtype=np.int64)


def data_stats(data_dir: str | Path) -> dict:
    """Documents, sentences, tokens, mean sentence length and [UNK] rate per split."""
    data_dir = Path(data_dir)
    meta = read_meta(data_dir)
    tokenizer = load_tokenizer(data_dir)
    unk = special_ids(tokenizer).unk
    out = {}
    for split in SPLITS:
        store = TokenStore(data_dir / split, meta["dtype"])
        tokens = store.tokens
        unk_count = sum(int((tokens[i : i + (1 << 22)] == unk).sum()) for i in range(0, len(tokens), 1 << 22))
        sentences = len(store.sentence_offsets) - 1
        out[split] = {
            "documents": store.num_documents,
            "sentences": sentences,
            "tokens": len(tokens),
            "mean_sentence_tokens": round(len(tokens) / sentences, 2) if sentences else 0.0,
            "unk_rate": round(unk_count / len(tokens), 5) if len(tokens) else 0.0,
        }
    return out
