"""Figures. Each function returns a matplotlib Figure (shown inline in Jupyter); `save_figure` writes it.

They use matplotlib's object API rather than pyplot: no global state, no window,
nothing to close, and no display needed to save a PNG or SVG.
"""

from __future__ import annotations

import io
from pathlib import Path

from matplotlib.figure import Figure
from matplotlib.patches import Patch

from .engine.metrics import read_metrics
from .errors import UserError
from .fileio import check_not_inputs, write_bytes
from .objectives import PAIR_OBJECTIVES


def subplots(*args, **kwargs):
    """(figure, axes) like pyplot.subplots, without pyplot."""
    fig = Figure(figsize=kwargs.pop("figsize", None), layout=kwargs.pop("layout", None))
    return fig, fig.subplots(*args, **kwargs)


def training_curves(metrics_path: str | Path, title: str | None = None) -> Figure:
    """Loss (total, MLM, pair), accuracy (MLM, pair) and learning rate over steps, with held-out points."""
    train, valid = read_metrics(metrics_path)
    if not train and not valid:
        raise UserError(f"{metrics_path}: no metrics to plot")
    fig, (ax_loss, ax_acc, ax_lr) = subplots(1, 3, figsize=(15, 4.2))
    steps = [r["step"] for r in train]
    # One colour per quantity: the held-out points sit on their training curve's colour.
    heads = [p.name for p in PAIR_OBJECTIVES.records() if p.head]
    pair = next((p for p in heads if any(f"{p}_loss" in r for r in train + valid)), heads[0])
    for key, style, color in (
        ("loss", "-", "tab:blue"),
        ("mlm_loss", "--", "tab:orange"),
        (f"{pair}_loss", ":", "tab:green"),
    ):
        label = key.replace("_", " ").replace("mlm", "MLM").replace(pair, pair.upper())
        if train and key in train[0]:
            ax_loss.plot(steps, [r[key] for r in train], style, color=color, label=f"train {label}")
        if key != "loss" and valid and key in valid[0]:
            ax_loss.plot(
                [r["step"] for r in valid], [r[key] for r in valid], "o", color=color, label=f"held-out {label}"
            )
    for key, style, color in (("mlm_acc", "-", "tab:orange"), (f"{pair}_acc", "--", "tab:green")):
        name = key.replace("_acc", "").upper()
        if train and key in train[0]:
            ax_acc.plot(steps, [r[key] for r in train], style, color=color, label=f"train {name} accuracy")
        if valid and key in valid[0]:
            ax_acc.plot(
                [r["step"] for r in valid], [r[key] for r in valid], "o", color=color, label=f"held-out {name} accuracy"
            )
    if train:
        ax_lr.plot(steps, [r["lr"] for r in train], color="tab:purple", label="learning rate")
    for ax, ylabel, name in (
        (ax_loss, "loss", "Loss"),
        (ax_acc, "accuracy", "Accuracy"),
        (ax_lr, "learning rate", "Learning rate"),
    ):
        ax.set_xlabel("optimizer step")
        ax.set_ylabel(ylabel)
        ax.set_title(name)
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend(fontsize=8)
    fig.suptitle(title or f"Pre-training curves: {Path(metrics_path).parent.name}")
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------- helpers


def shorten(text: str, limit: int = 60) -> str:
    """Long labels end in an ellipsis instead of overlapping their neighbours."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _token_fontsize(n: int) -> float:
    return max(4.0, min(10.0, 240.0 / max(n, 1)))


def save_figure(fig: Figure, out: str | Path) -> Path:
    """`fig` written whole into `out` (.png or .svg, by its suffix), or not at all."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    image = io.BytesIO()
    fig.savefig(image, format=out.suffix.lstrip(".").lower() or "png", dpi=110, bbox_inches="tight")
    write_bytes(out, image.getvalue())
    return out


RUN_CURVES = Path("plots") / "training_curves.png"  # where a run directory keeps its curves (rundir.py)


def plot_run(run_dir: str | Path, out: str | Path | None = None) -> Path:
    """A run's training curves from its metrics.jsonl, into `out` (by default RUN_DIR/plots/training_curves.png):
    what `pretrain` draws when a run finishes, and `bertforge plot` while one runs."""
    run_dir = Path(run_dir)
    out = Path(out or run_dir / RUN_CURVES)
    check_not_inputs({"--out": out}, {"RUN_DIR": run_dir / "metrics.jsonl"})  # the run's log, or a folder holding it
    if out.is_dir():
        raise UserError(f"--out {out} is a directory: give the figure's file (.png or .svg)")
    return save_figure(training_curves(run_dir / "metrics.jsonl"), out)


