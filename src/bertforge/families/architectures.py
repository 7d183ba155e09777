"""The classes a model is saved as, one `Architecture` record each: every fact of a saved head class in one place.

    ARCHITECTURES.get("BertForTokenClassification")   what it answers, its `transformers` class in each family
                                                      ({prefix}ForTokenClassification), the Auto class and the Hub's
                                                      pipeline that load it, the modules that are its head, its
                                                      exported graph's outputs and axes, the card's usage line

The model card, the HF mapping (modelfiles/hf.py), a family's class names, the export and serving ask the record;
none keeps a table of its own. A head of your own is its class (in your code, or model/heads.py), its record
registered here, and, for fine-tuning, its task: `docs/architecture.md` walks through one, and a test runs it.
Records are data and torch-free: the class that computes one is named as "module:Class", imported on first use.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import UserError
from ..registry import Registry, resolve

# What an exported graph answers: the kinds of optimum's ORTModel classes.
MASKED_LM = "masked-lm"
SEQUENCE = "sequence-classification"
TOKENS = "token-classification"
SPANS = "question-answering"
CHOICE = "multiple-choice"
ENCODER = "feature-extraction"

BATCH, LENGTH, CHOICES = "batch_size", "sequence_length", "num_choices"  # the graph's dynamic axes


@dataclass(frozen=True)
class Architecture:
    """One class a model is saved as.

    name          ours, as a model reports it (`hf_architecture`): "BertForSequenceClassification"
    suffix        `transformers`' class name less the family's prefix: "ForSequenceClassification" (Roberta...)
    model         the class that computes it, "module:Class" (bertforge's) or the class itself (yours)
    answers       what its exported graph answers (MASKED_LM, SEQUENCE, ...)
    pipeline_tag  the Hub's pipeline for it, in the card's front matter
    loads_with    the Auto class the card tells a user to load it with
    auto_classes  the Auto classes whose class in a family this is (config.json's auto_map, for remote code)
    heads         our modules that are its head, not the encoder: fresh where a directory lacks them
    outputs       its graph's outputs by name, each with its dynamic axes
    inputs_axes   the axes of its graph's inputs
    usage         the card's bertforge command, DIR the directory
    title         the card's title, where the class says more than its task does
    """

    name: str
    suffix: str
    model: str | type
    answers: str
    pipeline_tag: str
    loads_with: str
    auto_classes: tuple[str, ...] = ()
    heads: tuple[str, ...] = ()
    outputs: dict[str, tuple[str, ...]] = field(default_factory=lambda: {"logits": (BATCH,)})
    inputs_axes: tuple[str, ...] = (BATCH, LENGTH)
    usage: str = "bertforge embed DIR --input texts.txt --out vectors.npy"
    title: str = ""

    def model_class(self):
        """The class that computes it (imported on first use)."""
        return resolve(self.model)

    @property
    def task_head(self) -> bool:
        """Whether a fine-tuned task's head answers (neither a masked LM nor an encoder): a continued or extended
        model keeps it, and goes back out as its class."""
        return self.answers not in (MASKED_LM, ENCODER)

    @property
    def labelled(self) -> bool:
        """Whether its head answers with config.json's labels (a sequence's, or each token's)."""
        return self.answers in (SEQUENCE, TOKENS)


ENCODER_MODULE = "bert"  # every class's encoder, whose weights no head may claim
ENCODER_HEADS = ("bert.pooler",)  # the one module under it that is a head's: sequence heads read [CLS] through it


def check_architecture(record: Architecture, registry: Registry) -> None:
    """A record that would not work, or would misdirect every load, is refused when registered: a suffix
    `transformers` names classes with, at least one output, each output's axes and the inputs' axes as names, and
    heads that are modules of their own. A head names weights that start fresh where a directory lacks them and that
    a new task drops: a head of `bert` (the encoder) would start every model's encoder fresh without a word."""
    name = f"architecture {record.name!r}"
    if not isinstance(record.suffix, str) or not (record.suffix == "Model" or record.suffix.startswith("For")):
        raise UserError(f"{name}: suffix {record.suffix!r} is 'Model' or 'For...'")
    outputs = record.outputs
    if not isinstance(outputs, dict) or not outputs or not all(_names(axes) for axes in outputs.values()):
        raise UserError(f"{name}: outputs name each output's axes, as a tuple of names")
    if not all(isinstance(output, str) and output.isidentifier() for output in outputs):
        raise UserError(f"{name}: each output is named by an identifier")
    if not _names(record.inputs_axes):
        raise UserError(f"{name}: inputs_axes name the inputs' axes, as a tuple of names")
    if not isinstance(record.heads, tuple) or not all(isinstance(head, str) and head for head in record.heads):
        raise UserError(f"{name}: heads name its head modules, as a tuple of names")
    for head in record.heads:
        if head not in ENCODER_HEADS and (head == ENCODER_MODULE or head.startswith(ENCODER_MODULE + ".")):
            raise UserError(f"{name}: head {head!r} names the encoder's own weights, which no head may claim")


def _names(axes) -> bool:
    return isinstance(axes, tuple) and all(isinstance(axis, str) and axis.isidentifier() for axis in axes)


ARCHITECTURES: Registry[Architecture] = Registry("architecture", Architecture, check_architecture)

MASKED_LM_USE = 'bertforge fill-mask DIR "The capital of France is [MASK]."'
PER_TOKEN = {"logits": (BATCH, LENGTH)}

for built_in in (
    Architecture(
        "BertForPreTraining", "ForMaskedLM", "bertforge.model.bert:BertForPreTraining", MASKED_LM, "fill-mask",
        "AutoModelForMaskedLM", ("AutoModelForPreTraining",), ("mlm_head", "nsp_head"), PER_TOKEN,
        usage=MASKED_LM_USE,
    ),
    Architecture(
        "BertForMaskedLM", "ForMaskedLM", "bertforge.model.bert:BertForPreTraining", MASKED_LM, "fill-mask",
        "AutoModelForMaskedLM", ("AutoModelForMaskedLM",), ("mlm_head",), PER_TOKEN, usage=MASKED_LM_USE,
    ),
    Architecture(
        "BertForSequenceClassification", "ForSequenceClassification",
        "bertforge.model.heads:BertForSequenceClassification", SEQUENCE, "text-classification",
        "AutoModelForSequenceClassification", ("AutoModelForSequenceClassification",),
        ("classifier", "head", "bert.pooler"), usage='bertforge classify DIR "a text to label"',
    ),
    Architecture(
        "BertForTokenClassification", "ForTokenClassification", "bertforge.model.heads:BertForTokenClassification",
        TOKENS, "token-classification", "AutoModelForTokenClassification", ("AutoModelForTokenClassification",),
        ("classifier", "head"), PER_TOKEN, usage='bertforge tag DIR "Alice flew to Paris."',
    ),
    Architecture(
        "BertForQuestionAnswering", "ForQuestionAnswering", "bertforge.model.heads:BertForQuestionAnswering", SPANS,
        "question-answering", "AutoModelForQuestionAnswering", ("AutoModelForQuestionAnswering",),
        ("qa_outputs", "head"), {"start_logits": (BATCH, LENGTH), "end_logits": (BATCH, LENGTH)},
        usage='bertforge answer DIR --question "Who flew?" --context "Alice flew to Paris."',
    ),
    Architecture(
        "BertForMultipleChoice", "ForMultipleChoice", "bertforge.model.heads:BertForMultipleChoice", CHOICE,
        "multiple-choice", "AutoModelForMultipleChoice", ("AutoModelForMultipleChoice",),
        ("classifier", "head", "bert.pooler"), {"logits": (BATCH, CHOICES)}, (BATCH, CHOICES, LENGTH),
        usage="bertforge choose DIR --input questions.jsonl --text-column question --choice-columns choices",
    ),
    Architecture(  # ELECTRA's discriminator; saved in a family without one as its bare encoder
        "BertForReplacedTokenDetection", "Model", "bertforge.model.electra:BertForReplacedTokenDetection", ENCODER,
        "feature-extraction", "AutoModel", (), ("rtd_head",), {"last_hidden_state": (BATCH, LENGTH)},
        usage="bertforge finetune DIR --task classification --train train.tsv ...",
        title="An ELECTRA discriminator pre-trained with bertforge",
    ),
    Architecture(  # the encoder alone, pooled; a sentence-transformers model beside it where it has modules
        "BertForSentenceEmbedding", "Model", "bertforge.model.heads:BertForSentenceEmbedding", ENCODER,
        "sentence-similarity", "AutoModel", (), (), {"last_hidden_state": (BATCH, LENGTH)},
        usage='bertforge search DIR "a query" --corpus texts.txt',
    ),
    Architecture(  # a released headless encoder (BertModel, RobertaModel, ...) goes back out as one
        "BertModel", "Model", "bertforge.model.bert:BertForPreTraining", ENCODER, "feature-extraction", "AutoModel",
        ("AutoModel",), ("bert.pooler",), {"last_hidden_state": (BATCH, LENGTH)},
    ),
):  # fmt: skip
    ARCHITECTURES.register(built_in)


def head_prefixes() -> tuple[str, ...]:
    """Our parameter-name prefixes that belong to a head of some architecture, not to the encoder."""
    return tuple(dict.fromkeys(f"{head}." for record in ARCHITECTURES.records() for head in record.heads))
