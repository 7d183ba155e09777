"""The order pre-training reads its data in: BatchPlan, and the DataLoader that collates its batches.

Deterministic from any position, so a resumed run, or one with a different
number of processes, reads exactly the batches an uninterrupted run would.
"""

from __future__ import annotations

import signal
from collections import deque
from collections.abc import Callable, Iterator

import numpy as np
import torch

from ..data.instances import Stream, mix_seed
from ..data.masking import MaskingCollator
from ..engine.runtime import Distributed
from ..errors import UserError
from ..fileio import release_inherited_locks
from .config import TrainConfig


class BatchPlan:
    """The deterministic sequence of (epoch, index) lists each process reads, from any position.

    Each epoch's instances are shuffled from (seed, epoch); the global batch of
    B × world instances is cut into per-rank slices, so ranks read disjoint data.
    Positions count instances consumed in the epoch by all processes together,
    which lets a checkpoint from N processes resume on M. With a batch-size
    ramp, B depends on the optimizer step the batch is for, so a resumed run
    still reads exactly the same batches.
    """

    def __init__(
        self,
        dataset,
        batch_size: int,
        processes: Distributed,
        seed: int,
        size_at: Callable[[int], int] | None = None,
        grad_accum: int = 1,
    ):
        self.dataset = dataset
        self.batch_size = batch_size  # the largest
        self.size_at = size_at or (lambda step: batch_size)  # optimizer step -> instances per micro-batch
        self.grad_accum = grad_accum
        self.processes = processes
        self.seed = seed
        self.positions: deque[tuple[int, int]] = deque()  # (epoch, offset) after each batch handed out

    def batches(self, epoch: int, offset: int, step: int = 0) -> Iterator[list[tuple[int, int]]]:
        """Micro-batches from (epoch, offset) on, the first for optimizer step `step`."""
        world, rank = self.processes.world, self.processes.rank
        micro = 0
        while True:
            n = self.dataset.num_instances(epoch)
            if n < self.batch_size * world:
                raise UserError(
                    f"the training split has {n} instances, fewer than one global batch of "
                    f"{self.batch_size * world}; lower --batch-size or add text"
                )
            order = np.random.default_rng(mix_seed(self.seed, epoch, Stream.LOADER_ORDER)).permutation(n)
            while True:
                B = self.size_at(step + micro // self.grad_accum)
                if offset + B * world > n:
                    break
                mine = order[offset + rank * B : offset + (rank + 1) * B]
                offset += B * world
                micro += 1
                self.positions.append((epoch, offset))
                yield [(epoch, int(i)) for i in mine]
            epoch, offset = epoch + 1, 0


def make_loader(
    plan: BatchPlan, collator: MaskingCollator, position: tuple[int, int, int], cfg: TrainConfig, device: str
):
    """A DataLoader over the plan from `position` = (epoch, offset, optimizer step), masking in worker processes."""
    epoch, offset, step = position
    return torch.utils.data.DataLoader(
        plan.dataset,
        batch_sampler=plan.batches(epoch, offset, step),
        collate_fn=collator,
        num_workers=cfg.num_workers,
        worker_init_fn=_ignore_stop_signals if cfg.num_workers else None,
        pin_memory=device.startswith("cuda"),
        prefetch_factor=4 if cfg.num_workers else None,
        # Its own generator: creating the loader must not draw from the global RNG (dropout) on resume.
        generator=torch.Generator().manual_seed(cfg.seed),
    )


def _ignore_stop_signals(worker_id: int) -> None:
    """A loader worker leaves SIGINT and SIGTERM to the main process: `timeout`, systemd and Slurm signal the
    whole process group, and a worker that died of it would end the run in a traceback instead of the main
    process's save and exit 128 + the signal. The main process stops its workers itself (`stop_workers`). Nor does
    a worker keep the run directory locked: killed with SIGKILL, the main process leaves no lock behind it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    release_inherited_locks()


def stop_workers(batches: Iterator) -> None:
    """Stop a loader's worker processes now, whatever ended the loop. Left to the end of the process, they would
    be stopped by SIGTERM, which they ignore, and the process would wait on them forever after an error; the
    loader's own shutdown asks them to finish instead."""
    shutdown = getattr(batches, "_shutdown_workers", None)  # torch's multi-process loader iterator
    if shutdown is not None:
        shutdown()
