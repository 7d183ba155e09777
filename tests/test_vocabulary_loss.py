"""The blockwise masked-LM loss (model/vocabulary_loss.py) against the loss computed from written-out logits."""

import pytest
import torch
import torch.nn.functional as F

from bertforge.labels import IGNORE_INDEX
from bertforge.model import vocabulary_loss
from bertforge.model.bert import BertForPreTraining
from bertforge.model.config import ModelConfig
from bertforge.model.vocabulary_loss import block_rows, linear_cross_entropy


def problem(rows: int = 70, width: int = 24, vocab: int = 200, padded: int = 256, seed: int = 0):
    """h (rows, width), a padded table (padded, width) and its bias (-inf past `vocab`), targets with ignored rows."""
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(rows, width, generator=g).requires_grad_()
    weight = (torch.randn(padded, width, generator=g) * 0.3).requires_grad_()
    bias = (torch.randn(vocab, generator=g) * 0.1).requires_grad_()
    targets = torch.randint(0, vocab, (rows,), generator=g)
    targets[torch.rand(rows, generator=g) < 0.2] = IGNORE_INDEX
    return h, weight, bias, targets


def padded_bias(bias: torch.Tensor, padded: int) -> torch.Tensor:
    return torch.cat([bias, bias.new_full((padded - len(bias),), float("-inf"))])


def reference(h, weight, bias, targets):
    """What the model computed before: F.linear + the fp32 bias, cross-entropy and argmax over the logits."""
    logits = F.linear(h, weight) + padded_bias(bias, len(weight))  # (N, V')
    loss = F.cross_entropy(logits.float(), targets, ignore_index=IGNORE_INDEX)
    counted = targets != IGNORE_INDEX
    return loss, (logits.max(-1).indices[counted] == targets[counted]).sum()


def run(compute, h, weight, bias, targets, precision: str, scale: float = 1.0):
    for t in (h, weight, bias):
        t.grad = None
    with torch.autocast("cpu", torch.bfloat16, enabled=precision == "bf16"):
        loss, correct = compute(h, weight, bias, targets)
    (loss * scale).backward()
    return loss.detach(), int(correct), [t.grad.clone() for t in (h, weight, bias)]


def blockwise(h, weight, bias, targets):
    return linear_cross_entropy(h, weight, padded_bias(bias, len(weight)), targets)


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_blockwise_loss_hits_and_gradients_equal_those_from_the_logits(monkeypatch, precision):
    """Blocks of 16 rows over 70 (the last one ragged), a padded table, ignored rows, and a loss scaled as gradient
    accumulation scales it: the same loss, right predictions and gradients as the written-out logits give."""
    monkeypatch.setattr(vocabulary_loss, "BLOCK_BYTES", 16 * 4 * 256)
    assert block_rows(256) == 16
    problem_ = problem()
    loss, correct, grads = run(blockwise, *problem_, precision, scale=0.25)
    expected_loss, expected_correct, expected_grads = run(reference, *problem_, precision, scale=0.25)
    tolerance = {"rtol": 1e-5, "atol": 1e-6} if precision == "fp32" else {"rtol": 2e-2, "atol": 1e-3}
    torch.testing.assert_close(loss, expected_loss, rtol=1e-5, atol=1e-6)  # fp32 either way: the products agree
    assert correct == expected_correct > 0
    for name, grad, expected in zip(("h", "weight", "bias"), grads, expected_grads):
        torch.testing.assert_close(grad, expected, **tolerance, msg=name)
    assert torch.equal(grads[1][200:], torch.zeros_like(grads[1][200:]))  # the padded rows learn nothing


def test_a_right_prediction_is_the_first_of_tied_maxima_as_argmax_counts_it():
    """Every row's logits tie at the top between its target and an earlier column, or a later one: argmax takes the
    first, so only the rows whose target comes first count."""
    width, vocab = 8, 64
    weight = torch.zeros(vocab, width)
    weight[:, 0] = 1.0  # every column's logit is h[:, 0]: all tie
    h = torch.ones(6, width)
    targets = torch.tensor([0, 5, 0, 7, IGNORE_INDEX, 0])
    loss, correct = linear_cross_entropy(h, weight, torch.zeros(vocab), targets)
    assert int(correct) == 3  # the rows whose target is column 0, the first maximum; not the ignored row
    torch.testing.assert_close(loss, torch.tensor(vocab).log())  # uniform over 64 columns


def test_no_counted_row_gives_a_zero_loss_with_zero_gradients():
    h, weight, bias, targets = problem(rows=16)
    loss, correct, grads = run(blockwise, h, weight, bias, torch.full_like(targets, IGNORE_INDEX), "fp32")
    assert float(loss) == 0.0 and correct == 0
    assert all(torch.equal(grad, torch.zeros_like(grad)) for grad in grads)


def test_without_gradients_no_gradient_is_computed(monkeypatch):
    """Evaluation runs under no_grad, where autograd still reports the inputs as needing gradients: the loss must
    be told, or it fills an (N, V) gradient nobody reads."""
    graded = []
    apply = vocabulary_loss.LinearCrossEntropy.apply
    monkeypatch.setattr(
        vocabulary_loss.LinearCrossEntropy, "apply", lambda *args: graded.append(args[-1]) or apply(*args)
    )
    h, weight, bias, targets = problem(rows=16)
    with torch.no_grad():
        quiet, _ = blockwise(h, weight, bias, targets)
    loud, _ = blockwise(h, weight, bias, targets)
    assert graded == [False, True]
    torch.testing.assert_close(quiet, loud.detach())


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_a_pretraining_step_is_the_same_with_the_logits_kept_or_not(precision):
    """The whole model on a CPU, the masked LM and NSP: loss, right predictions and every parameter's gradient."""
    torch.manual_seed(0)
    config = ModelConfig(
        vocab_size=300, hidden_size=32, num_layers=2, num_heads=4, intermediate_size=64, hidden_dropout=0.0,
        attention_dropout=0.0,
    )  # fmt: skip
    model = BertForPreTraining(config)
    ids = torch.randint(5, 300, (4, 24))
    labels = torch.where(torch.rand(ids.shape) < 0.3, ids, IGNORE_INDEX)
    labels[:, 2] = ids[:, 2]
    pairs = torch.tensor([0, 1, 1, 0])
    results = []
    for keep_logits in (True, False):
        model.zero_grad()
        with torch.autocast("cpu", torch.bfloat16, enabled=precision == "bf16"):
            out = model(ids, mlm_labels=labels, nsp_labels=pairs, keep_logits=keep_logits)
        out.loss.backward()
        grads = {name: p.grad.clone() for name, p in model.named_parameters()}
        results.append((out.loss.detach(), int(out.mlm_correct()), grads))
    (kept, kept_hits, kept_grads), (blockwise, hits, grads) = results
    torch.testing.assert_close(blockwise, kept, rtol=1e-5, atol=1e-6)
    assert hits == kept_hits
    tolerance = {"rtol": 1e-4, "atol": 1e-6} if precision == "fp32" else {"rtol": 5e-2, "atol": 1e-3}
    for name, grad in kept_grads.items():
        torch.testing.assert_close(grads[name], grad, **tolerance, msg=name)
