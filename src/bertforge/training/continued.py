"""Continued pre-training: a run that starts from a model directory's weights instead of random ones.

    bertforge pretrain --data domain_data --out run --init-from books_run --max-steps 2000

The starting model (a bertforge run or model directory, or a `transformers` BERT
or ModernBERT directory) fixes the architecture; the recipe and the flags say how
the run trains, dropout included (a model without segment embeddings trains MLM
alone, whatever the recipe's pair objective). Its tokenizer must be the one the data was prepared
with, or every token id would mean a different word. A `--seq-len` longer than its
position table grows the table, as BERT's second phase went on at 512 tokens.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tokenizers import Tokenizer

from ..errors import UserError
from ..model.config import ARCHITECTURE_FIELDS, ModelConfig
from ..model.directory import pretraining_info, read_config, resolve_model_dir
from ..model.hf import config_from_hf
from ..tokenizer import fingerprint, load_tokenizer
from .config import TrainConfig, recipe_configs
from .rundir import architecture_changes


def starting_config(init_from: str | Path) -> tuple[Path, ModelConfig]:
    """(model directory, its config) of a run or model directory."""
    try:
        directory = resolve_model_dir(init_from)
    except UserError as e:  # name the flag at fault in whatever resolve_model_dir found wrong
        raise UserError(f"--init-from {e}") from None
    if pretraining_info(directory).get("objective") == "electra":
        raise UserError(
            f"--init-from {init_from}: an ELECTRA discriminator has no masked-LM head to continue from; "
            "start from its generator, or from a BERT"
        )
    return directory, config_from_hf(read_config(directory), str(directory / "config.json"))


def continued_configs(
    recipe: str, init_from: str, model_values: dict[str, Any], train_values: dict[str, Any]
) -> tuple[ModelConfig, TrainConfig]:
    """The starting model's architecture with the recipe's (or the given) dropout; the recipe's training settings
    with the given ones on top. A given architecture setting must agree with the starting model."""
    _, start = starting_config(init_from)
    for name, value in model_values.items():
        if name in ARCHITECTURE_FIELDS and value != getattr(start, name):
            raise UserError(
                f"--{name.replace('_', '-')} {value}: the architecture comes from --init-from {init_from} "
                f"({name} {getattr(start, name)}); leave the flag out"
            )
    how_to_train = {name: value for name, value in model_values.items() if name not in ARCHITECTURE_FIELDS}
    if start.type_vocab_size == 0:  # no segments (a ModernBERT): no pair objective, whatever the recipe's
        train_values = {"pair_objective": "none", **train_values}
    recipe_model, train = recipe_configs(recipe, None, how_to_train, {**train_values, "init_from": init_from})
    # Longer sequences than the starting model's table grow it (BERT's second phase): the new rows learn here.
    positions = {"max_position_embeddings": max(start.max_position_embeddings, train.seq_len)}
    return ModelConfig(**{**recipe_model.to_dict(), **start.architecture(), **positions}), train


def check_start(init_from: str, model_config: ModelConfig, data_tokenizer: Tokenizer) -> tuple[Path, ModelConfig]:
    """The starting model's directory and config, after checking that the run's architecture (its position table
    may be longer) and tokenizer are its own."""
    directory, start = starting_config(init_from)
    if fingerprint(load_tokenizer(directory)) != fingerprint(data_tokenizer):
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
    return directory, start
