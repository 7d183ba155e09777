"""A model card: the README.md of every model directory, for the people who pick a model up.

    model_card(config, architecture, facts)   the text: Hugging Face's YAML front matter, then what the model
                                              is, what it was trained on, how far it got, and how to load it

`transformers` ignores the file; the Hugging Face Hub shows it and reads its front matter (the library, the
pipeline, the tags). `facts` holds what the caller knows (a pre-training run's recipe, corpus and held-out
scores; a fine-tuning's task, labels and dev scores); a section without facts is left out, never guessed.
"""

from __future__ import annotations

import json
from typing import Any

from ..families import ARCHITECTURES, family_of
from ..model.config import ModelConfig
from ..objectives import pair_objective
from .hf import transformers_support

CARD = "README.md"


def model_card(config: ModelConfig, architecture: str, facts: dict[str, Any] | None = None) -> str:
    """The card of a model of `config` saved as `architecture` (one of ours: BertForPreTraining, ...)."""
    facts = facts or {}
    support = transformers_support(config)
    remote = support == "remote"
    family = family_of(config)
    tag = family.model_type if not remote else "bertforge"
    front = {
        "library_name": "transformers",
        "pipeline_tag": ARCHITECTURES.get(architecture).pipeline_tag,
        "tags": list(
            dict.fromkeys(["bertforge", tag, *([f"recipe-{facts['recipe']}"] if facts.get("recipe") else [])])
        ),
    }
    if facts.get("language"):
        front["language"] = facts["language"]
    lines = ["---", *(f"{key}: {json.dumps(value)}" for key, value in front.items()), "---", ""]
    saved_as = {
        "native": f"`transformers`' {family.title} ({family.hf_architecture(architecture)})",
        "remote": f"{family.title} with its own `transformers` code (modeling_bertforge.py)",
        "none": "bertforge's own (no `transformers` class computes it)",
    }[support]
    lines += [f"# {_title(architecture, facts)}", "", *_architecture(config, saved_as, facts), ""]
    for section in (_corpus(facts), _training(facts), _held_out(facts), _fine_tuning(facts)):
        if section:
            lines += [*section, ""]
    lines += _how_to_load(architecture, remote)
    return "\n".join(lines).rstrip() + "\n"


def card_with_section(card: str, facts: dict[str, Any]) -> str:
    """A model's own card (one it was released with) with a section on what bertforge did to it: the vocabulary it
    extended, or the pre-training it continued (data, steps, held-out scores before and after). A section of the
    same title already there (a run resumed from its checkpoint) is replaced, not repeated."""
    title, lines = _bertforge_section(facts)
    heading = f"## {title}"
    kept = card.rstrip("\n").split("\n")
    if heading in kept:  # cut from that heading to the next one of its level
        start = kept.index(heading)
        end = next((i for i in range(start + 1, len(kept)) if kept[i].startswith("## ")), len(kept))
        kept = kept[:start] + kept[end:]
    return "\n".join([*kept, "", heading, "", *lines]).strip("\n") + "\n"


def _bertforge_section(facts: dict[str, Any]) -> tuple[str, list[str]]:
    exported = facts.get("export")
    if exported:
        graph = f"`{exported['graph']}`, {exported['answers']}, {exported['precision']}"
        lines = [
            f"- exported to ONNX (bertforge export): {graph}; inputs {', '.join(exported['inputs'])}; outputs "
            f"{', '.join(exported['outputs'])}",
            f"- checked against the PyTorch model on {exported['texts']} texts: {exported['check']}",
            "- serve it with ONNX Runtime alone, or with `bertforge embed`, `classify`, `tag` or `answer` here",
        ]
        return "Exported to ONNX with bertforge", lines
    subcloned = facts.get("subcloned")
    if subcloned and not facts.get("training"):
        return "Subcloned with bertforge", [_subcloned(subcloned)]
    if not facts.get("training"):
        extended = facts.get("vocabulary_extended") or {}
        words = f"{extended['words']:,} words" if extended else "words"
        return "Vocabulary extended with bertforge", [
            f"- {words} of a corpus added as tokens (bertforge tokenizer extend), each starting at the mean of its "
            "pieces' embeddings"
        ]
    lines = []
    if facts.get("init_from"):
        lines.append(f"- masked-LM pre-training continued from `{facts['init_from']}`")
    if facts.get("head_warmup"):
        lines.append(
            f"- a new masked-LM head (the model had none), its decoder tied to the token embeddings, trained alone "
            f"for the first {facts['head_warmup']:,} steps, the encoder frozen, then with the encoder"
        )
    corpus = facts.get("corpus")
    if corpus:
        files = ", ".join(f"`{f}`" for f in corpus.get("files", [])[:5])
        lines.append(
            f"- corpus: {files}; {corpus.get('train_tokens', 0):,} training tokens, "
            f"{corpus.get('valid_tokens', 0):,} held out"
        )
    run = facts["training"]
    lines.append(f"- {run['steps']:,} steps, {run['tokens']:,} tokens, {run['seconds'] / 60:.1f} minutes")
    before, after = facts.get("held_out_before"), facts.get("held_out")
    if after:
        scores = (
            f"{before['mlm_acc']:.3f} before, {after['mlm_acc']:.3f} after" if before else f"{after['mlm_acc']:.3f}"
        )
        line = f"- held-out masked-LM accuracy {scores}"
        if after.get("unigram_baseline_acc") is not None:
            line += f" (always guessing the most frequent token: {after['unigram_baseline_acc']:.3f})"
        lines.append(line)
    return "Continued pre-training with bertforge", lines


