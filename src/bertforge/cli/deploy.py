"""Verbs that prepare a model for serving and serve it: `export`, `serve`."""

from __future__ import annotations

import argparse
import sys

from ..errors import UserError
from .flags import add_config_flags, add_verb, column_flags, config_values, output_flags, print_json


def cmd_export(args: argparse.Namespace) -> None:
    from ..formats.corpus import read_texts
    from ..serving.export import export_model

    texts, pairs = read_texts(args.check_data, args.text_column, args.pair_column) if args.check_data else (None, None)
    made = export_model(
        args.model,
        args.out,
        args.quantize,
        texts,
        pairs,
        args.overwrite,
        args.trust_pickle,
        args.accept_quality_loss,
        args.task,
    )
    if args.json:
        print_json({k: (str(v) if k == "out" else v) for k, v in vars(made).items()})
    else:
        print(made.summary(), file=sys.stderr)


def cmd_serve(args: argparse.Namespace) -> None:
    from ..service.config import ServeConfig

    try:
        from ..service.server import serve
    except ImportError as e:
        if e.name not in ("uvicorn", "starlette", "orjson"):
            raise
        raise UserError(
            "the service runs on uvicorn, starlette and orjson, which are not installed: pip install 'bertforge[serve]'"
        ) from None
    serve(args.model, ServeConfig(**config_values(args, ServeConfig)))


def register(verbs) -> None:
    p = add_verb(
        verbs,
        "export",
        cmd_export,
        "export a model to ONNX for serving with ONNX Runtime, checked against PyTorch (optionally int8)",
    )
    p.add_argument("model", help="run directory or model directory: any head, family or variant bertforge reads")
    p.add_argument("--format", choices=["onnx"], default="onnx", help="what to export to")
    p.add_argument(
        "--task",
        choices=["feature-extraction"],
        help="export the encoder alone, whatever the head (a masked LM's, a classifier's): its hidden states, for "
        "`embed` and `search` (default: what the model's head answers)",
    )
    p.add_argument("--out", required=True, help="directory for the graph (onnx/model.onnx), config, tokenizer, card")
    p.add_argument(
        "--quantize",
        choices=["int8"],
        help="dynamic int8 quantisation (int8 weights; activations quantised as they come): faster on CPUs, its cost "
        "said on --check-data",
    )
    p.add_argument(
        "--check-data",
        help="texts to check the export on (a line, a table row with --text-column, or a document's paragraph "
        "each; a pair classifier's pairs with --pair-column): the largest difference from PyTorch, and for int8 how "
        "often the answers agree; a seeded sample of 2,000 where the file holds more",
    )
    p.add_argument(
        "--accept-quality-loss",
        action="store_true",
        help="write an int8 graph even when it falls below the quality gate (vectors' median cosine to PyTorch's "
        "0.99, least 0.95; 95%% of answers the same), which otherwise refuses it",
    )
    column_flags(p, file_flag="--check-data")
    p.add_argument("--overwrite", action="store_true", help="replace the export already in --out")
    p.add_argument(
        "--trust-pickle",
        action="store_true",
        help="read a model that has only pytorch_model.bin (tensors alone are unpickled): for sources you trust",
    )
    output_flags(p, quiet=False)

    from ..service.config import ServeConfig

    p = add_verb(
        verbs,
        "serve",
        cmd_serve,
        "answer HTTP requests with a model or an export: OpenAI's /v1/embeddings, /embed, /rerank, /classify, /tag, "
        "/answer, /fill-mask, batched dynamically; /health, /metrics, /info (docs/serving.md)",
    )
    p.add_argument("model", help="run directory, model directory or `bertforge export` directory")
    add_config_flags(p, ServeConfig, keep_defaults=True)
