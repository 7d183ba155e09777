"""The prepared-data format: token ids with sentence and document offsets, one directory per split.

    DATA_DIR/meta.json            tokenizer fingerprint, counts, sources, what filters dropped
    DATA_DIR/tokenizer.json       the tokenizer the ids come from, with tokenizer_config.json and
                                  special_tokens_map.json naming its special tokens' roles
    DATA_DIR/{train,valid}/
        tokens.bin                token ids, uint16 when the vocabulary fits, else uint32
        sentence_offsets.bin      int64, S + 1 values: sentence i is tokens[off[i]:off[i+1]]
        document_offsets.bin      int64, D + 1 values: document j is sentences [off[j], off[j+1])

`SplitWriter` appends to a split in constant memory; `TokenStore` reads one
through memory maps. Neither imports torch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from tokenizers import Tokenizer

from ..errors import UserError
from ..fileio import read_json, write_json
from ..tokenizer import TOKENIZER_FILES, fingerprint, load_tokenizer, save_tokenizer, special_ids

FORMAT = "bertforge-data-v1"
SPLITS = ("train", "valid")
TOKENS, SENTENCES, DOCUMENTS = "tokens.bin", "sentence_offsets.bin", "document_offsets.bin"
COPY_TOKENS = 1 << 20  # a moved document is copied in pieces of this many tokens: memory stays bounded


def token_dtype(tokenizer: Tokenizer) -> np.dtype:
    """uint16 when every id fits (vocabularies up to 65,536): half the disk and page cache."""
    return np.dtype(np.uint16 if tokenizer.get_vocab_size() <= 1 << 16 else np.uint32)


class SplitWriter:
    """Appends sentences and documents of one split to flat binary files."""

    def __init__(self, directory: Path, dtype: np.dtype):
        directory.mkdir(parents=True, exist_ok=True)
        self.dtype = np.dtype(dtype)
        self.tokens = open(directory / TOKENS, "w+b")
        self.sentences = open(directory / SENTENCES, "w+b")
        self.documents = open(directory / DOCUMENTS, "w+b")
        self.num_tokens = self.num_sentences = self.num_documents = 0
        self.sentences.write(np.int64(0).tobytes())
        self.documents.write(np.int64(0).tobytes())
        self.document_start = (0, 0)  # (tokens, sentences) where the open or last document began
        self._open = False  # a document has sentences and is not yet ended

    def add_sentences(self, ids: np.ndarray, lengths: np.ndarray) -> None:
        """Sentences of the open document: their ids concatenated, and each one's length."""
        self.tokens.write(ids.astype(self.dtype, copy=False).tobytes())
        self._add_offsets(lengths)

    def _add_offsets(self, lengths: np.ndarray) -> None:
        if not self._open:
            self.document_start = (self.num_tokens, self.num_sentences)
            self._open = True
        self.sentences.write((self.num_tokens + np.cumsum(lengths, dtype=np.int64)).tobytes())
        self.num_tokens += int(lengths.sum())
        self.num_sentences += len(lengths)

    def end_document(self) -> int:
        """Close the open document; returns its token count (0 if nothing was open)."""
        if not self._open:
            return 0
        self._open = False
        self.num_documents += 1
        self.documents.write(np.int64(self.num_sentences).tobytes())
        return self.num_tokens - self.document_start[0]

    def move_last_document(self, other: SplitWriter) -> None:
        """Move the document just ended to the end of `other`, and cut it from this split."""
        token_start, sentence_start = self.document_start
        self.sentences.flush()
        self.sentences.seek(8 * sentence_start)
        offsets = np.frombuffer(self.sentences.read(8 * (self.num_sentences - sentence_start + 1)), dtype=np.int64)
        other._add_offsets(np.diff(offsets))  # the tokens follow, copied piece by piece
        self.tokens.flush()
        itemsize = self.dtype.itemsize
        for start in range(token_start, self.num_tokens, COPY_TOKENS):
            self.tokens.seek(start * itemsize)
            chunk = np.frombuffer(
                self.tokens.read(min(COPY_TOKENS, self.num_tokens - start) * itemsize), dtype=self.dtype
            )
            other.tokens.write(chunk.astype(other.dtype, copy=False).tobytes())
        other.end_document()
        for f, size in (
            (self.tokens, token_start * itemsize),
            (self.sentences, 8 * (sentence_start + 1)),
            (self.documents, 8 * self.num_documents),
        ):
            f.truncate(size)
            f.seek(size)
        self.num_tokens, self.num_sentences, self.num_documents = token_start, sentence_start, self.num_documents - 1

    def close(self) -> dict[str, int]:
        self.end_document()
        self.abandon()
        return {"documents": self.num_documents, "sentences": self.num_sentences, "tokens": self.num_tokens}

    def abandon(self) -> None:
        """Close the files without finishing them: what a failed `prepare` wrote is removed with its directory."""
        for f in (self.tokens, self.sentences, self.documents):
            f.close()


