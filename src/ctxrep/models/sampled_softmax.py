"""The biLM's output softmax: full, and sampled with a log-uniform candidate sampler.

Each direction of the biLM scores its next (previous) token with one softmax over the
vocabulary, shared by both directions. Over a large vocabulary training uses the sampled softmax
of Jean et al. (2015), as bilm-tf does (TF's ``sampled_softmax_loss`` with a unique
``log_uniform_candidate_sampler``); held-out perplexity always uses the full one.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F


def full_softmax_nll(hidden: torch.Tensor, targets: torch.Tensor, output: nn.Linear) -> torch.Tensor:
    """-log softmax(W h + b)[y] for each row: (N, P), (N,) -> (N,)."""
    return F.cross_entropy(output(hidden).float(), targets, reduction="none")


def log_uniform_probability(ids: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """P(k) = log((k + 2) / (k + 1)) / log(V + 1): Zipf-like, for ids sorted by descending frequency."""
    return torch.log1p(1.0 / (ids.double() + 1.0)) / math.log(vocab_size + 1)


def sample_log_uniform_unique(n: int, vocab_size: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Draw ids i.i.d. from the log-uniform distribution until n distinct ids are seen.

    Returns the n distinct ids and the number of draws it took (``num_tries``), like TF's
    ``log_uniform_candidate_sampler(unique=True)``. Inverse CDF: k = floor((V + 1)^u) - 1, u ~ U[0, 1).
    """
    log_range = math.log(vocab_size + 1)
    draws = torch.empty(0, dtype=torch.long, device=device)
    while True:
        new = torch.floor(torch.exp(torch.rand(max(2 * n, 64), device=device, dtype=torch.float64) * log_range)) - 1
        draws = torch.cat([draws, new.long().clamp_(0, vocab_size - 1)])  # extend the same i.i.d. sequence
        distinct, which = torch.unique(draws, return_inverse=True)
        if distinct.numel() >= n:
            break
    positions = torch.arange(draws.numel(), device=device)
    first_seen = torch.full_like(distinct, draws.numel()).scatter_reduce(0, which, positions, reduce="amin")
    order = first_seen.argsort()[:n]  # the first n distinct ids in draw order
    return distinct[order], first_seen[order[-1]] + 1


def sampled_softmax_nll(hidden: torch.Tensor, targets: torch.Tensor, output: nn.Linear,
                        n_negatives: int) -> torch.Tensor:
    """Sampled-softmax NLL per row (Jean et al. 2015), as TF's ``sampled_softmax_loss``.

    One set S of ``n_negatives`` distinct candidates is shared by all rows. Each logit is
    corrected by the log of its expected count under the sampler, Q(k) = 1 - (1 - P(k))^num_tries,
        l_y = w_y.h + b_y - log Q(y),   l_s = w_s.h + b_s - log Q(s)   (s in S),
    candidates equal to the row's own target ("accidental hits") are removed, and
        nll = logsumexp([l_y, l_S]) - l_y.
    """
    vocab_size = output.weight.shape[0]
    dtype = torch.promote_types(hidden.dtype, torch.float32)  # logits in fp32 (fp64) under autocast
    candidates, num_tries = sample_log_uniform_unique(n_negatives, vocab_size, hidden.device)

    def log_expected_count(ids: torch.Tensor) -> torch.Tensor:
        p = log_uniform_probability(ids, vocab_size)
        return torch.log(-torch.expm1(num_tries * torch.log1p(-p))).to(dtype)

    # Rows are looked up with F.embedding, not ``weight[ids]``: the backward of advanced indexing
    # on CPU accumulates repeated ids with parallel atomic adds, in a run-to-run varying order.
    # One lookup for targets and candidates together: its backward makes one dense (V, P) gradient.
    n = targets.numel()
    ids = torch.cat([targets, candidates])
    rows, biases = F.embedding(ids, output.weight), F.embedding(ids, output.bias.unsqueeze(1)).squeeze(1)
    corrections = log_expected_count(ids)
    true_logits = ((hidden * rows[:n]).sum(-1) + biases[:n]).to(dtype) - corrections[:n]
    # Accidental hits, found by looking each target up among the candidates (not an (N, S) compare).
    column = torch.full((vocab_size,), -1, dtype=torch.long, device=hidden.device)
    column[candidates] = torch.arange(candidates.numel(), device=hidden.device)
    hit_columns = column[targets]
    hit_rows = (hit_columns >= 0).nonzero().squeeze(1)
    return SampledSoftmaxNll.apply(hidden, true_logits, rows[n:], biases[n:] - corrections[n:],
                                   hit_rows, hit_columns[hit_rows])


class SampledSoftmaxNll(torch.autograd.Function):
    """nll_r = logsumexp([l_ry, l_rS]) - l_ry per row r, the candidates' logits made inside:

        l_S = h W_S^T + b_S             (N, S), -inf at each row's accidental hits
        q   = softmax(l_S)              kept from forward
        Z_S = logsumexp(l_S),  Z = logaddexp(Z_S, l_y),  nll = Z - l_y
        d nll / d l_S = q exp(Z_S - Z),   d nll / d l_y = exp(l_y - Z) - 1

    so that backward is one scaling of q. As autograd ops the (N, S) logits went through a dozen
    full passes (subtract, exp, their backward's fresh copies); here one fused softmax and one
    multiply. Runs in fp32 (or fp64) whatever autocast says (the logits always were fp32).
    Backward scales the saved q in place, so it runs once per forward (a second backward
    through the graph is an error).
    """

    @staticmethod
    def forward(ctx, hidden, true_logits, candidate_weight, candidate_bias, hit_rows, hit_columns):
        with torch.autocast(hidden.device.type, enabled=False):
            dtype = torch.promote_types(hidden.dtype, torch.float32)
            hidden, candidate_weight = hidden.to(dtype), candidate_weight.to(dtype)
            logits = torch.addmm(candidate_bias.to(dtype), hidden, candidate_weight.t())
            logits[hit_rows, hit_columns] = float("-inf")
            probs = torch.softmax(logits, dim=1)
            # Z_S from the largest logit and the largest probability, its own (>= 1 / S: never
            # underflows), so that no pass of exp computes it apart
            candidates_normaliser = logits.amax(dim=1) - probs.amax(dim=1).log()
            normaliser = torch.logaddexp(candidates_normaliser, true_logits)
        ctx.save_for_backward(hidden, candidate_weight, probs, (candidates_normaliser - normaliser).exp(),
                              (true_logits - normaliser).exp())
        return normaliser - true_logits

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        hidden, candidate_weight, probs, candidates_share, true_probability = ctx.saved_tensors
        d_candidates = probs.mul_((grad * candidates_share).unsqueeze(1))
        need = ctx.needs_input_grad
        return (d_candidates @ candidate_weight if need[0] else None, grad * (true_probability - 1),
                d_candidates.t() @ hidden if need[2] else None, d_candidates.sum(0) if need[3] else None,
                None, None)
