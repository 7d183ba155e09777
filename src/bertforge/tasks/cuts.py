"""Decision thresholds fitted on dev: where to cut a ranking so that the items above the cut score best.

One search serves both places bertforge fits a threshold: a multi-label
model's threshold per label (targets.py) and SQuAD v2.0's no-answer margin
(qa.py, BERT's tau).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


def best_cut(scores: np.ndarray, objective: Callable[[np.ndarray], np.ndarray], low: float, high: float) -> float:
    """The threshold with the best `objective` for taking the items whose score lies above it.

    scores: (n,). `objective(order)` gets the items in descending order of score (ties in input order) and gives
    (n + 1,): its value when the first k are taken, k = 0..n. The cut never splits tied scores and lies halfway
    between two scores, or between the extreme score and `low`/`high`, so no item sits on it; of equal values
    the fewest taken wins.
    """
    order = np.argsort(-scores, kind="stable")
    ranked = scores[order].astype(np.float64)  # (n,) highest first
    value = objective(order)  # (n + 1,)
    allowed = np.ones(len(ranked) + 1, dtype=bool)
    allowed[1:-1] = ranked[:-1] > ranked[1:]  # between k - 1 and k only where their scores differ
    k = int(np.flatnonzero(allowed)[np.argmax(value[allowed])])
    above = ranked[k - 1] if k > 0 else high
    below = ranked[k] if k < len(ranked) else low
    return float((above + below) / 2)
