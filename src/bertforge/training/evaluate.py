"""`bertforge evaluate`: held-out MLM loss, accuracy and perplexity (and the pair head's accuracy) of models.

The batches are built once, with a fixed masking seed and BERT's standard 15%
masking, so evaluations of different runs on the same data compare like with like,
and several models given together are scored on the very same instances and masks.
A run's final model evaluated on the run's own data directory is evaluated as the
run evaluated itself (its seed, batch size, batches, length and masking), so the
figures are those of its last held-out line, not of other masks.
"""

from __future__ import annotations

import tempfile
import warnings
from pathlib import Path
from typing import Any

import torch

from ..data.directory import read_meta
from ..data.instances import fixed_batches, pretraining_dataset
from ..data.masking import MaskingCollator, MaskingConfig
from ..data.prepare import prepare
from ..display import Record
from ..engine.runtime import MixedPrecision, resolve_device, resolve_precision
from ..errors import UserError
from ..fileio import read_json
from ..labels import IGNORE_INDEX
from ..modelfiles.directory import load_model_and_tokenizer, resolve_model_dir
from ..modelfiles.origin import read_origin
from ..objectives import NO_PAIRS
from ..tokenizer import fingerprint, max_input_length, save_tokenizer
from .config import TrainConfig
from .metrics import evaluate_batches

EVAL_SEED = 1234
OWN_EVALUATION = ("seed", "batch_size", "eval_batches", "seq_len")  # the run's settings its evaluation repeats


def evaluate_model(model_path: str | Path, data: list[str], **settings: Any) -> Record:
    """Evaluate one model on a prepared data directory (its held-out split) or on raw text files
    (`evaluate_models`, with this model alone)."""
    return evaluate_models([model_path], data, **settings)[0]


def evaluate_models(
    model_paths: list[str | Path],
    data: list[str],
    batch_size: int | None = None,
    seq_len: int | None = None,
    max_batches: int | None = None,
    device: str = "cpu",
    precision: str = "fp32",
    seed: int | None = None,
    trust_pickle: bool = False,
    layout: str | None = None,
    document_mask: bool | None = None,
) -> list[Record]:
    """Evaluate models on identical instances with identical masks, built once: a start and its continuation, or
    two recipes, compare directly. Their tokenizer must be the same (the same text is other tokens otherwise).

    The instances are laid out for the first model's pair objective (sentence pairs for nsp/sop, full-length
    windows for none), or as `layout` says (a pair objective: nsp or sop pairs, none windows). A model with a pair
    head is scored on it where the instances are pairs. What is not given is the first model's run's own
    evaluation when `data` is its run's data directory (`own_evaluation`), else 50 batches of 32 sequences of 128
    tokens, masked with EVAL_SEED. Packed windows keep their documents apart where the first model was trained so
    (`document_mask` None: as its directory records).
    """
    own = own_evaluation(model_paths[0], data)
    batch_size = batch_size or own.get("batch_size", 32)
    seq_len = seq_len or own.get("seq_len", 128)
    max_batches = max_batches or own.get("eval_batches", 50)
    data_seed, mask_seed = (seed, seed) if seed is not None else own.get("seeds", (EVAL_SEED, EVAL_SEED))
    loaded = [load_model_and_tokenizer(path, trust_pickle=trust_pickle) for path in model_paths]
    for files, model, _ in loaded:
        if "mlm_head" in model.untrained_heads:  # its score would be a random head's, not the model's
            origin = read_origin(files)
            advice = (
                f"`bertforge pretrain --init-from {files.directory}` trains one (the encoder frozen at first), whose "
                "first held-out score is the encoder's as it was"
                if origin.encoder_only
                else "evaluate the pre-trained model it was fine-tuned from"
            )
            raise UserError(f"{origin.describes} has no masked-LM head to evaluate: {advice}")
    first, _, tokenizer = loaded[0]
    directory = first.directory
    for other, _, other_tokenizer in loaded[1:]:
        if fingerprint(other_tokenizer) != fingerprint(tokenizer):
            raise UserError(
                f"{other.directory} has another tokenizer than {directory}: the same text is other tokens to it, so "
                "the two cannot be scored on the same instances; evaluate each alone"
            )
    device = resolve_device(device)
    seq_len = min(
        seq_len, *(max_input_length(tokenizer, model.config.max_position_embeddings) for _, model, _ in loaded)
    )
    info = first.pretraining
    pair_objective = layout or info.get("pair_objective", "nsp")
    if document_mask is None:
        document_mask = bool(info.get("document_mask"))
    with tempfile.TemporaryDirectory() as scratch:
        data_dir, split = _data_split(data, tokenizer, directory, Path(scratch))
        dataset = pretraining_dataset(data_dir, split, seq_len, pair_objective, data_seed)
        if dataset.num_instances(0) == 0:
            raise UserError(f"{', '.join(data)}: too little text to build a single instance")
        masking = MaskingConfig.for_evaluation(seq_len, own.get("whole_word_mask", False))
        collator = MaskingCollator(tokenizer, masking, seed=mask_seed, document_ids=document_mask)
        batches = fixed_batches(dataset, collator, batch_size, max_batches)
    if not any(bool((batch["mlm_labels"] != IGNORE_INDEX).any()) for batch in batches):
        raise UserError(
            f"{', '.join(data)}: no token of it could be masked to score (too little text besides the "
            "special tokens); a loss or perplexity over zero tokens means nothing"
        )
    results = []
    for files, model, _ in loaded:
        scored = pair_objective if model.nsp_head is not None else NO_PAIRS  # a masked LM: MLM on the same pairs
        result = evaluate_batches(
            model.to(device), batches, MixedPrecision(device, resolve_precision(precision, device)), scored
        )
        model.cpu()
        result["unigram_baseline_acc"] = unigram_baseline(batches)
        result["pair_objective"] = scored
        result["model"] = str(files.directory)  # the model as the user named it: its directory
        results.append(Record(result))
    return results


