"""Shared by the benchmarks: the machine they ran on, and batches from our pipeline on real text
(or synthetic with realistic lengths)."""

from __future__ import annotations

import itertools
import platform
import warnings
from pathlib import Path

import numpy as np

from bertforge.data.instances import Instance, PretrainingDataset
from bertforge.data.masking import MaskingCollator
from bertforge.data.prepare import prepare
from bertforge.formats.corpus import read_paragraphs
from bertforge.tokenizer import save_tokenizer, special_ids, train_tokenizer


def machine_description() -> str:
    """CPU model, cores and the ISA flags that decide bf16 speed, with the torch build: one line for a results table.

    The family number tells chips of one name apart: VMs report every AMD as "AMD EPYC", and a family-26 EPYC
    (Zen 5) ran bf16 matmuls 4x faster than fp32 where an earlier AVX-512 BF16 EPYC ran them 1.5x faster.
    """
    import torch

    model, family, flags = platform.processor() or "unknown CPU", "", set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
            elif line.startswith("cpu family") and not family:
                family = f" (family {line.split(':', 1)[1].strip()})"
            elif line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    model += family
    shown = ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_bf16", "amx_tile", "amx_int8")
    wanted = [f for f in shown if f in flags]
    return (
        f"machine: {model}; {torch.get_num_threads()} torch threads; "
        f"flags: {' '.join(wanted) or 'none of avx2/avx512f/vnni/avx512_bf16/amx'}; torch {torch.__version__}"
    )


def resident_mb() -> int:
    """This process's resident memory (VmRSS) in MB; per process, so memory benchmarks run each arm in its own."""
    return int(Path("/proc/self/status").read_text().split("VmRSS:")[1].split()[0]) // 1024


def gutenberg_batches(
    data: Path,
    scratch: Path,
    batch_size: int,
    seq_len: int,
    n_batches: int,
    text_mb: float = 1.0,
    vocab_size: int = 30522,
):
    """Batches from our own pipeline on the first `text_mb` MB of Gutenberg train.txt, or None without it."""
    source = data / "train.txt"
    if not source.is_file():
        return None
    sample = scratch / "sample.txt"
    with open(source, encoding="utf-8") as f:
        sample.write_text(f.read(int(text_mb * 2**20)), encoding="utf-8")
    tokenizer = train_tokenizer((p.text for p in read_paragraphs([sample])), vocab_size=vocab_size, min_frequency=1)
    save_tokenizer(tokenizer, scratch / "tok")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prepare([sample], scratch / "tok", scratch / "data", valid_fraction=0.0, progress=False)
    ids = special_ids(tokenizer)
    dataset = PretrainingDataset(scratch / "data", "train", seq_len, seed=0, cls_id=ids.cls, sep_id=ids.sep)
    # The model's vocabulary is 30522 whatever the sample yields, so both contenders see the same shapes.
    collator = MaskingCollator(tokenizer, seed=0)
    order = np.random.default_rng(0).permutation(len(dataset))
    return [collator([dataset[int(i)] for i in order[b * batch_size : (b + 1) * batch_size]]) for b in range(n_batches)]


def synthetic_batches(batch_size: int, seq_len: int, vocab_size: int, n_batches: int, seed: int = 0):
    """Instances like packed pre-training data: 90% full length, 10% shorter, ids drawn Zipf-like."""
    from tokenizers import Tokenizer, models

    rng = np.random.default_rng(seed)
    vocab = {f"t{i}": i for i in range(vocab_size)}
    for i, special in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]):
        vocab.pop(f"t{i}")
        vocab[special] = i
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    collator = MaskingCollator(tokenizer, seed=seed)
    batches = []
    counter = itertools.count()
    for _ in range(n_batches):
        instances = []
        for _ in range(batch_size):
            length = seq_len if rng.random() < 0.9 else int(rng.integers(16, seq_len))
            body = np.minimum(rng.zipf(1.2, length - 3) + 4, vocab_size - 1)
            split = int(rng.integers(1, length - 3))
            input_ids = np.concatenate([[2], body[:split], [3], body[split:], [3]]).astype(np.int64)
            types = np.zeros(length, dtype=np.int64)
            types[split + 2 :] = 1
            instances.append(Instance(input_ids, types, int(rng.integers(0, 2)), next(counter), 0, 0, 0))
        batches.append(collator(instances))
    return batches
