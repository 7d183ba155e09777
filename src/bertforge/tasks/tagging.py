"""Token classification (named entities, part-of-speech tags): CoNLL files or tables in, one tag per word out.

    bertforge finetune MODEL --task token-classification --train train.conll --dev dev.conll --out ner
    bertforge finetune MODEL --task token-classification --train train.parquet --dev validation.parquet \\
        --out ner                                      # `datasets`' tokens and ner_tags, tag names from the file

CoNLL format: `token<TAB or space>tag` per line (the tag is the last field), a
blank line between sentences, `-DOCSTART-` lines ignored. A .conllu file (Universal
Dependencies' treebanks, the part-of-speech data of most languages) gives its words
their UPOS tags, or the column the user names (xpos, deprel, ...). A JSONL, Parquet or
Arrow table holds a sentence per row, its words and their tags as two lists, as
`datasets` publishes CoNLL-2003 and WNUT-17 (`tokens`, `ner_tags`); tags stored
as numbers are named by the file's `datasets` metadata or by the names the user
gives; or a text and its entities as character spans, as annotation tools (doccano,
Label Studio, Prodigy) export them, split into words and tagged B-, I- and O. Each word's tag goes on
its first word piece; the other pieces get -100 and are not scored. A sentence
longer than the model reads is cut into windows at word boundaries, never
truncated. Scores are entity-level precision, recall and F1 (exact span and
type), with chunks found as conlleval finds them, and the share of words tagged
right; the best epoch is picked by F1 for chunk tags (B-person, O) and by word
accuracy for a tag per word (NOUN, VERB). The saved model is a
`transformers` BertForTokenClassification directory with id2label.
"""

from __future__ import annotations

import bisect
import itertools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tokenizers import Tokenizer

from ..engine.runtime import MixedPrecision, resolve_device
from ..errors import UserError
from ..fileio import write_answers
from ..formats.catalog import format_named
from ..formats.rows import class_label_names, label_name, read_rows
from ..formats.textfiles import format_of, open_text
from ..labels import IGNORE_INDEX
from ..model.heads import BertForTokenClassification
from ..modelfiles.directory import read_model_files
from ..modelfiles.heads import label_names
from ..serving.served import load_served
from ..tokenizer import max_input_length, special_ids
from .registry import ColumnNames

DOCUMENT_START = "-DOCSTART-"


@dataclass
class Sentence:
    words: list[str]
    tags: list[str]


@dataclass(frozen=True)
class TagColumns:
    """Where a table keeps a sentence's words and their tags (two lists), `datasets`' names by default; `names`
    say what tags stored as numbers stand for, where the file does not."""

    words: str = "tokens"
    tags: str = "ner_tags"
    names: tuple[str, ...] = ()

    @classmethod
    def given(cls, words: str | None, tags: str | None, names: tuple[str, ...] = ()) -> TagColumns:
        """The columns a user named, `datasets`' names for those not named."""
        return cls(words or cls.words, tags or cls.tags, names)


def read_sentences(path: str | Path, columns: TagColumns = TagColumns()) -> list[Sentence]:
    """The sentences of a table (JSONL, Parquet, Arrow: a row each), of a CoNLL-U file, or of a CoNLL file (any
    other name)."""
    if Path(path).name.lower().removesuffix(".zip").endswith(CONLLU_SUFFIXES):
        return read_conllu(path, CONLLU_UPOS if columns.tags == TagColumns.tags else columns.tags)
    if not format_named(format_of(Path(path))).has_records:  # a sentence per row; any other file is CoNLL
        return read_conll(path)
    names = columns.names or class_label_names(path, columns.tags)
    sentences = []
    for number, row in read_rows(path, [columns.words, columns.tags]):
        words, tags, where = row[columns.words], row[columns.tags], f"{path}:{number}"
        if isinstance(words, str) and isinstance(tags, list):  # an annotation tool's text and character spans
            if tags and all(isinstance(tag, (str, int)) for tag in tags):  # a tag per word, and the words a string
                raise UserError(
                    f"{where}: {columns.words!r} holds a text, and {columns.tags!r} a tag per word: columns "
                    f"{columns.words!r} and {columns.tags!r} must each hold a list (or {columns.tags!r} the text's "
                    "entities as character spans, [start, end, type])"
                )
            sentences.append(spans_to_words(words, tags, where))
            continue
        if not isinstance(words, list) or not isinstance(tags, list):
            raise UserError(f"{where}: columns {columns.words!r} and {columns.tags!r} must each hold a list")
        if len(words) != len(tags):
            raise UserError(f"{where}: {len(words)} words but {len(tags)} tags")
        if not names and any(isinstance(tag, int) for tag in tags):
            raise UserError(
                f"{where}: the tags are numbers and the file does not name them; give their names in order, "
                "like --label-names O,B-person,I-person"
            )
        if words and words != [DOCUMENT_START]:
            sentences.append(Sentence([str(w) for w in words], [label_name(t, names, where) for t in tags]))
    if not sentences:
        raise UserError(f"{path}: no sentences (empty file)")
    return sentences