# ---------------------------------------------------------------- input representation


def embedding_parts(bert, sentence_a: str, sentence_b: str | None = None) -> dict:
    """The data behind the embeddings figure: each summand (T, H) and their sum, before LayerNorm."""
    import torch

    encoding, input_ids, token_type_ids = bert.encode(sentence_a, sentence_b)
    with torch.no_grad():
        token, segment, position = (
            x[0].float().cpu().numpy() for x in bert.model.bert.embeddings.parts(input_ids, token_type_ids)
        )
    return {
        "tokens": encoding.tokens,
        "token": token,
        "segment": segment,
        "position": position,
        "sum": token + segment + position,
    }


def embedding_heatmaps(bert, sentence_a: str, sentence_b: str | None = None) -> Figure:
    """The classic figure: token, segment and position embeddings of the input, and their sum."""
    parts = embedding_parts(bert, sentence_a, sentence_b)
    tokens = parts["tokens"]
    panels = [
        ("token embeddings", "token"),
        ("segment embeddings", "segment"),
        ("position embeddings", "position"),
        ("input representation = sum", "sum"),
    ]
    fig, axes = subplots(1, 4, figsize=(max(14, 0.9 * len(tokens) * 4 * 0.35), 4.8), sharey=True)
    limit = max(abs(parts[key]).max() for _, key in panels)
    for ax, (title, key) in zip(axes, panels):
        image = ax.imshow(parts[key].T, aspect="auto", cmap="RdBu_r", vmin=-limit, vmax=limit, interpolation="nearest")
        ax.set_title(title)
        ax.set_xticks(range(len(tokens)))
        ax.set_xticklabels([shorten(t, 12) for t in tokens], rotation=90, fontsize=_token_fontsize(len(tokens)))
        ax.set_xlabel("input token")
    axes[0].set_ylabel("hidden dimension")
    fig.colorbar(image, ax=axes, shrink=0.8, label="value")
    pair = f" / {shorten(sentence_b, 40)}" if sentence_b else ""
    fig.suptitle(f"BERT input representation: {shorten(sentence_a, 40)}{pair}")
    return fig


# ---------------------------------------------------------------- words


def word_map_points(bert, groups: list[list[str]]) -> dict:
    """The data behind the word map: every word's embedding-table vector (`Bert.word_vectors`) projected on the
    two directions along which the words' vectors vary most (principal components, by SVD of the centred
    vectors), and the share of their variance each direction holds."""
    import numpy as np

    words = [word for group in groups for word in group]
    if len(words) < 3:
        raise UserError("a word map needs at least 3 words")
    vectors = bert.word_vectors(words)  # (W, H)
    centred = vectors - vectors.mean(axis=0)
    left, singular, _ = np.linalg.svd(centred, full_matrices=False)  # left: (W, r), singular: (r,)
    variance = singular**2 / max(float((singular**2).sum()), 1e-30)
    return {"words": words, "xy": left[:, :2] * singular[:2], "variance": variance[:2]}  # xy: (W, 2)


def word_map(bert, groups: list[list[str]], title: str = "") -> Figure:
    """Words as points where the embedding table puts them, seen from its two main directions, a colour per group:
    after pre-training, days of the week gather apart from colours and numbers; from random weights they do not."""
    points = word_map_points(bert, groups)
    fig, ax = subplots(figsize=(8, 6.5))
    start = 0
    for i, group in enumerate(groups):
        xy = points["xy"][start : start + len(group)]
        ax.scatter(
            xy[:, 0], xy[:, 1], color=f"C{i % 10}", label=", ".join(group[:3]) + (", ..." if len(group) > 3 else "")
        )
        for word, (x, y) in zip(group, xy):
            ax.annotate(word, (x, y), textcoords="offset points", xytext=(4, 3), fontsize=9, color=f"C{i % 10}")
        start += len(group)
    first, second = points["variance"]
    ax.set_xlabel(f"first principal component ({first:.0%} of the variance)")
    ax.set_ylabel(f"second principal component ({second:.0%})")
    ax.grid(alpha=0.3)
    if len(groups) > 1:
        ax.legend(fontsize=8)
    ax.set_title(title or "Token embeddings of the words, projected on their two main directions")
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------- attention