def write_meta(out: Path, tokenizer: Tokenizer, counts: dict, **facts: Any) -> dict:
    """meta.json and a copy of the tokenizer: a data directory describes itself."""
    meta = {
        "format": FORMAT,
        "tokenizer_fingerprint": fingerprint(tokenizer),
        "vocab_size": tokenizer.get_vocab_size(),
        "dtype": token_dtype(tokenizer).name,
        "splits": counts,
        **facts,
    }
    write_json(out / "meta.json", meta)
    save_tokenizer(tokenizer, out)  # with its special tokens' roles: a released model's <s> </s> <mask> too
    return meta


DATA_DIR_NAMES = frozenset({"meta.json", *TOKENIZER_FILES, *SPLITS})


def is_data_dir(path: Path) -> bool:
    """A prepared data directory, or what an older, interrupted `prepare` left of one (nothing but its names)."""
    return (path / "meta.json").is_file() or all(child.name in DATA_DIR_NAMES for child in path.iterdir())


def read_meta(data_dir: str | Path) -> dict:
    data_dir = Path(data_dir)
    path = data_dir / "meta.json"
    if not path.is_file():
        raise UserError(f"{data_dir}: not a prepared data directory (no meta.json); run `bertforge prepare` first")
    meta = read_json(path, "config")
    if not isinstance(meta, dict):
        raise UserError(f"{path}: not a JSON object")
    return meta


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
            tokens = (
                np.memmap(d / TOKENS, dtype=self.dtype, mode="r")
                if (d / TOKENS).stat().st_size
                else np.zeros(0, self.dtype)
            )
            self._arrays = (
                tokens,
                np.fromfile(d / SENTENCES, dtype=np.int64),
                np.fromfile(d / DOCUMENTS, dtype=np.int64),
            )
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


def check_split(data_dir: str | Path, split: str, vocab_size: int) -> None:
    """A split that reads as it was written: its offsets run from 0 up to the ends of its tokens and sentences,
    and every token id is one of the tokenizer's. A damaged or hostile directory is one line, before any step:
    an id past the vocabulary would fail inside a data-loader worker, and offsets past the tokens would train
    on nothing. Linear in the tokens (read 4M at a time)."""
    store = open_split(data_dir, split)
    where = f"{Path(data_dir) / split}"
    tokens, sentences, documents = store.tokens, store.sentence_offsets, store.document_offsets
    for name, offsets, end in (("sentence", sentences, len(tokens)), ("document", documents, len(sentences) - 1)):
        if len(offsets) == 0 or offsets[0] != 0 or offsets[-1] != end or bool((np.diff(offsets) < 0).any()):
            raise UserError(
                f"{where}: its {name} offsets do not run from 0 to {end} in order; the data directory is damaged: "
                "prepare it again"
            )
    largest = max((int(tokens[i : i + (1 << 22)].max()) for i in range(0, len(tokens), 1 << 22)), default=0)
    if largest >= vocab_size:
        raise UserError(
            f"{where}: tokens.bin holds token id {largest}, past the tokenizer's {vocab_size} tokens; the data "
            "directory is damaged or not this tokenizer's: prepare it again"
        )


def open_split(data_dir: str | Path, split: str) -> TokenStore:
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, not {split!r}")
    return TokenStore(Path(data_dir) / split, read_meta(data_dir)["dtype"])


def data_stats(data_dir: str | Path) -> dict:
    """Documents, sentences, tokens, mean sentence length and [UNK] rate per split, and what filters dropped."""
    data_dir = Path(data_dir)
    unk = special_ids(load_tokenizer(data_dir)).unk
    out: dict[str, Any] = {}
    for split in SPLITS:
        store = open_split(data_dir, split)
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
    filters = read_meta(data_dir).get("filters")
    if filters:
        out["filters"] = filters
    return out
