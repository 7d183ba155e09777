"""Pseudo-log-likelihood: each token masked in turn, scored as `transformers` scores it, and the command around it."""

from __future__ import annotations

import json

import pytest
import torch

from bertforge.inference import load

from conftest import bertforge, bertforge_ok, needs, one_line_error, save_random_model

TEXTS = ["the cat sat on the mat.", "the mat sat on the cat."]


def test_each_token_is_masked_in_turn_and_scored_as_transformers_scores_it(tmp_path, wordpiece_tokenizer):
    transformers = needs("transformers")
    model_dir = save_random_model(tmp_path / "model", wordpiece_tokenizer, num_layers=2)
    ours = load(model_dir).pseudo_log_likelihood(TEXTS[0], batch_size=3)  # 3 at a time: batches of masked copies
    theirs = transformers.AutoModelForMaskedLM.from_pretrained(model_dir).eval()
    encoding = wordpiece_tokenizer.encode(TEXTS[0])
    expected = []
    for position, special in enumerate(encoding.special_tokens_mask):
        if special:
            continue
        ids = torch.tensor([encoding.ids])
        ids[0, position] = wordpiece_tokenizer.token_to_id("[MASK]")
        with torch.no_grad():
            log_probs = theirs(input_ids=ids).logits[0, position].log_softmax(-1)
        expected.append((encoding.tokens[position], float(log_probs[encoding.ids[position]])))
    assert [t["token"] for t in ours["tokens"]] == [token for token, _ in expected]
    assert [t["log_prob"] for t in ours["tokens"]] == pytest.approx([lp for _, lp in expected], abs=1e-4)
    assert ours["pll"] == pytest.approx(sum(lp for _, lp in expected), abs=1e-3)
    assert ours["pseudo_perplexity"] == pytest.approx(torch.tensor(-ours["pll"] / len(expected)).exp().item())


def test_the_command_scores_texts_given_or_read_and_marks_the_most_natural(tmp_path, wordpiece_tokenizer):
    model_dir = save_random_model(tmp_path / "model", wordpiece_tokenizer)
    bert = load(model_dir)
    expected = [bert.pseudo_log_likelihood(text) for text in TEXTS]
    given = json.loads(bertforge_ok("pll", model_dir, *TEXTS, "--json").stdout)
    assert [r["pll"] for r in given] == pytest.approx([r["pll"] for r in expected], abs=1e-5)
    (tmp_path / "texts.txt").write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    read = json.loads(bertforge_ok("pll", model_dir, "--input", tmp_path / "texts.txt", "--json").stdout)
    assert [r["text"] for r in read] == TEXTS and [r["pll"] for r in read] == pytest.approx([r["pll"] for r in given])
    lines = bertforge_ok("pll", model_dir, *TEXTS).stdout.splitlines()
    best = max(range(2), key=lambda i: expected[i]["pll"])
    assert [line.startswith("*") for line in lines] == [i == best for i in range(2)]
    assert all(repr(text) in line for text, line in zip(TEXTS, lines))
    one_line_error(bertforge("pll", model_dir), "give one or more texts, or --input FILE")
    one_line_error(bertforge("pll", model_dir, "   "), "the text has no tokens to score")
