"""Shared fixtures: a small corpus written here and tokenizers trained on it (no downloads)."""

from __future__ import annotations

import random

import pytest

from bertforge.tokenizer import train_tokenizer

SUBJECTS = ["the cat", "the dog", "a bird", "my friend", "the teacher", "an old man", "the child", "her brother"]
VERBS = ["sat on", "looked at", "walked to", "painted", "found", "cleaned", "watched", "carried"]
OBJECTS = ["the mat", "the river bank", "the red house", "a small boat", "the garden", "the money", "a green chair", "the window"]


def make_documents(n_docs: int = 40, sentences: int = 8, seed: int = 0) -> list[list[str]]:
    """Documents of simple generated sentences: enough structure to learn, small enough to be fast."""
    rng = random.Random(seed)
    return [
        [f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)}." for _ in range(sentences)]
        for _ in range(n_docs)
    ]


def write_corpus(path, documents) -> None:
    """One sentence per line, a blank line between documents."""
    path.write_text("\n\n".join("\n".join(doc) for doc in documents) + "\n", encoding="utf-8")


@pytest.fixture(scope="session")
def documents():
    return make_documents()


@pytest.fixture(scope="session")
def wordpiece_tokenizer(documents):
    return train_tokenizer((s for doc in documents for s in doc), kind="wordpiece", vocab_size=120, min_frequency=1)


@pytest.fixture(scope="session")
def word_tokenizer(documents):
    return train_tokenizer((s for doc in documents for s in doc), kind="word", vocab_size=200, min_frequency=1)
