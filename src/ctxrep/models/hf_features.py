"""Frozen per-word layers of any Hugging Face checkpoint (params ``hf``, method ``hf-<name>``).

A checkpoint that ``transformers.AutoModel`` loads, encoder (BERT, RoBERTa, DistilBERT, ...) or
decoder (GPT-2, ...), with its own tokenizer, gives every layer's hidden states: the embedding
output h_0 and h_1..h_L, N = L + 1 layers of width D. A word is split into sub-words s_1..s_m by
the checkpoint's tokenizer (``is_split_into_words``: the task's words are kept), and its vector
at layer j is pooled from theirs: the first, the mean or the last
(:mod:`ctxrep.models.subword_pooling`).

Special tokens ([CLS], <s>, </s>, ...) and padding belong to no word. Sub-words past
``max_seq_len`` (at most the model's positions) are cut off; their words get zero vectors and
are counted (``truncated_words``). The task model then mixes the N layers as ``bert-feature``
does (γ·Σ softmax(s)_j·h_j) and reads them beside the static word vectors x_k.

Provenance: :func:`~ctxrep.models.hf_checkpoint.checkpoint_record` hashes every file of the
folder (sha256) and names the architecture, so the features say which weights made them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from ctxrep.models.hf_checkpoint import load_config, load_tokenizer, usable_positions
from ctxrep.models.subword_pooling import POOLINGS, pool_subwords



class HFFeaturizer:
    """Words → the checkpoint's N layers per word (an ``extract`` featurizer, as
    :class:`ctxrep.transfer.extract.BertFeaturizer`). Counts the sub-words run and their forward
    FLOPs (2 per parameter per sub-word: the matrix products, attention's own left out)."""

    unit = "sub-word tokens"

    def __init__(self, path: Path | str, device, pooling: str, max_seq_len: int):
        from transformers import AutoModel

        if pooling not in POOLINGS:
            raise ValueError(f"pooling {pooling!r}: expected one of {POOLINGS}")
        path = Path(path)
        config = load_config(path)
        self.model = AutoModel.from_pretrained(path, local_files_only=True).float().to(device).eval()
        self.tokenizer = load_tokenizer(path)
        self.max_len = min(max_seq_len, usable_positions(config) or max_seq_len)
        self.device, self.pooling = device, pooling
        with torch.no_grad():  # N and D as the model gives them (some configs name them otherwise)
            probe, _ = self._hidden([["a"]])
        self.n_layers, self.dim = probe.shape[1], probe.shape[-1]
        self.params = sum(p.numel() for p in self.model.parameters())
        self.truncated_words, self.tokens, self.flops = 0, 0, 0.0

    @classmethod
    def from_params(cls, entry, device) -> HFFeaturizer:
        """As stage ``extract_hf@<name>`` builds it from its ``hf.<name>`` params."""
        return cls(entry.path, device, entry.pooling, entry.max_seq_len)

    def _hidden(self, batch_words: list[list[str]]):
        enc = self.tokenizer(batch_words, is_split_into_words=True, truncation=True,
                             max_length=self.max_len, padding=True, return_tensors="pt")
        inputs = {k: enc[k].to(self.device) for k in self.tokenizer.model_input_names if k in enc}
        out = self.model(**inputs, output_hidden_states=True)
        return torch.stack(out.hidden_states, dim=1).float().cpu(), enc  # (B, N, T, D)

    @torch.no_grad()
    def __call__(self, batch_words: list[list[str]]) -> list[np.ndarray]:
        hidden, enc = self._hidden([w if w else ["."] for w in batch_words])
        lengths = enc["attention_mask"].sum(1).tolist()
        self.tokens += sum(lengths)
        self.flops += 2.0 * self.params * sum(lengths)
        results = []
        for i, words in enumerate(batch_words):
            feats, truncated = pool_subwords(hidden[i], enc.word_ids(i), len(words), self.pooling)
            self.truncated_words += truncated
            results.append(feats)
        return results
