"""Verbs that train and look at pre-training: `pretrain`, `subclone`, `sweep`, `evaluate`, `plot`, `demo`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..errors import UserError
from ..model.config import PRESETS, ModelConfig
from ..objectives import pair_objective
from ..training.config import DEFAULT_RECIPE, RECIPES, TrainConfig, recipe_configs
from .flags import (
    POSITIVE,
    add_config_flags,
    add_verb,
    at_least,
    config_values,
    model_flags,
    output_flags,
    print_json,
    with_format,
)


def cmd_pretrain(args: argparse.Namespace) -> int:
    from ..modelfiles.hf import remote_code_note
    from ..progress import duration
    from ..training.plan import plan_run
    from ..training.trainer import pretrain

    plan = plan_run(
        args.data,
        args.out,
        args.recipe,
        args.preset,
        config_values(args, ModelConfig),
        config_values(args, TrainConfig),
        resume=args.resume,
    )
    result = pretrain(
        args.data,
        args.out,
        plan.model,
        plan.train,
        resume=args.resume,
        overwrite=args.overwrite,
        progress=not (args.quiet or args.json),
        tensorboard=args.tensorboard,
        recipe=plan.recipe,
    )
    if result.interrupted:
        return 128 + result.interrupted
    if not result.is_main:
        return 0
    run = Path(args.out)
    if args.json:
        print_json(
            {
                "steps": result.state.step,
                "tokens": result.state.tokens_seen,
                "elapsed": result.state.elapsed,
                "final_eval": result.final_eval,
                "model": str(run / "model"),
            }
        )
    else:
        final = result.final_eval
        held_out = f"; held-out MLM loss {final['mlm_loss']:.3f}, accuracy {final['mlm_acc']:.3f}" if final else ""
        print(
            f"done: {result.state.step} steps, {result.state.tokens_seen:,} tokens in "
            f"{duration(result.state.elapsed)}{held_out}; model in {run / 'model'}"
        )
    note = remote_code_note(plan.model)
    if note:  # shown even with --quiet: the one limit of the model just made
        print(note, file=sys.stderr)
    return 0


def cmd_sweep(args: argparse.Namespace) -> None:
    from ..studies.sweep import has_seeds, parse_grid, run_sweep, with_seeds

    axes = parse_grid(args.grid)
    fixed = {**config_values(args, ModelConfig), **config_values(args, TrainConfig)}
    clash = sorted(set(axes) & {*fixed, *(["preset"] if args.preset else [])})
    if clash:
        raise UserError(f"{clash[0]} is both a --grid axis and a fixed flag")
    axes, fixed = with_seeds(axes, fixed, args.seeds)
    fixed |= {"preset": args.preset} if args.preset else {}
    rows = run_sweep(
        args.data, args.out, args.recipe, axes, fixed, parallel=args.parallel, quiet=args.quiet or args.json
    )
    if args.json:
        print_json(rows)
        return
    out = Path(args.out)
    table = out / ("summary.md" if has_seeds(rows, list(axes)) else "results.md")
    print(table.read_text(encoding="utf-8"))
    print(
        f"{len(rows)} runs; table in {table}, a row per run in {out / 'results.md'}, figure in {out / 'curves.png'}",
        file=sys.stderr,
    )


def cmd_evaluate(args: argparse.Namespace) -> None:
    from ..training.evaluate import evaluate_models

    results = evaluate_models(
        args.model,
        args.data,
        batch_size=args.batch_size,
        seq_len=args.seq_len,
        max_batches=args.max_batches,
        device=args.device,
        precision=args.precision,
        trust_pickle=args.trust_pickle,
        layout={"pairs": "nsp", "windows": "none"}.get(args.layout),
    )
    if args.json:
        print_json(results[0] if len(results) == 1 else results)
        return
    for result in results:
        if len(results) > 1:
            print(f"{result['model']}:")
        print(
            f"MLM loss {result['mlm_loss']:.4f}  accuracy {result['mlm_acc']:.4f} ± {result['mlm_acc_stderr']:.4f}  "
            f"perplexity {result['perplexity']:.2f}  (unigram baseline accuracy "
            f"{result['unigram_baseline_acc']:.4f}, {result['masked_tokens']:,} masked tokens)"
        )
        if result["masked_tokens"] < FEW_MASKED:
            print(
                f"note: only {result['masked_tokens']:,} masked tokens were scored: the accuracy may move by "
                f"±{2 * result['mlm_acc_stderr']:.3f} between draws; prepare a larger held-out split "
                "(--valid-fraction) or pass more text to --data",
                file=sys.stderr,
            )
        pair = result["pair_objective"]
        if pair_objective(pair).head:
            print(f"{pair.upper()} loss {result[pair + '_loss']:.4f}  accuracy {result[pair + '_acc']:.4f}")


FEW_MASKED = 2000  # below this many masked tokens, evaluate says how far its accuracy may move (±2 standard errors)


def cmd_plot(args: argparse.Namespace) -> None:
    from ..plots import RUN_CURVES, plot_run

    run_dir = Path(args.run_dir)
    default = run_dir / RUN_CURVES.with_suffix(f".{args.format or 'png'}")
    print(plot_run(run_dir, with_format(args.out, args.format) if args.out else default))


def cmd_subclone(args: argparse.Namespace) -> None:
    from ..training.subclone import subclone

    out, plan = subclone(
        args.model, args.data, args.out, args.preset, args.batches, args.overwrite, args.trust_pickle,
        num_layers=args.num_layers, hidden_size=args.hidden_size, intermediate_size=args.intermediate_size,
    )  # fmt: skip
    width = len(plan.dims) // len(plan.heads[0])
    if args.json:
        print_json({"out": str(out), "layers": plan.layers, "hidden_size": len(plan.dims),
                    "num_heads": len(plan.heads[0]), "intermediate_size": len(plan.neurons[0])})  # fmt: skip
        return
    print(
        f"wrote {out}: layers {', '.join(map(str, plan.layers))} of the source, {len(plan.dims)} of its residual "
        f"dimensions, {len(plan.heads[0])} heads of {width} and {len(plan.neurons[0])} feed-forward neurons a layer, "
        f"ranked on {args.data}; continue it with: bertforge pretrain --data {args.data} --out RUN --init-from {out}"
    )


def cmd_demo(args: argparse.Namespace) -> None:
    from ..studies.demo import run_demo

    run_demo(Path(args.out), fast=args.fast)


def run_flags(p: argparse.ArgumentParser) -> None:
    """What a new run starts from (recipe, size) and every model and training setting."""
    default_model, default_train = recipe_configs(DEFAULT_RECIPE, None, {}, {})
    recipes = "; ".join(f"{name}: {recipe.description}" for name, recipe in RECIPES.items()).replace("%", "%%")
    p.add_argument(
        "--recipe", choices=list(RECIPES), help=f"defaults to start from (default: {DEFAULT_RECIPE}). {recipes}"
    )
    p.add_argument(
        "--preset", choices=list(PRESETS), help="model size (default: the recipe's; on --resume, the saved one)"
    )
    add_config_flags(p, ModelConfig, shown_defaults=default_model)
    add_config_flags(p, TrainConfig, shown_defaults=default_train)


def register(verbs) -> None:
    p = add_verb(verbs, "pretrain", cmd_pretrain, "pre-train a BERT with masked LM and a sentence-pair objective")
    p.add_argument("--data", required=True, help="prepared data directory (bertforge prepare)")
    p.add_argument("--out", required=True, help="run directory")
    p.add_argument(
        "--resume", action="store_true", help="continue from the latest checkpoint in --out, with its settings"
    )
    p.add_argument("--overwrite", action="store_true", help="replace a run already in --out")
    p.add_argument("--tensorboard", action="store_true", help="also write TensorBoard event files")
    output_flags(p)
    run_flags(p)

    p = add_verb(
        verbs,
        "subclone",
        cmd_subclone,
        "cut a smaller model of a preset's shape out of a larger released one (weight subcloning): its most "
        "important dimensions, heads, neurons and layers on your text, a start for pretrain --init-from",
    )
    p.add_argument("model", help="the larger model (a BERT-style encoder: BertModel, a sentence-embedding model, ...)")
    p.add_argument("--data", required=True, help="your text, prepared with the model's tokenizer (bertforge prepare)")
    p.add_argument("--out", required=True, help="directory for the smaller model")
    p.add_argument("--preset", choices=list(PRESETS), help="the smaller model's layers and widths (heads keep theirs)")
    for name, what in (("num-layers", "layers"), ("hidden-size", "width"), ("intermediate-size", "feed-forward width")):
        p.add_argument(f"--{name}", type=POSITIVE, help=f"its {what}, in place of the preset's")
    p.add_argument(
        "--batches", type=POSITIVE, default=16, help="batches of 16 windows of 128 tokens the parts are ranked on"
    )
    p.add_argument("--overwrite", action="store_true", help="replace the model already in --out")
    p.add_argument("--trust-pickle", action="store_true", help="read a model that has only pytorch_model.bin")
    output_flags(p, quiet=False)

    p = add_verb(
        verbs, "sweep", cmd_sweep, "pre-train every combination of a grid (ablations) and tabulate the results"
    )
    p.add_argument("--data", required=True, help="prepared data directory")
    p.add_argument("--out", required=True, help="sweep directory")
    p.add_argument(
        "--grid",
        action="append",
        required=True,
        metavar="FIELD=V1,V2",
        help="an axis: any model or training setting, or preset (model sizes: with --time-budget, which size learns "
        "most in that time here)",
    )
    p.add_argument(
        "--seeds",
        type=POSITIVE,
        default=1,
        help="runs per grid point, seeds S..S+N-1 from --seed S: the summary gives median and range over them",
    )
    p.add_argument("--parallel", type=POSITIVE, default=1, help="runs at once (the cores are shared among them)")
    output_flags(p)
    run_flags(p)

    p = add_verb(
        verbs, "evaluate", cmd_evaluate, "held-out MLM loss, accuracy and perplexity, and the pair head's accuracy"
    )
    model_flags(p, many=True)
    p.add_argument("--data", nargs="+", required=True, help="a prepared data directory, or raw text files")
    p.add_argument(
        "--layout",
        choices=["pairs", "windows"],
        help="sentence pairs (BERT's NSP instances) or full-length windows (default: as the first model was "
        "pre-trained)",
    )
    own = "a run's own on its data directory (its last held-out line's figures), else"
    p.add_argument("--batch-size", type=POSITIVE, help=f"sequences per batch (default: {own} 32)")
    p.add_argument("--seq-len", type=at_least(8), help=f"instance length (default: {own} 128)")
    p.add_argument(
        "--max-batches", type=POSITIVE, help=f"batches to evaluate, fixed masks and order (default: {own} 50)"
    )
    p.add_argument("--precision", choices=["auto", "fp32", "bf16", "fp16"], default="fp32", help="as for pretrain")
    output_flags(p, quiet=False)

    p = add_verb(verbs, "plot", cmd_plot, "draw a run's training curves (also while it is running)")
    p.add_argument("run_dir", help="run directory")
    p.add_argument("--out", help="output file (default RUN_DIR/plots/training_curves.png)")
    p.add_argument("--format", choices=["png", "svg"], help="image format (default: the --out suffix)")


def register_demo(verbs) -> None:
    p = add_verb(verbs, "demo", cmd_demo, "train tokenizers and tiny BERTs on the bundled corpora, then question them")
    p.add_argument("--out", default="demo_runs", help="where the demo writes")
    p.add_argument("--fast", action="store_true", help="fewer steps, for a smoke test")
