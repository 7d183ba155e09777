"""`bertforge demo`: placeholder until the pre-training loop lands."""

from pathlib import Path


def run_demo(out: Path, fast: bool = False) -> None:
    print("bertforge demo: the model, Hugging Face interop and fill-mask are in place;")
    print("tokenizer training, data preparation and pre-training come next.")
