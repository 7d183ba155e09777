"""`tokenizer extend`: a model's vocabulary grown by the words of a domain that its tokenizer cuts into the most
pieces, before continuing its pre-training on that domain.

    bertforge tokenizer extend bert-base-uncased tweets/ --add 1000 --out bert-tweets
    bertforge prepare tweets/ --tokenizer bert-tweets --out data
    bertforge pretrain --data data --out run --init-from bert-tweets

A word costs the model one position per piece, and a piece like `##vid` means little alone: the words whose pieces
cost the corpus most (occurrences × extra pieces) become whole tokens, each starting at the mean of the pieces it
replaces (`model.vocabulary`). The rest of the text is cut as before, but where a new word begins a longer one
and the tokenizer matches the longest piece first (WordPiece: `tuesdays` becomes `tuesday ##s`); how many words
that re-cuts is reported. A BPE tokenizer takes only a whole word whole, so it re-cuts none.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..data.vocabulary import CorpusTexts
from ..errors import UserError
from ..fileio import check_not_inputs, check_output_dir
from ..formats.corpus import readable_files
from ..formats.options import CorpusOptions
from ..model.vocabulary import with_new_tokens
from ..modelfiles.directory import (
    PRETRAINING_KEY,
    is_model_dir,
    load_model_and_tokenizer,
    read_model_files,
    save_model,
)
from ..modelfiles.heads import read_task_head
from ..modelfiles.origin import read_origin
from ..tokenizer import count_words, special_ids, special_tokens, token_text, with_words, word_pieces


@dataclass
class Extension:
    """What `extend_vocabulary` added, and what it changed on the corpus."""

    added: list[tuple[str, int, int]]  # (word as text, occurrences, pieces it was cut into), most costly first
    words: int  # word occurrences in the corpus
    pieces_before: int  # pieces the corpus's words were cut into before
    pieces_after: int  # and after
    others_changed: int  # distinct words other than the added ones now cut differently (WordPiece: at a new word)
    out: Path
    new_head: bool = False  # the model had no masked-LM head (a released encoder): none was saved
    origin: str = ""  # the model extended, as messages name it

    def summary(self) -> str:
        shown = ", ".join(f"{word} ({pieces} pieces x {count:,})" for word, count, pieces in self.added[:8])
        changed = f"; {self.others_changed:,} other words are cut differently" if self.others_changed else ""
        head = (
            f"; {self.origin} has no masked-LM head, and none is saved: `bertforge pretrain --init-from {self.out}` "
            "trains one, the encoder frozen at first"
            if self.new_head
            else ""
        )
        return (
            f"added {len(self.added):,} words as tokens ({shown}{', ...' if len(self.added) > 8 else ''}): "
            f"pieces per word on the corpus {self.pieces_before / max(self.words, 1):.3f} -> "
            f"{self.pieces_after / max(self.words, 1):.3f} over {self.words:,} words{changed} -> {self.out}{head}"
        )


def extend_vocabulary(
    model_path: str | Path,
    corpus: Sequence[str | Path],
    out: str | Path,
    add: int,
    min_frequency: int = 2,
    options: CorpusOptions | None = None,
    overwrite: bool = False,
    trust_pickle: bool = False,
) -> Extension:
    """Write into OUT the model of `model_path` with the `add` words of `corpus` that cost it most as whole tokens
    (words seen fewer than `min_frequency` times are left out)."""
    if add < 1:
        raise UserError(f"--add {add}: add at least one word")
    files = readable_files(corpus)  # before anything is read or written
    out = Path(out)
    model_files = read_model_files(model_path)
    check_not_inputs({"--out": out}, {"MODEL": model_files.directory, "CORPUS": files})
    check_output_dir(out, overwrite, "a model directory", out.is_dir() and is_model_dir(out))
    _, model, tokenizer = load_model_and_tokenizer(model_files, trust_pickle=trust_pickle)
    counts = count_words(tokenizer, CorpusTexts(corpus, options or CorpusOptions()))
    if not counts:
        raise UserError(f"{', '.join(map(str, corpus))}: no words to count")
    before = {word: word_pieces(tokenizer, word) for word in counts}
    specials = [text for text in special_tokens(tokenizer).values()]
    costs = [
        (count * (len(pieces) - 1), word)
        for word, pieces in before.items()
        if len(pieces) > 1 and (count := counts[word]) >= min_frequency and not any(s in word for s in specials)
    ]  # a word holding a special token's text ("cat<mask>dog") is never one token: the special one is cut out first
    chosen = [word for _, word in sorted(costs, key=lambda cost: (-cost[0], cost[1]))[:add]]
    if not chosen:
        raise UserError(_nothing_to_add(tokenizer, before, counts, min_frequency))
    extended, ids = with_words(tokenizer, chosen)
    after = {word: word_pieces(extended, word) for word in counts}
    unk = special_ids(tokenizer).unk  # a piece the vocabulary has no entry for (a character it lacks) is [UNK]
    pieces = {i: [_id(tokenizer, piece, unk) for piece in before[word]] for word, i in zip(chosen, ids)}
    grown = with_new_tokens(model, pieces)
    grown.task_head = read_task_head(model_files, trust_pickle)  # a classifier goes back out as one, labels and all
    facts = {"vocabulary_extended": {"from": str(model_files.directory.absolute()), "words": len(chosen)}}
    origin = read_origin(model_files)
    origin.check_computable()
    save_model(grown, out, extended, {PRETRAINING_KEY: {**model_files.pretraining, **facts}}, facts, origin)
    new = set(chosen)
    return Extension(
        added=[(token_text(extended, i), counts[w], len(before[w])) for w, i in zip(chosen, ids)],
        words=sum(counts.values()),
        pieces_before=sum(counts[w] * len(p) for w, p in before.items()),
        pieces_after=sum(counts[w] * len(p) for w, p in after.items()),
        others_changed=sum(1 for w in counts if w not in new and after[w] != before[w]),
        out=out,
        new_head="mlm_head" in model.untrained_heads,
        origin=origin.describes,
    )


def _id(tokenizer, piece: str, unk: int) -> int:
    found = tokenizer.token_to_id(piece)
    return unk if found is None else found


def _nothing_to_add(tokenizer, before: dict[str, list[str]], counts, min_frequency: int) -> str:
    """Why no word was chosen: the words are whole already, or the tokenizer cannot spell them at all."""
    unk = special_tokens(tokenizer)["unk"]
    unknown = sum(counts[w] for w, pieces in before.items() if pieces == [unk])
    if unknown * 2 > sum(counts.values()):
        return (
            f"{unknown:,} of the corpus's {sum(counts.values()):,} words are {unk} to this tokenizer (their characters "
            "are not in its vocabulary: another script?); adding words cannot teach it characters: use a model "
            "whose tokenizer covers the text"
        )
    return (
        f"no word seen {min_frequency} times or more is cut into several pieces: the tokenizer already has this "
        "corpus's words"
    )
