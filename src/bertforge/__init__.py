"""bertforge: BERT pre-training from scratch (masked LM + next sentence prediction).

The package is in layers, each a folder that imports only from the layers below it (docs/architecture.md):

    errors, fileio, config, ...   foundations: the user-error type, atomic writes, typed configs, the one
                                  registry of records by name, tokenizers
    families/                     the Hugging Face model families, one record each: the home of their facts
    formats/                      reading documents from every input format (no torch)
    data/                         prepare, the data directory, pre-training instances, masking
    model/                        the network, its heads and variants; it reads and writes no file
    engine/                       devices, precision, processes, optimizer, checkpoints, metrics log
    modelfiles/                   model directories read through one boundary and written whole; Hugging Face
                                  layouts, cards, sentence-transformers modules, the ONNX export and served exports
    training/                     the pre-training loop, its configs and recipes, evaluation
    tasks/                        the fine-tuning loop and a module per task
    inference, plots              the answers, the figures
    studies/                      sweeps, downstream scores, replicates, the demo
    cli/                          the command line

The public names are imported on first use, so commands that never touch the
network (tokenizer training, prepare) start without loading torch.
"""

from importlib import import_module

_EXPORTS = {
    "ModelConfig": "model.config",
    "TrainConfig": "training.config",
    "FinetuneConfig": "tasks.config",
    "UserError": "errors",
    "Bert": "inference",
    "load": "inference",
    "BertForPreTraining": "model.bert",
    "BertForSequenceClassification": "model.heads",
    "BertModel": "model.bert",
    "load_model": "modelfiles.directory",
    "save_model": "modelfiles.directory",
    "pretrain": "training.trainer",
    "plan_run": "training.plan",
    "finetune": "tasks.finetune",
    "register_task": "tasks.registry",
    "Task": "tasks.registry",
    # what fine-tuned models answer, and the columns that say where finetune's labelled data is
    "Classifier": "tasks.classification",
    "Columns": "tasks.classification",
    "Tagger": "tasks.tagging",
    "TagColumns": "tasks.tagging",
    "Answerer": "tasks.qa",
    "Chooser": "tasks.multiple_choice",
    "ChoiceColumns": "tasks.multiple_choice",
    # the texts of any input format: a corpus's paragraphs, and what the inference commands and search read
    "read_paragraphs": "formats.corpus",
    "read_texts": "formats.corpus",
    "read_passages": "formats.corpus",
    "read_document": "formats.corpus",
    "read_documents": "formats.corpus",
    # the workflow's steps, as the command line takes them
    "train_corpus_tokenizer": "data.vocabulary",
    "prepare": "data.prepare",
    "read_metrics": "engine.metrics",
}
__all__ = sorted(_EXPORTS)
__version__ = "0.1.0"


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module 'bertforge' has no attribute {name!r}")
