"""Where and how a loop computes: the device, the precision, the processes (torchrun), and stop signals.

Shared by pre-training, fine-tuning, evaluation and inference, so that every
command chooses its device and precision the same way.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import signal
import threading
import warnings
from dataclasses import dataclass

import torch
import torch.distributed as dist

from ..errors import UserError
from ..fileio import directory_lock
from .hardware import cpu_has_bf16_instructions, cpu_has_fast_bf16

AUTOCAST_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def _glibc():
    """The GNU C library, or None elsewhere (macOS, musl), where the allocator calls below do nothing."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"))
        libc.gnu_get_libc_version  # noqa: B018 (only glibc has it)
        return libc
    except (OSError, AttributeError, TypeError):
        return None


_GLIBC = _glibc()
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # mallopt's parameter numbers (malloc.h)
_KEEP_UP_TO = 2**31 - 1  # bytes: mallopt takes an int


def keep_freed_memory() -> None:
    """Let each training step reuse the memory the last one freed (glibc; elsewhere nothing).

    By default glibc maps every block above 32 MB fresh from the operating system
    and unmaps it when freed, so every step page-faults its largest tensors (the
    (N, V) MLM logits and their gradients: 78 MB each on mini) back in. On an AVX2
    EPYC one pass over such a tensor took 50 ms instead of 12. With big blocks
    served from the heap and freed memory kept, the next step finds them mapped.
    A pre-training step repeats a few shapes (gathered rows come in multiples of
    64), so the heap stays near one step's peak (benchmarks/README.md). Loops
    over ever-different shapes (evaluation sorted by length) do not call this.
    """
    if _GLIBC is not None:
        _GLIBC.mallopt(_M_MMAP_THRESHOLD, _KEEP_UP_TO)
        _GLIBC.mallopt(_M_TRIM_THRESHOLD, _KEEP_UP_TO)


def release_freed_memory() -> None:
    """Hand the C heap's free blocks back to the operating system (glibc; elsewhere nothing).

    A loop over batches of ever-different shapes (evaluation sorted by length)
    frees tensors of ever-different sizes, and glibc keeps them in its heap
    instead of returning them: a SQuAD dev pass grew a process by gigabytes that
    way. Trimming after each batch bounds that for about a fifth more time (the
    next batch faults its pages in again; benchmarks/bench_qa_memory.py).
    """
    if _GLIBC is not None:
        _GLIBC.malloc_trim(0)


@dataclass
class Distributed:
    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def setup_distributed(requested_device: str) -> Distributed:
    """torchrun sets WORLD_SIZE/RANK/LOCAL_RANK; NCCL on CUDA, gloo on CPU."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return Distributed()
    cuda = requested_device.startswith("cuda") or (requested_device == "auto" and torch.cuda.is_available())
    if not dist.is_initialized():
        dist.init_process_group("nccl" if cuda else "gloo")
    return Distributed(dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", "0")))


def resolve_device(requested: str, local_rank: int = 0) -> str:
    if requested == "auto":
        requested = "cuda" if torch.cuda.is_available() else "cpu"
    if requested.startswith("cuda"):
        if not torch.cuda.is_available():
            raise UserError("--device cuda requested but no CUDA device is available")
        device = f"cuda:{local_rank}" if requested == "cuda" else requested
        index, count = device.partition(":")[2] or "0", torch.cuda.device_count()
        if not index.isdigit():
            raise UserError(f"--device {device}: a GPU is named cuda or cuda:N")
        if int(index) >= count:
            hint = f"; torchrun starts one process per GPU: --nproc_per_node {count} at most" if local_rank else ""
            raise UserError(
                f"{device} does not exist: this machine has {count} GPU(s), cuda:0 to cuda:{count - 1}{hint}"
            )
        return device
    return "cpu"


def resolve_precision(requested: str, device: str) -> str:
    """auto: bf16 on CUDA with bf16, fp16 on older CUDA, bf16 on CPUs measured to be fast at it, else fp32."""
    if requested != "auto":
        if requested == "fp16" and not device.startswith("cuda"):
            raise UserError("--precision fp16 needs CUDA; use bf16 or fp32 on CPU")
        if requested == "bf16" and device == "cpu" and not cpu_has_bf16_instructions():
            warnings.warn(
                "this CPU has no bf16 instructions (AVX512-BF16 or AMX): bf16 is emulated, and its matmuls measured "
                "about 150x slower than fp32 on such a CPU; --precision auto picks fp32 here",
                stacklevel=2,
            )
        return requested
    if device.startswith("cuda"):
        return "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    return "bf16" if cpu_has_fast_bf16() else "fp32"


def autocast(device: str, precision: str):
    if precision == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.split(":")[0], dtype=AUTOCAST_DTYPES[precision])


class MixedPrecision:
    """A loop's precision policy: autocast for the forward pass and, in fp16, loss scaling for the backward."""

    def __init__(self, device: str, precision: str):
        self.device, self.precision = device, precision
        self.scaler = torch.amp.GradScaler("cuda") if precision == "fp16" else None

    def autocast(self):
        return autocast(self.device, self.precision)

    def backward(self, loss: torch.Tensor) -> None:
        (self.scaler.scale(loss) if self.scaler is not None else loss).backward()

    def step(self, optimizer: torch.optim.Optimizer, parameters, max_norm: float) -> torch.Tensor:
        """Clip the gradients (0 = no clipping) and update. Returns the norm before clipping.

        A non-finite norm skips the update; with fp16 the scaler decides, and shrinks its scale.
        """
        if self.scaler is not None:
            self.scaler.unscale_(optimizer)
        grad_norm = torch.nn.utils.clip_grad_norm_(parameters, max_norm if max_norm > 0 else float("inf"))
        if self.scaler is not None:
            self.scaler.step(optimizer)
            self.scaler.update()
        elif torch.isfinite(grad_norm):
            optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return grad_norm


class StopSignals:
    """While active, SIGINT and SIGTERM are recorded instead of killing the process, so a loop can save and stop."""

    def __init__(self):
        self.received = 0
        self._previous: dict = {}

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            self._previous = {sig: signal.signal(sig, self._record) for sig in (signal.SIGINT, signal.SIGTERM)}
        return self

    def _record(self, signum, frame) -> None:
        self.received = signum

    def __exit__(self, *exc) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


def lock_together(stack: contextlib.ExitStack, processes, device: str, run_dir, data_dir) -> None:
    """The main process locks the run directory (one process per run) and holds the data directory against
    `prepare` replacing it, the locks held by `stack`; every process fails together if it cannot."""
    failure = None
    if processes.is_main:
        try:
            stack.enter_context(directory_lock(run_dir))
            stack.enter_context(directory_lock(data_dir, shared=True))
        except UserError as e:
            failure = e
    if processes.world > 1:
        failed = torch.tensor([float(failure is not None)], device=device)
        dist.all_reduce(failed, op=dist.ReduceOp.MAX)
        if failed.item() and failure is None:
            failure = UserError(f"{run_dir}: the main process could not lock the run directory")
    if failure is not None:
        raise failure
