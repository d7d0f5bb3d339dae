"""Frozen per-word layers of any Hugging Face checkpoint (params ``hf``, method ``hf-<name>``).

A checkpoint that ``transformers.AutoModel`` loads, encoder (BERT, RoBERTa, DistilBERT, ...) or
decoder (GPT-2, ...), with its own tokenizer, gives every layer's hidden states: the embedding
output h_0 and h_1..h_L, N = L + 1 layers of width D. A word is split into sub-words s_1..s_m by
the checkpoint's tokenizer (``is_split_into_words``: the task's words are kept), and its vector
at layer j is pooled from theirs:

    first   h_j(s_1)                    BERT §5.3's choice
    mean    (1/m) Σ_i h_j(s_i)
    last    h_j(s_m)                    a left-to-right model has read the whole word there

Special tokens ([CLS], <s>, </s>, ...) and padding belong to no word. Sub-words past
``max_seq_len`` (at most the model's positions) are cut off; their words get zero vectors and
are counted (``truncated_words``). The task model then mixes the N layers as ``bert-feature``
does (γ·Σ softmax(s)_j·h_j) and reads them beside the static word vectors x_k.

Provenance: :func:`checkpoint_record` hashes every file of the folder (sha256) and names the
architecture, so the features say which weights made them.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

from ctxrep.io import sha256_file

POOLINGS = ("first", "mean", "last")


def checkpoint_record(path: Path) -> dict:
    """What the checkpoint folder is: its architecture and the sha256 of every file in it."""
    config = json.loads((path / "config.json").read_text())
    files = sorted(p for p in path.rglob("*") if p.is_file() and ".cache" not in p.parts)
    return {"path": str(path), "model_type": config.get("model_type"),
            "architectures": config.get("architectures"),
            "files": {p.relative_to(path).as_posix(): sha256_file(p) for p in files}}


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


class HFFeaturizer:
    """Words → the checkpoint's N layers per word (an ``extract`` featurizer, as
    :class:`ctxrep.transfer.extract.BertFeaturizer`). Counts the sub-words run and their forward
    FLOPs (2 per parameter per sub-word: the matrix products, attention's own left out)."""

    unit = "sub-word tokens"

    def __init__(self, path: Path | str, device, pooling: str, max_seq_len: int):
        from transformers import AutoConfig, AutoModel, AutoTokenizer

        if pooling not in POOLINGS:
            raise ValueError(f"pooling {pooling!r}: expected one of {POOLINGS}")
        path = Path(path)
        config = AutoConfig.from_pretrained(path, local_files_only=True)
        if config.is_encoder_decoder:
            raise ValueError(f"{path}: an encoder-decoder checkpoint ({config.model_type}); "
                             "save its encoder alone (e.g. T5EncoderModel) and name that folder")
        self.model = AutoModel.from_pretrained(path, local_files_only=True).float().to(device).eval()
        self.tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        if self.tokenizer.is_fast and "ByteLevel" in json.dumps(
                json.loads(self.tokenizer.backend_tokenizer.to_str()).get("pre_tokenizer")):
            # Byte-level BPE (GPT-2, RoBERTa) takes pre-split words only with a space before
            # each, as they come in running text
            self.tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True,
                                                           add_prefix_space=True)
        if not self.tokenizer.is_fast:
            raise ValueError(f"{path}: its tokenizer has no fast (Rust) version, which maps "
                             "sub-words back to words")
        if self.tokenizer.pad_token is None:  # GPT-2: no padding token; the mask hides padding
            self.tokenizer.pad_token = self.tokenizer.eos_token or self.tokenizer.unk_token
        self.tokenizer.padding_side = "right"  # a left-to-right model's real states stay first
        positions = [getattr(config, key, None) for key in ("max_position_embeddings", "n_positions")]
        self.max_len = min([max_seq_len, *(p for p in positions if p)])
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
            # The word of each position; -1 for special tokens, padding and an empty text's ".".
            word_of = torch.tensor([-1 if w is None or w >= len(words) else w
                                    for w in enc.word_ids(i)])
            positions = word_positions(word_of, self.pooling)
            ids = word_of[positions]
            feats = torch.zeros(self.n_layers, len(words), self.dim)
            feats.index_add_(1, ids, hidden[i][:, positions])
            counts = torch.bincount(ids, minlength=len(words))
            self.truncated_words += int((counts == 0).sum())
            results.append((feats / counts.clamp_min(1)[None, :, None]).numpy())
        return results
