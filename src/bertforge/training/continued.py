"""Continued pre-training: a run that starts from a model directory's weights instead of random ones.

    bertforge pretrain --data domain_data --out run --init-from books_run --max-steps 2000

The starting model (a bertforge run or model directory, or a downloaded BERT, RoBERTa, XLM-RoBERTa, CamemBERT,
DistilBERT, ELECTRA generator or ModernBERT directory) fixes the architecture, its dropout (unless a flag gives
another) and its heads: a masked LM without a next-sentence head trains MLM alone, whatever the recipe's pair
objective, and is saved as a masked LM of its family again. The recipe and the flags say how the run trains.
Its tokenizer must be the one the data was prepared with, or every token id would mean a different word. A
`--seq-len` longer than its position table grows the table, as BERT's second phase went on at 512 tokens.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tokenizers import Tokenizer

from ..errors import UserError
from ..model.config import ARCHITECTURE_FIELDS, ModelConfig
from ..modelfiles.directory import ModelFiles, electra_generator, read_model_files
from ..modelfiles.origin import Origin
from ..objectives import NO_PAIRS, objective, pair_objective
from ..tokenizer import fingerprint, load_tokenizer
from .config import TrainConfig, recipe_configs
from .rundir import architecture_changes
from .schedule import Schedule


def starting_files(init_from: str | Path) -> ModelFiles:
    """The files of the run or model directory a run starts from, read once."""
    try:
        files = read_model_files(init_from)
    except UserError as e:  # name the flag at fault in whatever was found wrong
        raise UserError(f"--init-from {e}") from None
    if objective(files.pretraining.get("objective")).discriminator:
        raise UserError(
            f"--init-from {init_from}: an ELECTRA discriminator has no masked-LM head to continue from; start from "
            f"its generator ({electra_generator(files.directory, files.pretraining)}), or fine-tune the discriminator"
        )
    return files


def continued_configs(
    recipe: str, init_from: str, model_values: dict[str, Any], train_values: dict[str, Any]
) -> tuple[ModelConfig, TrainConfig]:
    """The starting model's architecture and dropout (or the given dropout); the recipe's training settings with
    the given ones on top, MLM alone for a start without a pair head. A given architecture setting must agree with
    the starting model."""
    files = starting_files(init_from)
    start = files.config
    for name, value in model_values.items():
        if name in ARCHITECTURE_FIELDS and value != getattr(start, name):
            raise UserError(
                f"--{name.replace('_', '-')} {value}: the architecture comes from --init-from {init_from} "
                f"({name} {getattr(start, name)}); leave the flag out"
            )
    how_to_train = {name: value for name, value in model_values.items() if name not in ARCHITECTURE_FIELDS}
    if start.type_vocab_size < 2 or not pair_objective(files.pretraining.get("pair_objective")).head:
        # No segments to tell apart (RoBERTa, DistilBERT, ModernBERT) or no pair head (a masked LM): MLM alone,
        # whatever the recipe's pair objective, and the model is saved as the masked LM it was.
        train_values = {"pair_objective": NO_PAIRS, **train_values}
    start_path = str(Path(init_from).absolute())  # recorded as it is wherever the run is looked at from
    recipe_model, train = recipe_configs(recipe, None, how_to_train, {**train_values, "init_from": start_path})
    # Longer sequences than the starting model's table grow it (BERT's second phase): the new rows learn here.
    positions = {"max_position_embeddings": max(start.max_position_embeddings, train.seq_len)}
    own_dropout = {"hidden_dropout": start.hidden_dropout, "attention_dropout": start.attention_dropout}
    values = {**recipe_model.to_dict(), **start.architecture(), **own_dropout, **how_to_train, **positions}
    return ModelConfig(**values), train


def check_start(init_from: str, model_config: ModelConfig, data_tokenizer: Tokenizer) -> ModelFiles:
    """The starting model's files, after checking that the run's architecture (its position table may be longer)
    and tokenizer are its own."""
    files = starting_files(init_from)
    directory, start = files.directory, files.config
    if fingerprint(load_tokenizer(directory, files.raw)) != fingerprint(data_tokenizer):
        raise UserError(
            f"--init-from {init_from}: the data was prepared with another tokenizer than this model's; "
            f"prepare your text with the model's: bertforge prepare TEXT --tokenizer {directory} --out DATA"
        )
    grown = {"max_position_embeddings": max(start.max_position_embeddings, model_config.max_position_embeddings)}
    changes = architecture_changes({**start.to_dict(), **grown}, model_config.to_dict())  # a longer table may grow
    if changes:
        raise UserError(
            f"--init-from {init_from}: a continued run keeps the starting model's architecture, "
            f"this one changes {'; '.join(changes)}"
        )
    return files


def start_described(
    start: ModelFiles, origin: Origin, model, model_config: ModelConfig, cfg: TrainConfig, schedule: Schedule
) -> list[str]:
    """What a continued run says it does with its starting model beyond taking its weights."""
    said = [schedule.announce(origin.describes)] if schedule.head_steps else []
    task_head = getattr(model, "task_head", None)
    if task_head is not None:
        labels = task_head.config.get("id2label")
        named = f" and its labels ({', '.join(map(str, labels.values()))[:80]})" if isinstance(labels, dict) else ""
        said.append(
            f"the model is saved as {origin.architecture} again, its task's head{named} as they were; the encoder "
            "under it changes here, so fine-tune it again before trusting its answers"
        )
    if origin.encoder_only:
        kept = " and its pooler" if model.bert.pooler is not None else ""
        modules = " and its sentence-transformers modules" if origin.sentence is not None else ""
        said.append(f"the model is saved as {origin.architecture or 'an encoder'} again{kept}{modules}")
    if not cfg.pair_task.head and pair_objective(start.pretraining.get("pair_objective")).head:
        said.append(
            "this run trains the masked LM alone: the model is saved without the starting model's "
            "next-sentence head and pooler, as a masked LM (--pair-objective nsp trains them on)"
        )
    known = start.config.max_position_embeddings
    if known < model_config.max_position_embeddings:
        said.append(
            f"positions {known} to {model_config.max_position_embeddings - 1} are new to the model: "
            f"it learns them here, on {cfg.seq_len}-token sequences"
        )
    return said
