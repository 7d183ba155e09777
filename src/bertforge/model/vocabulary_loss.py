"""The masked-LM loss over the whole vocabulary, its gradient computed with it, a cache-sized block of rows at a
time: on a CPU the (N, V) logits never go through main memory in fp32.

Written plainly, the loss over N predicted tokens and V words makes about six passes over (N, V) fp32 in main
memory: the logits with their bias, their log-softmax, its gradient, the gradient's bf16 copy for the decoder's
backward, and the argmax that counts the right predictions. At BERT's 30,522 words, 25% masked at batch 32 × 128,
that is 125 MB a pass. Here the decoder's product is written once in its own dtype (bf16 under autocast); each
block of rows is read back into fp32 and goes through its bias, softmax, loss, argmax and gradient while in
cache, and the gradient overwrites the block's logits; the backward pass is then the decoder's two matmuls
(the idea of Liger's and Cut Cross-Entropy's fused losses, Hsu et al. 2024, Wijmans et al. 2024, without their
kernels).

The gradient is computed in the forward pass, so it costs nothing extra only where a backward pass follows; under
no_grad it is skipped.
"""

from __future__ import annotations

import torch

from ..labels import IGNORE_INDEX

BLOCK_BYTES = 8 << 20  # a block's fp32 logits: at V = 30,528, 68 rows (64 to 128 ran fastest at 2 threads)


def block_rows(vocab: int) -> int:
    return max(16, BLOCK_BYTES // (4 * vocab))


class LinearCrossEntropy(torch.autograd.Function):
    """Mean cross-entropy of logits = h Wᵀ + bias against targets, and the count of rows whose argmax is the target.

    h (N, E) and weight (V, E) in the matmuls' dtype; bias (V,) fp32 (-inf on a padded table's spare rows, which
    then get probability and gradient 0); targets (N,), IGNORE_INDEX on rows that count for nothing. The logits are
    the product in h's dtype, then fp32 with the bias added, as `F.linear(h, weight) + bias` gives them.
    Returns (loss, correct): a 0-d fp32 mean over the counted rows (0 when there are none), and a 0-d int64.
    """

    @staticmethod
    def forward(ctx, h: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, targets: torch.Tensor, graded: bool):
        """`graded`: a backward pass may follow (ctx.needs_input_grad says so under no_grad too)."""
        counted = targets != IGNORE_INDEX  # (N,)
        share = counted / counted.sum().clamp(min=1)  # (N,) each row's weight in the mean
        picked = targets.clamp(min=0)[:, None]  # (N, 1): a valid column for ignored rows too (weight 0)
        products = h @ weight.T  # (N, V) in h's dtype; each block's gradient overwrites it
        grad_bias = torch.zeros_like(bias) if graded and ctx.needs_input_grad[2] else None
        loss = torch.zeros((), dtype=torch.float32, device=h.device)
        correct = torch.zeros((), dtype=torch.int64, device=h.device)
        step = block_rows(len(weight))
        for start in range(0, len(h), step):
            rows = slice(start, start + step)
            logits = products[rows].float().add_(bias)  # (n, V) fp32, the block in cache (in fp32: products itself)
            best, argmax = logits.max(1)  # (n,), (n,): the first maximum wins ties, as argmax
            target_logit = logits.gather(1, picked[rows]).squeeze(1)  # (n,)
            exp = logits.sub_(best[:, None]).exp_()  # (n, V) in place: exp(logit - best)
            total = exp.sum(1)  # (n,)
            loss += (share[rows] * (total.log() + best - target_logit)).sum()
            correct += (counted[rows] & (argmax == picked[rows, 0])).sum()
            if graded:  # d loss / d logits = share · (softmax − one-hot)
                grad = exp.mul_((share[rows] / total)[:, None])  # (n, V)
                grad.scatter_add_(1, picked[rows], -share[rows, None].float())
                products[rows] = grad
                if grad_bias is not None:
                    grad_bias += grad.sum(0)
        ctx.save_for_backward(h, weight, products if graded else None, grad_bias)
        ctx.mark_non_differentiable(correct)
        return loss, correct

    @staticmethod
    def backward(ctx, grad_loss: torch.Tensor, _grad_correct: torch.Tensor):
        h, weight, grad_logits, grad_bias = ctx.saved_tensors
        scale = float(grad_loss)  # 1, or a share of an accumulated step; a CPU's tensor: no sync to wait for
        grad_h = (grad_logits @ weight).mul_(scale) if ctx.needs_input_grad[0] else None  # (N, E)
        grad_weight = (grad_logits.T @ h).mul_(scale) if ctx.needs_input_grad[1] else None  # (V, E)
        grad_bias = grad_bias * scale if grad_bias is not None else None  # (V,)
        return grad_h, grad_weight, grad_bias, None, None


def linear_cross_entropy(
    h: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, targets: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """(loss, correct) of `LinearCrossEntropy`, the matmuls in autocast's dtype where autocast is on (as
    `F.linear` would run them: the table cast once, its gradient flowing back to the fp32 weights)."""
    device = h.device.type
    dtype = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else h.dtype
    graded = torch.is_grad_enabled() and any(t.requires_grad for t in (h, weight, bias))
    with torch.autocast(device, enabled=False):
        return LinearCrossEntropy.apply(h.to(dtype), weight.to(dtype), bias.float(), targets, graded)
