"""What a pre-training run reads, checked together before anything is written: the data directory and its
tokenizer, the model to start from, the model's config and the run's settings."""

from __future__ import annotations

from pathlib import Path

from tokenizers import Tokenizer

from ..data.directory import SPLITS, check_split, read_meta
from ..errors import UserError
from ..model.config import ModelConfig
from ..modelfiles.directory import ModelFiles
from ..modelfiles.vocabulary import check_vocab
from ..tokenizer import fingerprint, load_tokenizer
from .config import TrainConfig
from .continued import check_start


def check_data(
    data_dir: Path, model_config: ModelConfig, cfg: TrainConfig, init_from: str = ""
) -> tuple[Tokenizer, ModelFiles | None]:
    """The data directory's tokenizer and the files of the model to start from (None: new weights), after checking
    that data, starting model, model and settings fit together."""
    meta = read_meta(data_dir)
    tokenizer = load_tokenizer(data_dir)  # a data directory carries its tokenizer.json
    if fingerprint(tokenizer) != meta["tokenizer_fingerprint"]:
        raise UserError(f"{data_dir}: tokenizer.json does not match the one the data was prepared with")
    for split in SPLITS:
        check_split(data_dir, split, tokenizer.get_vocab_size())
    start = check_start(init_from, model_config, tokenizer) if init_from else None
    if start is not None:  # a released model's table may have rows past its tokenizer's ids (ModernBERT's)
        check_vocab(
            tokenizer, model_config.vocab_size, f"--init-from {init_from}", model_config.type_vocab_size, predicts=True
        )
    elif model_config.vocab_size != meta["vocab_size"]:
        raise UserError(
            f"model vocab_size {model_config.vocab_size} does not match the data's tokenizer "
            f"({meta['vocab_size']} tokens)"
        )
    if cfg.seq_len > model_config.max_position_embeddings:
        raise UserError(
            f"--seq-len {cfg.seq_len} exceeds the position table "
            f"(max_position_embeddings {model_config.max_position_embeddings})"
        )
    if cfg.time_budget and cfg.warmup >= 1:
        raise UserError("with --time-budget, give --warmup as a fraction of the budget (< 1)")
    if cfg.pair_task.head and model_config.type_vocab_size < 2:
        raise UserError(
            f"--pair-objective {cfg.pair_objective} tells segment A from B: it needs --type-vocab-size 2, "
            f"not {model_config.type_vocab_size}"
        )
    return tokenizer, start