def _title(architecture: str, facts: dict[str, Any]) -> str:
    if facts.get("task"):
        return f"A BERT fine-tuned for {facts['task']}, made with bertforge"
    if ARCHITECTURES.get(architecture).title:
        return ARCHITECTURES.get(architecture).title
    if facts.get("init_from"):
        return "A model whose pre-training was continued with bertforge"
    return "A BERT pre-trained from scratch with bertforge"


def _architecture(config: ModelConfig, saved_as: str, facts: dict[str, Any]) -> list[str]:
    activation = config.hidden_act.upper()
    feed_forward = (
        f"{'Ge' if activation == 'GELU' else activation}GLU" if config.feed_forward_kind.gated else activation
    )
    shape = (
        f"{config.num_layers} layers, width {config.hidden_size}, {config.num_heads} heads, feed-forward "
        f"{config.intermediate_size} ({feed_forward}), {config.norm_style}-LN, "
        f"{config.position_embedding} positions, a {config.vocab_size:,}-token vocabulary"
    )
    objectives = facts.get("objective", "mlm")
    pair = facts.get("pair_objective")
    if pair and pair_objective(pair).head:
        objectives += f" + {pair}"
    lines = [f"- architecture: {shape}; saved as {saved_as}"]
    if facts.get("recipe") and facts.get("task"):
        lines.append(f"- pre-trained with the `{facts['recipe']}` recipe")
    elif facts.get("recipe"):
        lines.append(f"- recipe: `{facts['recipe']}`; objective: {objectives}")
    if facts.get("init_from"):
        lines.append(f"- started from the weights of `{facts['init_from']}`")
    if facts.get("subcloned"):
        lines.append(_subcloned(facts["subcloned"]))
    if facts.get("vocabulary_extended"):
        extended = facts["vocabulary_extended"]
        lines.append(
            f"- the vocabulary of `{extended['from']}` with {extended['words']:,} words of a corpus added as tokens "
            "(bertforge tokenizer extend), each starting at the mean of its pieces' embeddings"
        )
    if facts.get("base_model"):
        lines.append(f"- fine-tuned from `{facts['base_model']}`")
    return lines


def _subcloned(subcloned: dict[str, Any]) -> str:
    """Where a subclone (bertforge subclone) was cut from: its source, the layers kept, its width."""
    kept = subcloned.get("layers")
    layers = ", ".join(map(str, kept)) if isinstance(kept, list) else ""
    return (
        f"- a subclone of `{subcloned.get('from')}` (bertforge subclone): its layers {layers} and its "
        f"{subcloned.get('hidden_size')} most important dimensions, heads and neurons on the user's text"
    )


def _corpus(facts: dict[str, Any]) -> list[str]:
    corpus = facts.get("corpus")
    if not corpus:
        return []
    files = corpus.get("files", [])
    shown = ", ".join(f"`{f}`" for f in files[:5]) + (f" and {len(files) - 5} more" if len(files) > 5 else "")
    return [
        "## Corpus",
        "",
        f"- files: {shown}",
        f"- {corpus.get('characters', 0):,} characters; {corpus.get('train_tokens', 0):,} training tokens, "
        f"{corpus.get('valid_tokens', 0):,} held out",
    ]


def _training(facts: dict[str, Any]) -> list[str]:
    run = facts.get("training")
    if not run:
        return []
    return [
        "## Training",
        "",
        f"- {run['steps']:,} steps, {run['tokens']:,} tokens, {run['seconds'] / 60:.1f} minutes"
        + (f" on {run['device']}" if run.get("device") else ""),
    ]


def _held_out(facts: dict[str, Any]) -> list[str]:
    scores = facts.get("held_out")
    if not scores:
        return []
    line = f"- masked-LM accuracy {scores['mlm_acc']:.3f}, loss {scores['mlm_loss']:.3f}"
    if scores.get("unigram_baseline_acc") is not None:
        line += f" (always guessing the most frequent token: accuracy {scores['unigram_baseline_acc']:.3f})"
    return ["## Held-out scores", "", line]


def _fine_tuning(facts: dict[str, Any]) -> list[str]:
    if not facts.get("task"):
        return []
    summary = f" ({facts['task_summary']})" if facts.get("task_summary") else ""
    lines = ["## Fine-tuning", "", f"- task: {facts['task']}{summary}"]
    if facts.get("labels"):
        lines.append("- labels: " + ", ".join(f"`{label}`" for label in facts["labels"]))
    dev = facts.get("dev") or {}
    if dev:
        epoch = f" (epoch {facts['best_epoch']})" if facts.get("best_epoch") else ""
        lines.append(f"- dev scores{epoch}: " + ", ".join(f"{k} {v:.4f}" for k, v in dev.items()))
    return lines


def _how_to_load(architecture: str, remote: bool) -> list[str]:
    record = ARCHITECTURES.get(architecture)
    auto = record.loads_with
    trust = ", trust_remote_code=True" if remote else ""
    lines = [
        "## Use",
        "",
        "```python",
        f"from transformers import AutoTokenizer, {auto}",
        'tokenizer = AutoTokenizer.from_pretrained("path/to/this/directory")',
        f'model = {auto}.from_pretrained("path/to/this/directory"{trust})',
        "```",
        "",
        "```bash",
        record.usage.replace("DIR", "path/to/this/directory"),
        "```",
    ]
    if remote:
        lines += ["", "This variant has no `transformers` class: the directory carries its own modelling code."]
    return lines
