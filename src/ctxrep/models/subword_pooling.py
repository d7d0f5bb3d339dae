"""A word's vector from its sub-words' states, as both BERT featurizers pool them
(:class:`ctxrep.transfer.extract.BertFeaturizer`, :class:`ctxrep.models.hf_features.HFFeaturizer`).

A word split into sub-words s_1..s_m has, at each layer j, the vector

    first   h_j(s_1)                    BERT §5.3's choice
    mean    (1/m) Σ_i h_j(s_i)
    last    h_j(s_m)                    a left-to-right model has read the whole word there
"""

from __future__ import annotations

import numpy as np
import torch

POOLINGS = ("first", "mean", "last")


def word_positions(word_of: torch.Tensor, pooling: str) -> torch.Tensor:
    """The sub-word positions a word's vector is pooled from: ``word_of`` gives each position's
    word (-1 for special tokens and padding); ``first`` keeps each word's first position,
    ``last`` its last, ``mean`` all of them."""
    keep = word_of >= 0
    if pooling == "first":  # word ids ascend: a word's first piece starts a new id
        keep &= word_of != torch.cat([word_of.new_tensor([-1]), word_of[:-1]])
    elif pooling == "last":
        keep &= word_of != torch.cat([word_of[1:], word_of.new_tensor([-1])])
    return keep.nonzero().squeeze(1)


def pool_subwords(hidden: torch.Tensor, word_ids: list[int | None], n_words: int,
                  pooling: str) -> tuple[np.ndarray, int]:
    """One sequence's word vectors (N, n_words, D) from its sub-word states ``hidden`` (N, T, D):
    ``word_ids`` gives each position's word (None for specials and padding; ids past
    ``n_words``, an empty text's stand-in, are no word either), pooled per ``pooling``. Also
    how many words got no sub-word (cut off by the length limit: zero vectors)."""
    word_of = torch.tensor([-1 if w is None or w >= n_words else w for w in word_ids])
    positions = word_positions(word_of, pooling)
    ids = word_of[positions]
    feats = torch.zeros(hidden.shape[0], n_words, hidden.shape[-1])
    feats.index_add_(1, ids, hidden[:, positions])
    counts = torch.bincount(ids, minlength=n_words)
    return (feats / counts.clamp_min(1)[None, :, None]).numpy(), int((counts == 0).sum())
