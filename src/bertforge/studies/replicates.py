"""Runs that differ only in their seed: what the seeds agree on, and how far apart they lie.

A single run's difference smaller than its seed-to-seed spread is not a result,
so `score` and `sweep --seeds N` report through these functions: a figure's
median and range over seeds, whether two settings' ranges are apart, the
differences seed for seed, and how far two settings' median training curves lie
apart against how far one setting's seeds lie apart.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any


def median_range(values: Sequence[float]) -> dict[str, float | int]:
    """{"median", "min", "max", "seeds"} of one figure over seeds."""
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "seeds": len(values)}


def separated(a: Sequence[float], b: Sequence[float]) -> bool:
    """Whether every value of b lies above every value of a, or every one below: the seed ranges do not touch."""
    return min(b) > max(a) or max(b) < min(a)


def paired(baseline: Mapping[Any, float], other: Mapping[Any, float]) -> dict[str, float | int] | None:
    """`other` minus `baseline` seed for seed, over the seeds both ran: {"median", "higher", "pairs"}, or None.

    Seed k of two settings reads the same batches (and starts from the same weights where the setting leaves
    them alone), so the difference within a pair carries less of the seed's luck than the two ranges do: a
    setting higher in every pair is a sign, even where the ranges touch.
    """
    differences = [other[seed] - baseline[seed] for seed in sorted(baseline.keys() & other.keys())]
    if not differences:
        return None
    higher = sum(d > 0 for d in differences)
    return {"median": statistics.median(differences), "higher": higher, "pairs": len(differences)}


def smooth(values: Sequence[float], window: int) -> list[float]:
    """Trailing moving average over `window` points: a logged training loss is one batch's, and batches vary."""
    out, total = [], 0.0
    for i, value in enumerate(values):
        total += value - (values[i - window] if i >= window else 0.0)
        out.append(total / min(i + 1, window))
    return out


def aligned(curves: Sequence[dict[int, float]]) -> tuple[list[int], list[list[float]]]:
    """The steps every curve (step -> value) logged, and the curves' values at each: ([step], [step][curve])."""
    steps = sorted(set.intersection(*(set(curve) for curve in curves)))
    return steps, [[curve[s] for curve in curves] for s in steps]


def curve_gap(
    baseline: Sequence[dict[int, float]], other: Sequence[dict[int, float]], window: int = 5
) -> dict[str, float | int]:
    """How far `other`'s median curve lies from `baseline`'s, against the spread of `baseline`'s seeds.

    Each argument holds one curve (step -> value) per seed. Over the steps every
    curve logged, each curve is smoothed, and per step the median over seeds is
    taken; `gap` is the mean |median(other) - median(baseline)|, `spread` the mean
    max - min over the baseline's seeds. A gap below the spread is within seed noise.
    """
    steps, by_step = aligned([*baseline, *other])
    if not steps:
        return {"gap": float("nan"), "spread": float("nan"), "steps": 0}
    smoothed = [smooth(curve, window) for curve in zip(*by_step)]  # [seed][step], baseline's seeds first
    base_by_step = list(zip(*smoothed[: len(baseline)]))  # [step][seed]
    other_by_step = list(zip(*smoothed[len(baseline) :]))
    gaps = [abs(statistics.median(o) - statistics.median(b)) for b, o in zip(base_by_step, other_by_step)]
    spreads = [max(b) - min(b) for b in base_by_step]
    return {"gap": statistics.mean(gaps), "spread": statistics.mean(spreads), "steps": len(steps)}
