"""The optimizer and the learning-rate schedule, shared by pre-training and fine-tuning."""

from __future__ import annotations

import math
import warnings
from typing import Any

import torch

from ..errors import UserError


def build_optimizer(
    model: torch.nn.Module,
    device: str,
    lr: float,
    weight_decay: float,
    betas: tuple[float, float] = (0.9, 0.999),
    eps: float = 1e-6,
    muon_matrices: list[torch.nn.Parameter] | None = None,
) -> torch.optim.Optimizer | MuonWithAdamW:
    """AdamW; no weight decay on biases and LayerNorm weights (every 1-d parameter), as in BERT.

    Fused (one kernel over all parameters) on CUDA and CPU: on a mini model on
    an AVX2 EPYC its step took 8 ms against 50 for the per-parameter loop.

    With `muon_matrices` (the encoder layers' weight matrices), those are stepped by Muon and the rest by AdamW.
    """
    in_muon = {id(p) for p in muon_matrices or ()}
    params = [p for p in model.parameters() if p.requires_grad and id(p) not in in_muon]  # the tied matrix once
    decay = [p for p in params if p.ndim >= 2]
    no_decay = [p for p in params if p.ndim < 2]
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    fused = device.split(":")[0] in ("cuda", "cpu")
    adamw = torch.optim.AdamW(groups, lr=lr, betas=betas, eps=eps, fused=fused)
    if not muon_matrices:
        return adamw
    return MuonWithAdamW(Muon(muon_matrices, lr=lr, weight_decay=weight_decay), adamw)


class Muon(torch.optim.Muon):
    """torch's Muon (Jordan et al. 2024): the same update, state and checkpoints, with each matrix's update scaled
    to AdamW's typical size (Liu et al. 2025's match_rms_adamw), so that one lr and one schedule serve both
    optimizers.

    Only the Newton-Schulz iteration is our own (`orthogonalise`): torch's turns a tall matrix wide by a transposed
    view, and a bf16 addmm on that view takes a slow path on CPUs without AMX. On a Zen 4 that made a mini step
    2.24x AdamW's (1.56 against 0.70 s); on a contiguous copy it costs what AdamW's does (0.695 s).
    """

    def __init__(self, params: list[torch.nn.Parameter], lr: float, weight_decay: float):
        super().__init__(params, lr=lr, weight_decay=weight_decay, adjust_lr_fn="match_rms_adamw")

    @torch.no_grad()
    def step(self, closure: None = None) -> None:
        if closure is not None:
            raise ValueError("Muon here takes no closure")
        for group in self.param_groups:
            lr, momentum = group["lr"], group["momentum"]
            for param in (p for p in group["params"] if p.grad is not None):
                state = self.state[param]
                if "momentum_buffer" not in state:
                    state["momentum_buffer"] = torch.zeros_like(param.grad)
                buffer = state["momentum_buffer"].lerp_(param.grad, 1 - momentum)
                update = param.grad.lerp(buffer, momentum) if group["nesterov"] else buffer
                update = orthogonalise(update, group["ns_coefficients"], group["ns_steps"], group["eps"])
                param.mul_(1 - lr * group["weight_decay"])
                param.add_(update, alpha=-lr * update_scale(group["adjust_lr_fn"], param.shape))


def update_scale(adjust_lr_fn: str | None, shape: torch.Size) -> float:
    """What an orthogonalised update is multiplied by beside the lr, as torch's Muon does for each of its rules: a
    state dict loaded from torch's, with its own rule, steps as it would there."""
    rows, columns = shape[:2]
    if adjust_lr_fn == "match_rms_adamw":
        return 0.2 * math.sqrt(max(rows, columns))  # an update as large as AdamW's typical one
    if adjust_lr_fn in (None, "original"):
        return math.sqrt(max(1, rows / columns))  # Keller Jordan's
    return 1.0


def orthogonalise(matrix: torch.Tensor, coefficients: tuple[float, float, float], steps: int, eps: float):
    """Newton-Schulz's quintic iteration towards the nearest semi-orthogonal matrix (singular values pushed into
    about 0.5-1.5, which trains as well as exactly 1), in bf16 as torch's, on the wide side made contiguous."""
    a, b, c = coefficients
    tall = matrix.size(0) > matrix.size(1)
    x = (matrix.T if tall else matrix).bfloat16().contiguous()  # (r, n), r ≤ n
    x.div_(x.norm().clamp(min=eps))  # spectral norm at most 1
    for _ in range(steps):
        gram = x @ x.T  # (r, r)
        x = torch.addmm(x, torch.addmm(gram, gram, gram, beta=b, alpha=c), x, beta=a)  # a x + (b G + c G²) x
    return x.T if tall else x


