"""What the hardware can do: its measured peak matmul FLOP/s (the denominator of MFU) and whether the CPU has
fast bf16 instructions (AVX512-BF16 or AMX), which decides the precision --precision auto picks.
"""

from __future__ import annotations

import functools
import time

import torch


@functools.cache
def measure_peak_flops(device: str = "cpu", dtype: torch.dtype = torch.float32, seconds: float = 0.5) -> float:
    """Best sustained dense matmul FLOP/s on this device and dtype, measured now."""
    return PeakMeter(device, dtype, seconds=seconds).peak


class PeakMeter:
    """The best dense matmul speed a device has shown so far: the denominator of a run's MFU.

    One measurement before the first step does not hold on a shared machine: on the
    2-core VM (AVX2 EPYC) mini runs of the same step speed, each with a 0.5 s probe
    at start-up, logged MFU from 53% to 140%. So `current()` samples again once
    `interval` seconds have passed (one sample is about 60 ms of matmuls on that CPU),
    and the peak is the best sample: slowdowns by other work only ever lower a
    sample, so the best one is the closest to what the hardware can do.
    """

    def __init__(self, device: str, dtype: torch.dtype, interval: float = 60.0, seconds: float = 0.5):
        self.a, self.b = matmul_operands(device, dtype)
        matmul_flops_per_second(self.a, self.b)  # warm-up
        self.interval, self.peak = interval, 0.0
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline or self.peak == 0.0:
            self.peak = max(self.peak, matmul_flops_per_second(self.a, self.b))
        self.sampled_at = time.perf_counter()

    def current(self) -> float:
        """The peak, after one more sample if `interval` seconds have passed since the last."""
        if time.perf_counter() - self.sampled_at >= self.interval:
            self.peak = max(self.peak, matmul_flops_per_second(self.a, self.b))
            self.sampled_at = time.perf_counter()
        return self.peak


def matmul_operands(device: str, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """Two square matrices large enough to run a device's matmul at full speed (1024 on CPU, 8192 on GPU).

    On an H100, 2048 fills about one wave of its 132 SMs: bf16 products of that size ran at 214 TFLOP/s, less
    than a base model's own training step reached, so MFU read 127%. At 8192 they run near the chip's peak.
    """
    size = 8192 if device.startswith("cuda") else 1024
    generator = torch.Generator().manual_seed(0)  # never the global RNG: a resumed run's dropout must not shift
    a = torch.randn(size, size, generator=generator).to(device, dtype)
    b = torch.randn(size, size, generator=generator).to(device, dtype)
    return a, b


def matmul_flops_per_second(a: torch.Tensor, b: torch.Tensor, repeats: int = 4) -> float:
    """FLOP/s of `repeats` products a @ b of square matrices, timed now (one sample of the machine's speed)."""
    device = a.device.type
    _sync(device)
    start = time.perf_counter()
    for _ in range(repeats):
        a @ b
    _sync(device)
    return repeats * 2 * a.shape[0] ** 3 / (time.perf_counter() - start)


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def cpu_has_bf16_instructions() -> bool:
    """AMX or AVX512-BF16. Without them bf16 is emulated: 1 GFLOP/s against fp32's 154 on an AVX2 EPYC (measured)."""
    return torch.cpu._is_amx_tile_supported() or torch.cpu._is_avx512_bf16_supported()


@functools.cache
def cpu_has_fast_bf16() -> bool:
    """Whether bf16 matmuls are measured at least 1.5x faster than fp32 on this CPU (AMX, some AVX512-BF16 chips)."""
    if not cpu_has_bf16_instructions():
        return False  # bf16 would be emulated: always slower
    return measure_peak_flops("cpu", torch.bfloat16, 0.2) > 1.5 * measure_peak_flops("cpu", torch.float32, 0.2)
