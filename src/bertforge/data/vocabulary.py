"""`tokenizer train`: a tokenizer trained on a corpus, its accents decided from the corpus, written whole.

The corpus is streamed from its files, read twice by the trainer (`tokenizer.train_tokenizer`). Its first
paragraphs (SAMPLE_CHARS of them) are measured first for whether stripping accents would merge its words
(`tokenizer.accent_choice`), unless the caller decides.
The trainer runs in a thread of its own: `tokenizers` trains in Rust without returning to Python, and the
main thread must stay free to take Ctrl-C or SIGTERM and exit at once, with nothing written.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from tokenizers import Tokenizer

from ..fileio import atomic_directory, check_not_inputs, check_output_dir
from ..formats.corpus import ReadStats, read_paragraphs, readable_files
from ..formats.filters import FilterReport
from ..formats.options import CorpusOptions
from ..tokenizer import TOKENIZER_FILES, AccentChoice, accent_choice, save_tokenizer, train_tokenizer

SAMPLE_CHARS = 4_000_000  # text measured for the accent decision: its 20,000 most frequent words settle
WAIT_SECONDS = 0.2  # how often the main thread looks up from the trainer (and takes a signal)
# Longer "words" (a base64 blob, an unclosed HTML comment) are [UNK] to WordPiece (max_input_chars_per_word), and
# its trainer's time grows with the square of a word's length: 55 s for one of 300,000 characters. Left out.
LONG_WORD = re.compile(r"\w{101,}")


SMALL_CORPUS_WORDS = 50_000_000  # below this, a 30k vocabulary costs step time for little (README, budget)


@dataclass
class TrainedTokenizer:
    """What `train_corpus_tokenizer` made, and from what."""

    tokenizer: Tokenizer
    words: int  # words of text it was trained on
    files: list[str]  # the files read
    accents: AccentChoice | None  # the measured decision, or None where the caller gave one
    filter_report: FilterReport  # what the corpus filters dropped
    kind: str = "wordpiece"

    @property
    def advice(self) -> str | None:
        """What to change, where the vocabulary is large for the corpus: a 30k WordPiece on fewer than
        SMALL_CORPUS_WORDS words costs step time for nothing learned (measured, docs/pretraining.md)."""
        if self.kind != "wordpiece" or self.words >= SMALL_CORPUS_WORDS or self.tokenizer.get_vocab_size() <= 16384:
            return None
        return (
            f"for a corpus of {self.words:,} words, --vocab-size 8192 makes each pre-training step faster (0.51 "
            "against 0.75 s on mini, measured) with no loss in what is learned at equal time (docs/pretraining.md); "
            "BabyLM's best models used 6k-16k tokens for 10M words"
        )


def train_corpus_tokenizer(
    corpus: Sequence[str | Path],
    out: str | Path,
    options: CorpusOptions | None = None,
    kind: str = "wordpiece",
    vocab_size: int = 30522,
    min_frequency: int = 2,
    lowercase: bool = True,
    strip_accents: bool | None = None,
    overwrite: bool = False,
) -> TrainedTokenizer:
    """Train a tokenizer on the corpus files and write it into OUT (replaced only with `overwrite`).

    `strip_accents` None measures it on the corpus (`tokenizer.accent_choice`)."""
    options = options or CorpusOptions()
    files = readable_files(corpus)  # before anything is written
    out = Path(out)
    check_not_inputs({"--out": out}, {"CORPUS": files})
    ours = out.is_dir() and all(child.name in TOKENIZER_FILES for child in out.iterdir())
    check_output_dir(out, overwrite, "a tokenizer", ours)
    texts = CorpusTexts(corpus, options)
    choice = None
    if strip_accents is None:
        choice = accent_choice(_first_chars(iter(texts), SAMPLE_CHARS), lowercase)
        strip_accents = choice.strip
    tokenizer = _in_thread(lambda: train_tokenizer(texts, kind, vocab_size, min_frequency, lowercase, strip_accents))
    with atomic_directory(out) as tmp:
        save_tokenizer(tokenizer, tmp)
    return TrainedTokenizer(tokenizer, texts.words, texts.stats.files, choice, texts.paragraph_filter.report, kind)


class CorpusTexts:
    """The corpus's paragraphs as texts, read afresh from its files each time it is iterated (the trainer reads
    them twice), with words that are too long cut out. What the latest reading found is kept: its words, files
    read and what the filters dropped."""

    def __init__(self, corpus: Sequence[str | Path], options: CorpusOptions):
        self.corpus, self.options = corpus, options
        self.words, self.stats, self.paragraph_filter = 0, ReadStats(), options.paragraph_filter()

    def __iter__(self) -> Iterator[str]:
        self.words, self.stats, self.paragraph_filter = 0, ReadStats(), self.options.paragraph_filter()
        for paragraph in read_paragraphs(self.corpus, self.options, self.stats, self.paragraph_filter):
            text = paragraph.text
            if LONG_WORD.search(text):
                for word in LONG_WORD.findall(text):
                    self.paragraph_filter.report.drop("long_words", word)
                text = LONG_WORD.sub(" ", text)
            self.words += len(text.split())
            yield text


def _first_chars(texts: Iterator[str], limit: int) -> Iterator[str]:
    """Texts from the front of `texts` until `limit` characters have passed."""
    size = 0
    for text in texts:
        yield text
        size += len(text)
        if size >= limit:
            return


def _in_thread(work):
    """`work()` run in a daemon thread while the main thread waits, able to take a signal: an interruption
    raises here at once (the thread is abandoned with the process), and the thread's own error is re-raised."""
    result: dict = {}

    def run() -> None:
        try:
            result["value"] = work()
        except BaseException as e:  # handed to the main thread
            result["error"] = e

    thread = threading.Thread(target=run, name="tokenizer-trainer", daemon=True)
    thread.start()
    while thread.is_alive():
        thread.join(WAIT_SECONDS)
    if "error" in result:
        raise result["error"]
    return result["value"]
