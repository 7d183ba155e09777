"""An exported model directory's layout, as `bertforge export` writes it and every reader of a directory knows it:

    directory/onnx/model.onnx   the graph (input_ids, attention_mask, token_type_ids where the model has segments in;
                                the head's outputs, named as `transformers`' ONNX exports name them)
    directory/config.json       the model's config, with what the export recorded under EXPORT_KEY

What the graph computes, how it is checked and how it is served is the serving unit's (serving/); this module
only tells an export from a model with weights, and reads what the export recorded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

GRAPH = Path("onnx") / "model.onnx"  # where sentence-transformers' ONNX backend and transformers.js look for it
EXPORT_KEY = "bertforge_export"  # config.json: how the graph was exported (inputs, outputs, quantisation, check)


def is_exported(directory: Path) -> bool:
    """A directory `bertforge export` wrote: config.json and the graph."""
    return (directory / "config.json").is_file() and (directory / GRAPH).is_file()


def export_facts(raw: dict[str, Any]) -> dict[str, Any]:
    """What the export recorded in config.json (`raw`): what the graph answers, its precision, its digest and its
    check against PyTorch; empty for a directory whose record is missing or not a table."""
    facts = raw.get(EXPORT_KEY)
    return facts if isinstance(facts, dict) else {}