def read_conll(path: str | Path) -> list[Sentence]:
    """Sentences of a CoNLL file; a line with one field, or a tag that is missing, names its line."""
    sentences, words, tags = [], [], []
    with open_text(path) as f:
        for number, line in enumerate(f, start=1):
            fields = line.split()
            if not fields or fields[0] == DOCUMENT_START:
                if words:
                    sentences.append(Sentence(words, tags))
                words, tags = [], []
                continue
            if len(fields) < 2:
                raise UserError(f"{path}:{number}: expected 'token<TAB>tag', found one field {line.strip()!r}")
            words.append(fields[0])
            tags.append(fields[-1])
    if words:
        sentences.append(Sentence(words, tags))
    if not sentences:
        raise UserError(f"{path}: no sentences (empty file)")
    return sentences


WORD = re.compile(r"[^\W_]+|[^\w\s]|_")  # a run of letters and digits, or one punctuation mark: BERT's own split


def spans_to_words(text: str, spans: list, where: str) -> Sentence:
    """A text and its entities as annotation tools export them, each a character span and its type: doccano's
    [start, end, "PER"], Label Studio's JSON-MIN {"start", "end", "labels": ["PER"]}, Prodigy's and spaCy's
    {"start", "end", "label"}; as words, split as BERT's pre-tokenizer splits them, tagged B-, I- and O. A word
    is in an entity where it starts inside its span."""
    entities = sorted(_span(span, where) for span in spans)
    for (_, end, kind), (start, _, other) in zip(entities, entities[1:]):
        if start < end:
            raise UserError(f"{where}: entities {kind!r} and {other!r} overlap at character {start}")
    starts = [start for start, _, _ in entities]  # sorted, the spans apart: the one a word may start in is found
    words, tags, previous = [], [], None  # by bisection, so 60,000 words and entities take no longer than a list
    for match in WORD.finditer(text):
        candidate = entities[bisect.bisect_right(starts, match.start()) - 1] if starts else None
        inside = candidate if candidate is not None and candidate[0] <= match.start() < candidate[1] else None
        words.append(match.group())
        tags.append("O" if inside is None else f"{'I' if inside is previous else 'B'}-{inside[2]}")
        previous = inside
    if sum(tag.startswith("B-") for tag in tags) < len(entities):
        raise UserError(f"{where}: an entity's span holds no word of the text (spans count characters from 0)")
    return Sentence(words, tags)


def _span(span: Any, where: str) -> tuple[int, int, str]:
    """(start, end, type) of one exported entity, in any of the tools' shapes."""
    if isinstance(span, dict) and "labels" in span and isinstance(span["labels"], list) and span["labels"]:
        span = {**span, "label": span["labels"][0]}
    if isinstance(span, dict) and {"start", "end", "label"} <= set(span):
        start, end, kind = span["start"], span["end"], span["label"]
    elif isinstance(span, list) and len(span) == 3:
        start, end, kind = span
    else:
        raise UserError(
            f"{where}: an entity is [start, end, type] or {{start, end, label}}, not {json.dumps(span)[:80]}"
        )
    if not (isinstance(start, int) and isinstance(end, int) and 0 <= start < end):
        raise UserError(f"{where}: an entity's start and end are character offsets, start < end: {start}, {end}")
    return start, end, str(kind)


CONLLU_SUFFIXES = (".conllu", ".conllu.gz", ".conllu.bz2", ".conllu.xz", ".conllu.zst")
CONLLU_FIELDS = ("id", "form", "lemma", "upos", "xpos", "feats", "head", "deprel", "deps", "misc")
CONLLU_UPOS = "upos"