class MuonWithAdamW:
    """Muon and AdamW stepped, scheduled, clipped and checkpointed as one optimizer.

    Muon orthogonalises a matrix's update, which suits the hidden matrices only; embeddings, output heads and the
    1-d parameters keep AdamW, as every Muon recipe does. `param_groups` lists both optimizers' groups, so setting
    the lr (or unscaling fp16 gradients) reaches every parameter.
    """

    def __init__(self, muon: Muon, adamw: torch.optim.AdamW):
        self.optimizers = (muon, adamw)

    @property
    def param_groups(self) -> list[dict]:
        return [group for optimizer in self.optimizers for group in optimizer.param_groups]

    def step(self) -> None:
        for optimizer in self.optimizers:
            optimizer.step()

    def zero_grad(self, set_to_none: bool = True) -> None:
        for optimizer in self.optimizers:
            optimizer.zero_grad(set_to_none=set_to_none)

    def state_dict(self) -> dict:
        return {"muon": self.optimizers[0].state_dict(), "adamw": self.optimizers[1].state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.optimizers[0].load_state_dict(state["muon"])
        self.optimizers[1].load_state_dict(state["adamw"])


# ---------------------------------------------------------------- a saved state is an input


def optimizer_kind(optimizer) -> str:
    """What steps a model: "muon" (Muon for the hidden matrices, AdamW the rest) or "adamw"."""
    return "muon" if isinstance(optimizer, MuonWithAdamW) else "adamw"


def saved_kind(state: Any) -> str | None:
    """Which optimizer wrote a saved state dict (`optimizer_kind`'s names), or None for one neither writes."""
    if isinstance(state, dict) and set(state) == {"muon", "adamw"}:
        return "muon"
    if isinstance(state, dict) and isinstance(state.get("state"), dict) and isinstance(state.get("param_groups"), list):
        return "adamw"
    return None


def load_optimizer_state(optimizer, state: Any, source: str) -> None:
    """A checkpoint's optimizer state into `optimizer`, read as an input: the file may be intact and still hostile.

    Every saved moment or momentum buffer must be a finite float tensor of its parameter's shape (`step` a finite
    count), or the state is refused in one line naming it. The hyper-parameters stay the run's own: a saved
    `ns_steps` of 10⁹ would never end a step, a saved weight decay would override the run's, so whatever the file
    holds beside the tensors is not used. A state another optimizer wrote (a run resumed with another
    --optimizer) is not loaded: the new optimizer starts fresh, said in one line."""
    kind, wanted = saved_kind(state), optimizer_kind(optimizer)
    if kind is None:
        raise UserError(f"{source}: not an optimizer state bertforge writes")
    if kind != wanted:
        warnings.warn(
            f"{source} holds {kind}'s optimizer state; this run now steps with {wanted} (--optimizer {wanted}), "
            f"whose state starts fresh",
            stacklevel=2,
        )
        return
    pairs = zip(optimizer.optimizers, (state["muon"], state["adamw"])) if kind == "muon" else [(optimizer, state)]
    for live, saved in pairs:
        _load_checked(live, saved, source)


def _load_checked(optimizer: torch.optim.Optimizer, saved: Any, source: str) -> None:
    """One torch optimizer's saved state, its tensors checked against the parameters they belong to, its
    hyper-parameters replaced by the optimizer's own."""
    groups = saved.get("param_groups") if isinstance(saved, dict) else None
    entries = saved.get("state") if isinstance(saved, dict) else None
    own = optimizer.param_groups
    if not isinstance(groups, list) or not isinstance(entries, dict) or len(groups) != len(own):
        raise UserError(f"{source}: the optimizer state does not fit this model (its parameter groups differ)")
    parameters = {}
    for group, live in zip(groups, own):
        ids = group.get("params") if isinstance(group, dict) else None
        if not isinstance(ids, list) or len(ids) != len(live["params"]):
            raise UserError(f"{source}: the optimizer state does not fit this model (its parameter groups differ)")
        parameters.update(zip(ids, live["params"]))
    for index, values in entries.items():
        parameter = parameters.get(index)
        if parameter is None or not isinstance(values, dict):
            raise UserError(f"{source}: the optimizer state holds an entry for no parameter of this model ({index!r})")
        for name, value in values.items():
            _check_entry(source, index, name, value, parameter)
    hyper = [{k: v for k, v in group.items() if k != "params"} for group in own]
    optimizer.load_state_dict(saved)
    for group, settings in zip(optimizer.param_groups, hyper):  # the run's own, not the file's
        group.update(settings)


def _check_entry(source: str, index: Any, name: str, value: Any, parameter: torch.Tensor) -> None:
    """A saved state entry: a step count (a finite number, 0 or more) or a tensor of the parameter's shape."""
    where = f"{source}: the optimizer state's {name} of parameter {index}"
    if name == "step":
        number = value.item() if isinstance(value, torch.Tensor) and value.numel() == 1 else value
        if isinstance(number, bool) or not isinstance(number, (int, float)) or not 0 <= number < 1e15:
            raise UserError(f"{where} is not a step count")
        return
    if not isinstance(value, torch.Tensor) or not value.is_floating_point():
        raise UserError(f"{where} is not a float tensor")
    if value.shape != parameter.shape:
        raise UserError(
            f"{where} is {' x '.join(map(str, value.shape))}; the parameter is {' x '.join(map(str, parameter.shape))}"
        )
    if not bool(torch.isfinite(value).all()):
        raise UserError(f"{where} holds values that are not numbers")


def warmup_fraction(warmup: float, total_steps: int) -> float:
    """A warm-up given as a fraction of the run (< 1) or as a number of steps (>= 1), as a fraction."""
    return warmup if warmup < 1 else warmup / max(total_steps, 1)


def lr_factor(progress: float, warmup: float, schedule: str) -> float:
    """Multiplier of the peak lr at `progress` ∈ [0, 1] of the run: linear warm-up over the first
    `warmup` of it, then linear decay to zero, cosine decay to zero, or constant."""
    if progress < warmup:
        return progress / warmup
    rest = min(1.0, (progress - warmup) / max(1.0 - warmup, 1e-9))
    if schedule == "linear":
        return max(0.0, 1.0 - rest)
    if schedule == "cosine":
        return 0.5 * (1.0 + math.cos(math.pi * rest))
    return 1.0


def set_lr(optimizer: torch.optim.Optimizer, lr: float) -> None:
    for group in optimizer.param_groups:
        group["lr"] = lr
