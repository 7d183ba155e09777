"""Where a model came from, and what it goes back out with (design.md: a model comes back as itself).

A model read from a directory and saved again (continued pre-training, an extended vocabulary, a fine-tuning)
keeps what the directory had beyond the weights bertforge trains:
  - the class it was saved as where that was its family's bare encoder (BertModel, RobertaModel, ...): a headless
    encoder stays one, its pooler kept, and a masked-LM head trained here travels beside it;
  - its sentence-transformers modules (pooling, Normalize, ...), so that `SentenceTransformer` loads the same
    pipeline;
  - its model card, with a section added on what bertforge did.

    origin = read_origin(read_model_files(directory))
    save_model(model, out, tokenizer, extra, facts, origin=origin)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..fileio import FILE_LIMITS, read_bounded
from .card import CARD
from .directory import ModelFiles
from .sentence import SentencePipeline, read_pipeline

FINETUNE_KEY = "bertforge_finetune"  # config.json's record of a fine-tuning (tasks/finetune.py writes it)


@dataclass(frozen=True)
class Origin:
    """What a model directory holds that a model saved from it carries back."""

    directory: Path
    architecture: str  # the class config.json names, as its family names it ("" where it names none)
    encoder_only: bool  # saved as its family's bare encoder: it goes back out as one
    heads: frozenset[str]  # the pre-training heads its weights hold: "mlm", "nsp"
    pooler: bool  # its weights hold a pooler (BertModel's dense + tanh on [CLS])
    fine_tuned: bool  # bertforge fine-tuned it for a task: it kept only that task's head
    card: str | None  # its README.md
    sentence: SentencePipeline | None  # its sentence-transformers modules

    def check_computable(self) -> None:
        """The one check of what bertforge computes, which every verb that serves a model's vectors or saves its
        modules back beside weights it changed asks (embed, search, export, finetune, pretrain --init-from,
        tokenizer extend): a module it does not compute (a Dense layer after pooling) is refused in one line, so
        that no verb writes or serves other vectors than sentence-transformers would."""
        if self.sentence is not None:
            self.sentence.check_computable(str(self.directory))

    @property
    def describes(self) -> str:
        """The directory as messages name it: `path (BertModel)`."""
        return f"{self.directory} ({self.architecture})" if self.architecture else str(self.directory)


def read_origin(files: ModelFiles) -> Origin:
    """What a model directory (its files as `read_model_files` read them) holds beyond its encoder's weights: the
    card and the sentence-transformers modules are read here, the rest is the files' record."""
    base = files.family.hf_architecture("BertModel")
    encoder_only = files.architecture == base or (not files.architecture and "mlm" not in files.heads)
    card_path = files.directory / CARD
    card = None
    if card_path.is_file() and card_path.stat().st_size <= FILE_LIMITS["card"]:  # a longer one is not carried
        card = read_bounded(card_path, "card").decode("utf-8", errors="replace")
        card = None if _written_by_bertforge(card) else card  # ours is written afresh from the facts
    return Origin(
        files.directory,
        files.architecture,
        encoder_only,
        files.heads,
        files.pooler,
        FINETUNE_KEY in files.raw,
        card,
        read_pipeline(files.directory),
    )


def _written_by_bertforge(card: str) -> bool:
    """Whether a card is one bertforge wrote whole (card.py's, tagged "bertforge" in its front matter), not a
    released model's."""
    front = card.split("\n---", 1)[0] if card.startswith("---") else ""
    return any(line.startswith("tags:") and '"bertforge"' in line for line in front.splitlines())