def _data_split(data: list[str], tokenizer, directory: Path, scratch: Path) -> tuple[Path, str]:
    """(data directory, split) to evaluate on: a prepared directory's held-out split (its train split if it has
    none), or the raw text files prepared into `scratch` with the model's tokenizer."""
    if len(data) == 1 and (Path(data[0]) / "meta.json").is_file():
        data_dir = Path(data[0])
        meta = read_meta(data_dir)
        if meta["tokenizer_fingerprint"] != fingerprint(tokenizer):
            raise UserError(f"{data_dir} was prepared with a different tokenizer than {directory}'s")
        return data_dir, "valid" if meta["splits"]["valid"]["documents"] else "train"
    save_tokenizer(tokenizer, scratch / "tokenizer")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # one-document text is fine here
        prepare(data, scratch / "tokenizer", scratch / "data", valid_fraction=0.0, progress=False)
    return scratch / "data", "train"


def own_evaluation(model_path: str | Path, data: list[str]) -> dict[str, Any]:
    """How a run evaluated its held-out text during training, when `model_path` is that run (or its model/) and
    `data` its data directory: the trainer's seeds (the run's seed for the instances, the next for the masks),
    batch size, batch count, length and masking. {} for any other model or text."""
    try:
        model_dir = resolve_model_dir(model_path)
    except UserError:
        return {}  # loading the model says what is wrong
    run_config = model_dir.parent / "config.json"
    if model_dir.name != "model" or len(data) != 1 or not run_config.is_file():
        return {}
    run = read_json(run_config, "config")
    ran_on = run.get("data") if isinstance(run, dict) else None
    if not isinstance(ran_on, str) or not Path(ran_on).is_dir() or not Path(data[0]).is_dir():
        return {}
    if not Path(ran_on).samefile(data[0]):
        return {}
    train = run.get("train")
    lacking = [key for key in OWN_EVALUATION if not isinstance(train, dict) or key not in train]
    if lacking:
        raise UserError(
            f"{run_config}: the run's train settings lack {', '.join(lacking)}; its evaluation cannot be "
            "repeated on its data directory; evaluate the model on text files instead"
        )
    try:
        cfg = TrainConfig.from_dict(train)
    except UserError as e:
        raise UserError(f"{run_config}: {e}; the run's evaluation cannot be repeated on its data directory") from None
    return {
        "seeds": (cfg.seed, cfg.seed + 1),
        "batch_size": cfg.batch_size,
        "eval_batches": cfg.eval_batches,
        "seq_len": cfg.seq_len,
        "whole_word_mask": cfg.whole_word_mask,
    }


def unigram_baseline(batches: list[dict]) -> float:
    """Accuracy of always predicting the most frequent token: what MLM accuracy must beat to mean anything."""
    labels = torch.cat([b["mlm_labels"][b["mlm_labels"] != IGNORE_INDEX] for b in batches])
    if labels.numel() == 0:
        return 0.0
    return float(torch.bincount(labels).max()) / labels.numel()
