"""bertforge: BERT pre-training from scratch (masked LM + next sentence prediction).

The public names are imported on first use, so commands that never touch the
network (tokenizer training, prepare) start without loading torch.
"""

from importlib import import_module

_EXPORTS = {
    "ModelConfig": "config",
    "TrainConfig": "config",
    "FinetuneConfig": "config",
    "UserError": "errors",
    "Bert": "inference",
    "load": "inference",
    "BertForPreTraining": "model",
    "BertForSequenceClassification": "model",
    "BertModel": "model",
    "load_model": "modeldir",
    "save_model": "modeldir",
    "pretrain": "train",
    "finetune": "finetuning",
    "register_task": "finetuning",
    "Task": "finetuning",
    # what fine-tuned models answer, and the columns that say where finetune's labelled data is
    "Classifier": "classification",
    "Columns": "classification",
    "Tagger": "tagging",
    "TagColumns": "tagging",
    "Answerer": "qa",
    "Chooser": "multiple_choice",
    "ChoiceColumns": "multiple_choice",
    # the texts of any input format, as the inference commands and search read them; a text per file
    "read_texts": "corpus",
    "read_passages": "corpus",
    "read_document": "corpus",
    "read_documents": "corpus",
}
__all__ = sorted(_EXPORTS)
__version__ = "0.1.0"


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module 'bertforge' has no attribute {name!r}")
