"""Where a model came from, and what it goes back out with (design.md: a model comes back as itself).

A model read from a directory and saved again (continued pre-training, an extended vocabulary, a fine-tuning)
keeps what the directory had beyond the weights bertforge trains:
  - the class it was saved as where that was its family's bare encoder (BertModel, RobertaModel, ...): a headless
    encoder stays one, its pooler kept, and a masked-LM head trained here travels beside it;
  - its sentence-transformers modules (pooling, Normalize, ...), so that `SentenceTransformer` loads the same
    pipeline;
  - its model card, with a section added on what bertforge did.

    origin = read_origin(directory)
    save_model(model, out, tokenizer, extra, facts, origin=origin)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..fileio import FILE_LIMITS, read_bounded
from .card import CARD
from .directory import holds_pooler, pretraining_heads, read_config, weight_names
from .families import family_of
from .hf import config_from_hf
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

    @property
    def describes(self) -> str:
        """The directory as messages name it: `path (BertModel)`."""
        return f"{self.directory} ({self.architecture})" if self.architecture else str(self.directory)


def read_origin(directory: Path) -> Origin:
    """What `directory` (a model directory) holds beyond its encoder's weights."""
    raw = read_config(directory)
    config = config_from_hf(raw, str(directory / "config.json"))
    family = family_of(config)
    architectures = raw.get("architectures")
    architecture = architectures[0] if isinstance(architectures, list) and architectures else ""
    architecture = architecture if isinstance(architecture, str) else ""
    heads = frozenset(pretraining_heads(directory, config))
    names = weight_names(directory)
    pooler = names is not None and holds_pooler(names, config)
    base = family.architectures.get("BertModel")
    encoder_only = architecture == base or (not architecture and "mlm" not in heads)
    card_path = directory / CARD
    card = None
    if card_path.is_file() and card_path.stat().st_size <= FILE_LIMITS["card"]:  # a longer one is not carried
        card = read_bounded(card_path, "card").decode("utf-8", errors="replace")
        card = None if _written_by_bertforge(card) else card  # ours is written afresh from the facts
    fine_tuned = FINETUNE_KEY in raw
    return Origin(directory, architecture, encoder_only, heads, pooler, fine_tuned, card, read_pipeline(directory))


def _written_by_bertforge(card: str) -> bool:
    """Whether a card is one bertforge wrote whole (card.py's, tagged "bertforge" in its front matter), not a
    released model's."""
    front = card.split("\n---", 1)[0] if card.startswith("---") else ""
    return any(line.startswith("tags:") and '"bertforge"' in line for line in front.splitlines())
