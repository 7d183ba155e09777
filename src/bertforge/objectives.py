"""What pre-training asks the model to learn: one record per objective, asked by the data builder, the trainer, the
config, the model card and the command line, so that no module compares an objective's name.

    PAIR_OBJECTIVES.get("nsp")   next sentence prediction (BERT): B follows A half the time, else another document's
    PAIR_OBJECTIVES.get("sop")   sentence-order prediction (ALBERT): A and B in order, or swapped half the time
    PAIR_OBJECTIVES.get("none")  no pair task: packed windows, MLM alone (RoBERTa)
    OBJECTIVES.get("mlm")        masked language modelling (BERT)
    OBJECTIVES.get("electra")    replaced-token detection: a small generator fills the masks, a discriminator
                                 judges every token (Clark et al. 2020)

Records are data (torch-free, as the data directory's code is); the behaviour they choose lives where it runs:
instances (data/instances.py), heads (model/), losses and metrics (training/).
"""

from __future__ import annotations

from dataclasses import dataclass

from .registry import Registry


@dataclass(frozen=True)
class PairObjective:
    """A task on the pair [CLS] A [SEP] B [SEP], learned by a two-way head on [CLS] (label 0: `labels[0]`).

    head              a pair head trains: instances are pairs (False: packed windows, MLM alone)
    random_next_prob  how often B comes from another document (NSP's NotNext)
    swap_prob         how often A and B trade places (SOP's Swapped)
    labels            what labels 0 and 1 say, as `data show` and `nsp` print them
    probability       what `nsp` names the probability of label 0
    """

    name: str
    summary: str
    head: bool
    random_next_prob: float = 0.0
    swap_prob: float = 0.0
    labels: tuple[str, str] = ("", "")
    probability: str = ""

    @property
    def draws_other_documents(self) -> bool:
        """B may come from another document: a one-document corpus then draws it from a distant part."""
        return self.random_next_prob > 0


@dataclass(frozen=True)
class Objective:
    """What the tokens teach.

    discriminator  ELECTRA's: a generator and a discriminator train together, and the model saved is the
                   discriminator (a masked LM is its generator)
    pairs          it takes a pair objective beside it
    """

    name: str
    summary: str
    discriminator: bool = False
    pairs: bool = True


PAIR_OBJECTIVES: Registry[PairObjective] = Registry("pair objective", PairObjective)
for built_in in (
    PairObjective("nsp", "next sentence prediction: B is A's true continuation or another document's text", True,
                  random_next_prob=0.5, labels=("IsNext", "NotNext"), probability="is_next_prob"),
    PairObjective("sop", "sentence-order prediction: A and B in order or swapped", True, swap_prob=0.5,
                  labels=("InOrder", "Swapped"), probability="in_order_prob"),
    PairObjective("none", "no pair task: packed windows of the corpus, MLM alone", False),
):  # fmt: skip
    PAIR_OBJECTIVES.register(built_in)

OBJECTIVES: Registry[Objective] = Registry("objective", Objective)
for built_in in (
    Objective("mlm", "masked language modelling"),
    Objective("electra", "replaced-token detection with a generator", discriminator=True, pairs=False),
):
    OBJECTIVES.register(built_in)

NO_PAIRS = PAIR_OBJECTIVES.get("none").name  # a run without a pair task, and a record without one


def pair_objective(name: str | None) -> PairObjective:
    """The record of a pair objective by name; a model that recorded none trained no pair head."""
    return PAIR_OBJECTIVES.get(name or NO_PAIRS)


def objective(name: str | None) -> Objective:
    """The record of an objective by name; a model that recorded none learned by masked language modelling."""
    return OBJECTIVES.get(name or "mlm")