def read_conllu(path: str | Path, field: str = CONLLU_UPOS) -> list[Sentence]:
    """Sentences of a CoNLL-U file: each syntactic word's form, tagged with its `field` (UPOS by default).
    Comments (# sent_id, # text) are skipped, and so are a multiword token's line (1-2 "du", whose words 1 and 2
    follow it) and empty nodes (8.1), which are not words of the text."""
    field = field.lower()
    if field not in CONLLU_FIELDS[2:]:
        raise UserError(f"{path}: a CoNLL-U file's tags are one of its columns: {', '.join(CONLLU_FIELDS[2:])}")
    column = CONLLU_FIELDS.index(field)
    sentences, words, tags = [], [], []
    with open_text(path) as f:
        for number, line in enumerate(f, start=1):
            line = line.rstrip("\r\n")
            if not line.strip():
                if words:
                    sentences.append(Sentence(words, tags))
                words, tags = [], []
                continue
            if line.startswith("#"):
                continue
            fields = line.split("\t")
            if len(fields) != len(CONLLU_FIELDS):
                raise UserError(
                    f"{path}:{number}: a CoNLL-U word line has 10 tab-separated fields, found {len(fields)}"
                )
            if not fields[0].isdigit():  # 1-2: a multiword token, whose words follow; 8.1: an empty node
                continue
            words.append(fields[1])
            tags.append(fields[column])
    if words:
        sentences.append(Sentence(words, tags))
    if not sentences:
        raise UserError(f"{path}: no sentences (empty file)")
    return sentences


# ---------------------------------------------------------------- entities


def chunk_tags(tags: list[str]) -> bool:
    """Whether a tag set marks chunks that span words (O, B-person, I-person: entities, scored by F1) rather than
    giving each word a tag of its own (NOUN, VERB: scored by the share of words tagged right)."""
    return all(tag == "O" or tag[:2] in ("B-", "I-", "E-", "S-") for tag in tags)


def _split_tag(tag: str) -> tuple[str, str]:
    """("B", "person") from "B-person"; ("O", "") from "O"; a bare "person" is an inside tag."""
    if tag == "O":
        return "O", ""
    if tag[:2] in ("B-", "I-", "E-", "S-"):
        return tag[0], tag[2:]
    return "I", tag


def entities(tags: list[str]) -> set[tuple[str, int, int]]:
    """(type, first word, last word + 1) of every chunk, by conlleval's rules.

    A chunk starts at B-X, or at I-X after O or after another type (IOB1 and sloppy
    IOB2 alike), and ends before the next tag that does not continue it.
    """
    chunks, start, kind = set(), None, ""
    for i, tag in enumerate([*tags, "O"]):
        prefix, tag_kind = _split_tag(tag)
        continues = start is not None and prefix in ("I", "E") and tag_kind == kind
        if start is not None and not continues:
            chunks.add((kind, start, i))
            start = None
        if prefix != "O" and not continues:
            start, kind = i, tag_kind
    return chunks


def entity_scores(gold: list[list[str]], predicted: list[list[str]]) -> dict[str, float]:
    """Entity-level precision, recall and F1 over sentences, as conlleval computes them; and word accuracy."""
    found = correct = expected = 0
    for gold_tags, predicted_tags in zip(gold, predicted):
        gold_chunks, predicted_chunks = entities(gold_tags), entities(predicted_tags)
        correct += len(gold_chunks & predicted_chunks)
        found += len(predicted_chunks)
        expected += len(gold_chunks)
    precision = correct / found if found else 0.0
    recall = correct / expected if expected else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    words = sum(len(tags) for tags in gold)
    right = sum(g == p for gold_tags, predicted_tags in zip(gold, predicted) for g, p in zip(gold_tags, predicted_tags))
    return {"precision": precision, "recall": recall, "f1": f1, "accuracy": right / words if words else 0.0}


# ---------------------------------------------------------------- encoding


@dataclass
class Window:
    """Some of a sentence's words, encoded: ids (T,) and each piece's word index (None: a special or a later piece)."""

    sentence: int
    ids: list[int]
    first_piece_word: list[int | None]


def encode_sentences(tokenizer: Tokenizer, sentences: list[list[str]], seq_len: int) -> list[Window]:
    """[CLS] pieces [SEP] per window; a sentence too long for `seq_len` is cut between words. Each word after the
    first is encoded with the space before it, as in running text: a byte-level BPE (RoBERTa's) marks a word's
    start with the space's `Ġ`, and a word encoded alone would lack it (WordPiece drops the space)."""
    ids = special_ids(tokenizer)
    windows = []
    for s, words in enumerate(sentences):
        pieces = [
            tokenizer.encode(word if w == 0 else " " + word, add_special_tokens=False).ids or [ids.unk]
            for w, word in enumerate(words)
        ]
        current: list[int] = []
        first: list[int | None] = []
        for w, word_pieces in enumerate(pieces):
            word_pieces = word_pieces[: seq_len - 2]  # a single word longer than a window keeps its first pieces
            if current and len(current) + len(word_pieces) > seq_len - 2:
                windows.append(Window(s, [ids.cls, *current, ids.sep], [None, *first, None]))
                current, first = [], []
            current += word_pieces
            first += [w] + [None] * (len(word_pieces) - 1)
        windows.append(Window(s, [ids.cls, *current, ids.sep], [None, *first, None]))
    return windows


