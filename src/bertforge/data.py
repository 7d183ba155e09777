"""From text to training batches: prepare (token memmap), NSP instances, dynamic MLM masking.

    prepare             corpus -> DATA_DIR/{train,valid}/ tokens.bin + sentence and document offsets
    PretrainingDataset  [CLS] A [SEP] B [SEP] instances, B the true continuation or from another document
    MaskingCollator     15% of the non-special tokens predicted: 80% [MASK], 10% random, 10% unchanged

Every random choice derives from (seed, epoch, instance index), never from
the batch or the process: a batch split across processes is masked exactly as
the whole batch would be, and a resumed run sees exactly the same data.
"""

from __future__ import annotations

import json
import multiprocessing
import random
import warnings
from collections import deque
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import Iterable, Iterator, Sequence

import numpy as np
import torch
from tokenizers import Tokenizer
from tqdm import tqdm

from .corpus import CorpusOptions, Paragraph, ReadStats, column_index, find_files, read_paragraphs, split_sentences
from .errors import UserError
from .fileio import write_json
from .model import IGNORE_INDEX
from .tokenizer import fingerprint, load_tokenizer, special_ids

SPLITS = ("train", "valid")
TOKENS, SENTENCES, DOCUMENTS = "tokens.bin", "sentence_offsets.bin", "document_offsets.bin"
CHUNK_CHARS = 1 << 20  # paragraphs are tokenised in chunks of about 1M characters
IS_NEXT, NOT_NEXT = 0, 1  # NSP labels, as in Hugging Face


# ================================================================ prepare


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


def _init_worker(tokenizer_json: str) -> None:
    global _worker_tokenizer
    _worker_tokenizer = Tokenizer.from_str(tokenizer_json)