def attention_maps(tokens: list[str], attention, layer: int = -1, head: int | None = None, title: str = "") -> Figure:
    """One head's attention map, or a grid with every head of `layer`. attention: (L, nh, T, T)."""
    num_layers, num_heads = attention.shape[:2]
    if not -num_layers <= layer < num_layers:
        raise UserError(f"--layer {layer} is out of range: the model has {num_layers} layers")
    heads = [head] if head is not None else list(range(num_heads))
    if head is not None and not 0 <= head < num_heads:
        raise UserError(f"--head {head} is out of range: each layer has {num_heads} heads")
    columns = min(4, len(heads))
    rows = -(-len(heads) // columns)
    size = max(3.5, 0.28 * len(tokens))
    fig, axes = subplots(
        rows, columns, figsize=(size * columns + 1.5, size * rows + 0.8), squeeze=False, layout="constrained"
    )
    labels = [shorten(t, 12) for t in tokens]
    fontsize = _token_fontsize(len(tokens))
    for ax in axes.flat[len(heads) :]:
        ax.axis("off")
    for i, (ax, h) in enumerate(zip(axes.flat, heads)):
        image = ax.imshow(attention[layer, h].numpy(), cmap="viridis", vmin=0.0, vmax=1.0, interpolation="nearest")
        ax.set_title(f"layer {layer % num_layers}, head {h}")
        ax.set_xticks(range(len(tokens)))
        ax.set_yticks(range(len(tokens)))
        ax.set_xticklabels(labels, rotation=90, fontsize=fontsize)
        ax.set_yticklabels(labels if i % columns == 0 else [], fontsize=fontsize)  # token names once per row
        ax.set_xlabel("attended token (key)")
        if i % columns == 0:
            ax.set_ylabel("attending token (query)")
    fig.colorbar(image, ax=axes, shrink=0.6, label="attention probability")
    fig.suptitle(title or "Self-attention")
    return fig


# ---------------------------------------------------------------- answers


def fill_mask_bars(result: dict, answer: str | None = None) -> Figure:
    """Top-k predictions per [MASK] as bars; the correct word, if given, in another colour."""
    masks = result["masks"]
    fig, axes = subplots(1, len(masks), figsize=(5.5 * len(masks), 3.8), squeeze=False)
    for ax, mask in zip(axes[0], masks):
        predictions = mask["predictions"][::-1]  # best on top
        names = [shorten(p["token"], 20) for p in predictions]
        colors = ["tab:green" if answer is not None and p["token"] == answer else "tab:blue" for p in predictions]
        ax.barh(names, [p["score"] for p in predictions], color=colors)
        ax.set_xlim(0, 1)
        ax.set_xlabel("probability")
        ax.set_title(f"[MASK] at token {mask['position']}")
    axes[0][0].set_ylabel("predicted token")  # once: beside the next panel's tick labels it would collide
    if answer is not None:
        axes[0][-1].legend(
            handles=[Patch(color="tab:green", label=f"answer: {answer}"), Patch(color="tab:blue", label="other")],
            loc="lower right",
            fontsize=8,
        )
    fig.suptitle(f"fill-mask: {shorten(result['text'], 80)}")
    return fig


def nsp_bars(results: list[dict]) -> Figure:
    """is_next_prob (or, for an SOP model, in_order_prob) per sentence pair, with the 0.5 decision line."""
    key = "is_next_prob" if "is_next_prob" in results[0] else "in_order_prob"
    fig, ax = subplots(figsize=(9, 0.6 * len(results) + 1.8))
    names = [f"{shorten(r['a'], 35)}  →  {shorten(r['b'], 35)}" for r in results][::-1]
    probabilities = [r[key] for r in results][::-1]
    ax.barh(names, probabilities, color=["tab:green" if p >= 0.5 else "tab:red" for p in probabilities])
    ax.axvline(0.5, color="gray", linestyle="--", label="decision threshold")
    ax.set_xlim(0, 1)
    ax.set_xlabel("is_next_prob (B follows A)" if key == "is_next_prob" else "in_order_prob (A and B in order)")
    ax.set_ylabel("sentence pair (A → B)")
    ax.set_title("Next sentence prediction")
    ax.legend(loc="lower right", fontsize=8)
    return fig