def window_batch(windows: list[Window], pad: int, tag_ids: list[list[int]] | None = None) -> dict[str, torch.Tensor]:
    """input_ids, token_type_ids, attention_mask (and with tags, labels: -100 except on first pieces), padded right."""
    width = max(len(w.ids) for w in windows)
    input_ids = torch.full((len(windows), width), pad, dtype=torch.long)
    labels = torch.full((len(windows), width), IGNORE_INDEX, dtype=torch.long)
    for row, w in enumerate(windows):
        input_ids[row, : len(w.ids)] = torch.tensor(w.ids)
        if tag_ids is not None:
            for position, word in enumerate(w.first_piece_word):
                if word is not None:
                    labels[row, position] = tag_ids[w.sentence][word]
    batch = {
        "input_ids": input_ids,
        "token_type_ids": torch.zeros_like(input_ids),
        "attention_mask": (input_ids != pad).long(),
    }
    return {**batch, "labels": labels} if tag_ids is not None else batch


@torch.no_grad()
def predict_words(
    model: BertForTokenClassification,
    windows: list[Window],
    lengths: list[int],
    pad: int,
    precision: MixedPrecision,
    batch_size: int = 64,
) -> list[list[int]]:
    """The predicted tag id of every word of every sentence (from its first piece)."""
    model.eval()
    predicted = [[0] * n for n in lengths]
    for start in range(0, len(windows), batch_size):
        chunk = windows[start : start + batch_size]
        batch = {k: v.to(precision.device) for k, v in window_batch(chunk, pad).items()}
        with precision.autocast():
            logits, _ = model(**batch)
        best = logits.argmax(-1).cpu()  # (b, T)
        for row, w in enumerate(chunk):
            for position, word in enumerate(w.first_piece_word):
                if word is not None:
                    predicted[w.sentence][word] = int(best[row, position])
    return predicted


# ---------------------------------------------------------------- the task


class TaggingTask:
    """Tagged sentences for `finetune`; the tag set is the training file's."""

    model_class = BertForTokenClassification
    main_metric = "f1"  # for chunk tags; a tag per word is picked by accuracy (chunk_tags)

    @classmethod
    def from_files(cls, record, tokenizer, train, dev, seq_len, cfg, columns: TagColumns | None) -> TaggingTask:
        return cls(tokenizer, train, dev, seq_len, columns or TagColumns())

    @staticmethod
    def columns_from(names: ColumnNames) -> TagColumns:
        return TagColumns.given(names.text, names.label, names.label_names)

    @classmethod
    def main_metric_for(cls, record, columns: TagColumns | None, tuned: bool) -> str:
        return cls.main_metric

    def __init__(
        self,
        tokenizer: Tokenizer,
        train_path: str | Path,
        dev_path: str | Path,
        seq_len: int,
        columns: TagColumns = TagColumns(),
    ):
        self.pad = special_ids(tokenizer).pad
        train, self.dev = read_sentences(train_path, columns), read_sentences(dev_path, columns)
        self.tags = sorted({t for s in train for t in s.tags}, key=lambda t: (t != "O", _split_tag(t)[1], t))
        if not chunk_tags(self.tags):
            self.main_metric = "accuracy"
        tag_id = {t: i for i, t in enumerate(self.tags)}
        unknown = sorted({t for s in self.dev for t in s.tags} - set(tag_id))
        if unknown:
            raise UserError(f"{dev_path}: tag {unknown[0]!r} does not occur in the training file")
        self.train_tags = [[tag_id[t] for t in s.tags] for s in train]
        self.train_windows = encode_sentences(tokenizer, [s.words for s in train], seq_len)
        self.dev_windows = encode_sentences(tokenizer, [s.words for s in self.dev], seq_len)
        self.sizes = {"train_sentences": len(train), "dev_sentences": len(self.dev)}

    def model_kwargs(self) -> dict[str, Any]:
        return {"num_labels": len(self.tags)}

    def train_batches(self, batch_size: int, rng: np.random.Generator) -> list[dict[str, torch.Tensor]]:
        order = rng.permutation(len(self.train_windows))
        return [
            window_batch([self.train_windows[i] for i in order[s : s + batch_size]], self.pad, self.train_tags)
            for s in range(0, len(order), batch_size)
        ]

    def evaluate(self, model, precision: MixedPrecision) -> dict[str, float]:
        predicted = predict_words(model, self.dev_windows, [len(s.words) for s in self.dev], self.pad, precision)
        return entity_scores([s.tags for s in self.dev], [[self.tags[i] for i in p] for p in predicted])

    def saved_config(self) -> dict[str, Any]:
        return {
            "id2label": {str(i): t for i, t in enumerate(self.tags)},
            "label2id": {t: i for i, t in enumerate(self.tags)},
        }

    def summary(self) -> dict[str, Any]:
        return {"labels": self.tags, **self.sizes}