def _tokenize_chunk(job: tuple[list[str], bool]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Paragraphs -> (all token ids, tokens per sentence, sentences per paragraph)."""
    paragraphs, split = job
    sentences_per_paragraph = [split_sentences(p) if split else [p] for p in paragraphs]
    flat = [s for sentences in sentences_per_paragraph for s in sentences]
    encodings = _worker_tokenizer.encode_batch(flat, add_special_tokens=False)
    lengths = np.fromiter((len(e.ids) for e in encodings), dtype=np.int64, count=len(encodings))
    ids = np.fromiter(chain.from_iterable(e.ids for e in encodings), dtype=np.uint32, count=int(lengths.sum()))
    counts = np.fromiter((len(s) for s in sentences_per_paragraph), dtype=np.int64, count=len(paragraphs))
    return ids, lengths, counts


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
    bar = tqdm(total=total_bytes, unit="B", unit_scale=True, desc="prepare", disable=not progress, mininterval=0.5)
    # fork where the platform has it: spawned workers would re-import torch, seconds each.
    context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
    pool = context.Pool(workers, _init_worker, (tokenizer.to_str(),)) if workers > 1 else None
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


# ================================================================ NSP instances


@dataclass
class Instance:
    """One [CLS] A [SEP] B [SEP] example, before masking."""

    input_ids: np.ndarray  # (T,) int64
    token_type_ids: np.ndarray  # (T,) int64: 0 for [CLS] A [SEP], 1 for B [SEP]
    nsp_label: int  # 0 = IsNext, 1 = NotNext
    index: int  # position in this epoch's plan: with the epoch, the seed of its masking
    epoch: int
    a_doc: int
    b_doc: int


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


class PretrainingDataset(torch.utils.data.Dataset):
    """BERT's next-sentence instances, built on the fly by the original algorithm.

    For each epoch a plan is made from (seed, epoch): walk each document,
    accumulate sentences up to a target length (max_seq_len - 3, or with
    `short_seq_prob` a shorter random one), end A at a random sentence boundary,
    and take B as the true continuation (IsNext) or, half the time, as text from
    another document (NotNext), putting the unused sentences back. Building an
    instance from the plan then trims the longer of A and B until the pair fits.
    """

    def __init__(self, data_dir: str | Path, split: str = "train", max_seq_len: int = 128, short_seq_prob: float = 0.1,
                 nsp: bool = True, seed: int = 0, cls_id: int = 2, sep_id: int = 3):
        data_dir = Path(data_dir)
        self.meta = read_meta(data_dir)
        if split not in SPLITS:
            raise ValueError(split)
        self.store = TokenStore(data_dir / split, self.meta["dtype"])
        self.split = split
        self.max_seq_len = max_seq_len
        self.short_seq_prob = short_seq_prob
        self.random_next_prob = 0.5 if nsp else 0.0
        self.seed = seed
        self.cls_id, self.sep_id = cls_id, sep_id
        self.pairs = bool(self.meta.get("pairs"))
        self.epoch = 0
        self._plan: tuple[int, np.ndarray] | None = None
        if self.store.num_documents == 1 and nsp and not self.pairs and split == "train":
            warnings.warn("the corpus has one document: NotNext examples come from distant parts of it", stacklevel=2)

    def __len__(self) -> int:
        return len(self.plan)

    def set_epoch(self, epoch: int) -> None:
        """Make plain integer indexing refer to `epoch`."""
        self.epoch = epoch

    def num_instances(self, epoch: int) -> int:
        return len(self.plan_for(epoch))

    @property
    def plan(self) -> np.ndarray:
        return self.plan_for(self.epoch)

    def plan_for(self, epoch: int) -> np.ndarray:
        """(n, 5) int64 rows: A's sentences [a_first, a_end), B's sentences [b_first, b_end), NSP label.

        The latest epoch's plan is cached; a loader moving through epochs builds each once.
        """
        if self._plan is None or self._plan[0] != epoch:
            plan = _build_plan(self.store.sentence_offsets, self.store.document_offsets, self.max_seq_len - 3,
                               self.short_seq_prob, self.random_next_prob, self.pairs, self.seed, epoch)
            self._plan = (epoch, plan)
        return self._plan[1]

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_plan"] = None  # rebuilt in each worker: cheaper than pickling it
        return state

    def __getitem__(self, key: int | tuple[int, int]) -> Instance:
        """`dataset[i]` in the current epoch, or `dataset[(epoch, i)]`."""
        epoch, index = key if isinstance(key, tuple) else (self.epoch, key)
        a_first, a_end, b_first, b_end, label = (int(v) for v in self.plan_for(epoch)[index])
        tokens_a = self.store.sentence_range_tokens(a_first, a_end)
        tokens_b = self.store.sentence_range_tokens(b_first, b_end)
        rng = random.Random(_mix(self.seed, epoch, index, 1))
        tokens_a, tokens_b = _truncate_pair(tokens_a, tokens_b, self.max_seq_len - 3, rng)
        input_ids = np.concatenate([[self.cls_id], tokens_a, [self.sep_id], tokens_b, [self.sep_id]]).astype(np.int64)
        token_type_ids = np.zeros(len(input_ids), dtype=np.int64)
        token_type_ids[len(tokens_a) + 2 :] = 1
        doc_of = self._document_of
        return Instance(input_ids, token_type_ids, label, index, epoch, doc_of(a_first), doc_of(b_first))

    def _document_of(self, sentence: int) -> int:
        return int(np.searchsorted(self.store.document_offsets, sentence, side="right") - 1)


def _mix(*values: int) -> int:
    """A well-spread 63-bit seed from several integers (order matters)."""
    return int(np.random.SeedSequence([v & 0xFFFFFFFF for v in values]).generate_state(2, np.uint64)[0] >> 1)


def _truncate_pair(a: np.ndarray, b: np.ndarray, limit: int, rng: random.Random) -> tuple[np.ndarray, np.ndarray]:
    """Trim the longer of A and B, at a random end, until both fit in `limit` tokens (BERT's rule)."""
    a_start, a_end, b_start, b_end = 0, len(a), 0, len(b)
    while (a_end - a_start) + (b_end - b_start) > limit:
        if (a_end - a_start) > (b_end - b_start):
            if rng.random() < 0.5:
                a_start += 1
            else:
                a_end -= 1
        elif rng.random() < 0.5:
            b_start += 1
        else:
            b_end -= 1
    return a[a_start:a_end], b[b_start:b_end]


def _build_plan(sentence_offsets: np.ndarray, document_offsets: np.ndarray, max_tokens: int, short_seq_prob: float,
                random_next_prob: float, pairs: bool, seed: int, epoch: int) -> np.ndarray:
    """BERT's create_instances_from_document, run over sentence lengths only.

    One deviation: the short target length is drawn per chunk rather than per
    document, because a document here may be a whole book.
    """
    rng = random.Random(_mix(seed, epoch, 0))
    lengths = np.diff(sentence_offsets).tolist()
    doc_starts = document_offsets.tolist()
    num_docs = len(doc_starts) - 1
    rows: list[tuple[int, int, int, int, int]] = []
    if pairs:
        for d in range(num_docs):
            first = doc_starts[d]
            if num_docs > 1 and rng.random() < random_next_prob:
                other = _other_document(rng, num_docs, d)
                rows.append((first, first + 1, doc_starts[other] + 1, doc_starts[other] + 2, NOT_NEXT))
            else:
                rows.append((first, first + 1, first + 1, first + 2, IS_NEXT))
        return np.array(rows, dtype=np.int64).reshape(-1, 5)
    for d in range(num_docs):
        doc_first, doc_last = doc_starts[d], doc_starts[d + 1]
        target = _target_length(rng, max_tokens, short_seq_prob)
        chunk_first, chunk_len, i = doc_first, 0, doc_first
        while i < doc_last:
            chunk_len += lengths[i]
            if i == doc_last - 1 or chunk_len >= target:
                chunk_end = i + 1  # the chunk is sentences chunk_first .. i
                n = chunk_end - chunk_first
                a_end = chunk_first + (rng.randint(1, n - 1) if n >= 2 else 1)  # A ends at a random sentence boundary
                row = None
                if rng.random() < random_next_prob:
                    row = _random_next(rng, d, doc_starts, lengths, chunk_first, a_end, chunk_end, target)
                    if row is not None:
                        i = a_end - 1  # the sentences of the chunk not used go back for the next instance
                if row is None:
                    # IsNext: B is the rest of the chunk, or the next sentence when A took the whole chunk.
                    b_end = chunk_end if a_end < chunk_end else min(chunk_end + 1, doc_last)
                    if b_end > a_end:
                        row = (chunk_first, a_end, a_end, b_end, IS_NEXT)
                        i = b_end - 1
                if row is not None:
                    rows.append(row)
                target = _target_length(rng, max_tokens, short_seq_prob)
                chunk_first, chunk_len = i + 1, 0
            i += 1
    return np.array(rows, dtype=np.int64).reshape(-1, 5)


def _target_length(rng: random.Random, max_tokens: int, short_seq_prob: float) -> int:
    """Usually the full length; sometimes shorter, so the model also sees short inputs (as at fine-tuning)."""
    return rng.randint(2, max_tokens) if rng.random() < short_seq_prob else max_tokens


def _other_document(rng: random.Random, num_docs: int, d: int) -> int:
    other = rng.randrange(num_docs - 1)
    return other + (other >= d)


def _random_next(rng: random.Random, d: int, doc_starts: list[int], lengths: list[int], a_first: int, a_end: int,
                 chunk_end: int, target: int):
    """NotNext: B from another document; in a one-document corpus, from a distant part of this one."""
    num_docs = len(doc_starts) - 1
    b_target = max(1, target - sum(lengths[a_first:a_end]))
    if num_docs > 1:
        other = _other_document(rng, num_docs, d)
        first, last = doc_starts[other], doc_starts[other + 1]
        start = rng.randrange(first, last)
    else:
        first, last = doc_starts[0], doc_starts[1]
        # Never the true continuation: start at least two chunk-lengths away from A on either side.
        margin = 2 * (chunk_end - a_first)
        tries = (rng.randrange(first, last) for _ in range(8))
        start = next((s for s in tries if s < a_first - margin or s > chunk_end + margin), None)
        if start is None:
            return None
    end, b_tokens = start, 0
    while end < last and b_tokens < b_target:
        b_tokens += lengths[end]
        end += 1
    return (a_first, a_end, start, end, NOT_NEXT)


# ================================================================ masking


@dataclass(frozen=True)
class MaskingConfig:
    mask_prob: float = 0.15
    mask_token_prob: float = 0.8
    random_token_prob: float = 0.1
    max_predictions: int = 20
    whole_word_mask: bool = False


class MaskingCollator:
    """Pads a list of instances into a batch and applies dynamic MLM masking.

    Per sequence: n = the non-special tokens; round(n · mask_prob) of them
    (at least 1, at most max_predictions) are chosen; of those, 80% become
    [MASK], 10% a random non-special token, 10% stay. Labels are the original
    ids at chosen positions and -100 elsewhere.
    """

    def __init__(self, tokenizer: Tokenizer, config: MaskingConfig = MaskingConfig(), seed: int = 0, pad_multiple: int = 8):
        self.config = config
        self.seed = seed
        self.pad_multiple = pad_multiple
        ids = special_ids(tokenizer)
        self.ids = ids
        self.vocab_size = tokenizer.get_vocab_size()
        self.special = np.zeros(self.vocab_size, dtype=bool)
        self.special[list(ids.all)] = True
        self.replacements = np.flatnonzero(~self.special)  # random tokens are never special
        self.continuation = _continuation_table(tokenizer) if config.whole_word_mask else None

    def mask(self, input_ids: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
        """One sequence (T,) -> (masked ids (T,), labels (T,))."""
        cfg = self.config
        rng = np.random.default_rng(seed)
        candidates = np.flatnonzero(~self.special[input_ids])  # positions of real, non-special tokens
        labels = np.full(len(input_ids), IGNORE_INDEX, dtype=np.int64)
        masked = input_ids.copy()
        if len(candidates) == 0:
            return masked, labels
        budget = min(cfg.max_predictions, max(1, int(round(len(candidates) * cfg.mask_prob))))
        if self.continuation is None:
            chosen = rng.permutation(candidates)[:budget]
        else:
            chosen = self._choose_whole_words(input_ids, candidates, budget, rng)
        labels[chosen] = input_ids[chosen]
        roll = rng.random(len(chosen))
        to_mask = chosen[roll < cfg.mask_token_prob]
        to_random = chosen[(roll >= cfg.mask_token_prob) & (roll < cfg.mask_token_prob + cfg.random_token_prob)]
        masked[to_mask] = self.ids.mask
        masked[to_random] = self.replacements[rng.integers(0, len(self.replacements), len(to_random))]
        return masked, labels

    def _choose_whole_words(self, input_ids: np.ndarray, candidates: np.ndarray, budget: int, rng) -> np.ndarray:
        """All ## pieces of a word go together; a word that would overshoot the budget is skipped (as in BERT)."""
        starts = ~self.continuation[input_ids[candidates]]
        starts[0] = True
        words = np.split(candidates, np.flatnonzero(starts)[1:])
        chosen: list[np.ndarray] = []
        count = 0
        for w in rng.permutation(len(words)):
            if count >= budget:
                break
            if count + len(words[w]) > budget:
                continue
            chosen.append(words[w])
            count += len(words[w])
        return np.sort(np.concatenate(chosen)) if chosen else candidates[:0]

    def __call__(self, instances: list[Instance]) -> dict[str, torch.Tensor]:
        longest = max(len(x.input_ids) for x in instances)
        width = -(-longest // self.pad_multiple) * self.pad_multiple
        B = len(instances)
        input_ids = np.full((B, width), self.ids.pad, dtype=np.int64)
        token_type_ids = np.zeros((B, width), dtype=np.int64)
        attention_mask = np.zeros((B, width), dtype=np.int64)
        mlm_labels = np.full((B, width), IGNORE_INDEX, dtype=np.int64)
        for row, x in enumerate(instances):
            n = len(x.input_ids)
            masked, labels = self.mask(x.input_ids, _mix(self.seed, x.epoch, x.index, 2))
            input_ids[row, :n] = masked
            token_type_ids[row, :n] = x.token_type_ids
            attention_mask[row, :n] = 1
            mlm_labels[row, :n] = labels
        return {
            "input_ids": torch.from_numpy(input_ids),
            "token_type_ids": torch.from_numpy(token_type_ids),
            "attention_mask": torch.from_numpy(attention_mask),
            "mlm_labels": torch.from_numpy(mlm_labels),
            "nsp_labels": torch.tensor([x.nsp_label for x in instances], dtype=torch.long),
        }


def _continuation_table(tokenizer: Tokenizer) -> np.ndarray:
    """(V,) bool: True for "##" word pieces that continue the previous token."""
    table = np.zeros(tokenizer.get_vocab_size(), dtype=bool)
    for token, token_id in tokenizer.get_vocab().items():
        table[token_id] = token.startswith("##")
    return table


def data_stats(data_dir: str | Path) -> dict:
    """Documents, sentences, tokens, mean sentence length and [UNK] rate per split."""
    data_dir = Path(data_dir)
    meta = read_meta(data_dir)
    tokenizer = Tokenizer.from_file(str(data_dir / "tokenizer.json"))
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