ENTITY_COLUMNS = ["text_number", "text", "entity_group", "word", "start", "end", "score"]


def write_entities(path: str | Path, results: list[dict[str, Any]]) -> None:
    """Tagged texts ({text, entities}) as a file: a .jsonl line per text as they are, or a .csv/.tsv row per
    entity with the number of its text (from 1) and the text, which a spreadsheet filters by type."""
    rows = [
        {"text_number": n, "text": r["text"], **{k: e[k] for k in ENTITY_COLUMNS[2:]}}
        for n, r in enumerate(results, 1)
        for e in r["entities"]
    ]
    write_answers(path, results, rows, ENTITY_COLUMNS)


class Tagger:
    """A fine-tuned tagger: entities in raw text, grouped as `pipeline("token-classification",
    aggregation_strategy="simple")` groups them (adjacent pieces whose tags continue one entity); or, for a tag
    per word (part of speech), every word with its first piece's tag."""

    def __init__(self, path: str | Path, device: str = "cpu", trust_pickle: bool = False):
        files = read_model_files(path)
        self.tags = label_names(files.directory, files.raw, "tagging")
        _, self.model, self.tokenizer = load_served(
            files, BertForTokenClassification, trust_pickle, num_labels=len(self.tags)
        )
        self.precision = MixedPrecision(resolve_device(device), "fp32")
        self.model.to(self.precision.device).eval()

    @torch.no_grad()
    def tag(self, text: str) -> list[dict[str, Any]]:
        """[{entity_group, score, word, start, end}] for each entity, with character offsets into `text`."""
        encoding = self.tokenizer.encode(text)
        limit = max_input_length(self.tokenizer, self.model.config.max_position_embeddings)
        if len(encoding.ids) > limit:
            raise UserError(f"input is {len(encoding.ids)} tokens but the model reads at most {limit}")
        input_ids = torch.tensor([encoding.ids], device=self.precision.device)  # (1, T)
        logits, _ = self.model(input_ids, torch.zeros_like(input_ids))
        probabilities = logits[0].float().softmax(-1).cpu().numpy()  # (T, tags)
        unk = special_ids(self.tokenizer).unk
        tokens = [
            {
                "entity": self.tags[int(p.argmax())],
                "score": float(p.max()),
                "start": start,
                "end": end,
                "word": text[start:end] if token_id == unk else token,
            }  # an unknown piece shows the text it stands for
            for p, token, token_id, (start, end), special in zip(
                probabilities, encoding.tokens, encoding.ids, encoding.offsets, encoding.special_tokens_mask
            )
            if not special
        ]
        if not chunk_tags(self.tags):  # a tag per word (NOUN, VERB): each word's, from its first piece, as trained
            word_ids = [w for w, special in zip(encoding.word_ids, encoding.special_tokens_mask) if not special]
            words = [
                [t for _, t in pieces] for _, pieces in itertools.groupby(zip(word_ids, tokens), key=lambda x: x[0])
            ]
            return [self._found(word, word[0]["entity"], word[0]["score"]) for word in words]
        groups: list[list[dict]] = []
        for token in tokens:
            prefix, kind = _split_tag(token["entity"])
            if groups and prefix != "B" and kind == _split_tag(groups[-1][-1]["entity"])[1]:
                groups[-1].append(token)
            else:
                groups.append([token])
        return [
            self._found(group, kind, float(np.mean([t["score"] for t in group])))
            for group in groups
            if (kind := group[0]["entity"].split("-", 1)[-1]) != "O"
        ]

    def _found(self, pieces: list[dict], tag: str, score: float) -> dict[str, Any]:
        """An entity or a word, of one or more pieces: its tag, score, text and character span."""
        words = [t["word"] for t in pieces]
        return {
            "entity_group": tag,
            "score": score,
            "word": self.tokenizer.decoder.decode(words) if self.tokenizer.decoder else " ".join(words),
            "start": pieces[0]["start"],
            "end": pieces[-1]["end"],
        }
