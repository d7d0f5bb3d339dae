"""Frozen per-word layer features from the biLM (2L+1 → L+1 mixed-width layers) or BERT (L+1).

ELMo: layer 0 is the char-CNN token layer duplicated to 2P, layers 1..L the [forward; backward]
LSTM states. BERT: the embedding output and every encoder layer, one vector per *word*: its
first sub-word or the mean of its sub-words (``extract.bert_subword_pooling``).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import torch

from ctxrep import kinds, seeds
from ctxrep.families import CORE, LEFT_TO_RIGHT, NAMES
from ctxrep.models.bert import count_parameters, flops_per_token
from ctxrep.models.subword_pooling import pool_subwords
from ctxrep.transfer.features import FieldWriter, examples_fingerprint, task_words

log = logging.getLogger(__name__)


class ElmoFeaturizer:
    """Words → the biLM's layers per word. Counts the words run and their forward FLOPs."""

    def __init__(self, model_dir: Path, device, random_init: bool = False):
        from ctxrep.models.bilm import BiLM, forward_flops_per_token
        from ctxrep.models.elmo import Elmo

        self.elmo = Elmo.from_pretrained(model_dir, device=device)
        if random_init:  # the untrained control: this architecture, freshly initialised
            torch.manual_seed(seeds.RANDOM_INIT)
            self.elmo.bilm.load_state_dict(BiLM(self.elmo.bilm.config).state_dict())
        self.n_layers, self.dim = self.elmo.num_output_layers, self.elmo.output_dim
        self.params = self.elmo.bilm.num_parameters(include_softmax=False)
        self.flops_per_word = forward_flops_per_token(self.elmo.bilm.config, softmax=False)
        self.tokens, self.unit, self.flops = 0, "words", 0.0

    @classmethod
    def from_params(cls, model_dir: Path, device, p, random_init: bool) -> ElmoFeaturizer:
        """As stage extract builds it from its ``extract`` params (none apply to the biLM)."""
        return cls(model_dir, device, random_init)

    @torch.no_grad()
    def __call__(self, batch_words: list[list[str]]) -> list[np.ndarray]:
        inputs = [w if w else ["."] for w in batch_words]  # an empty text runs as one token
        out = self.elmo(inputs)
        n_words = sum(map(len, inputs))
        self.tokens += n_words
        self.flops += n_words * self.flops_per_word
        layers = out.layers.float().cpu().numpy()
        return [layers[i, :, :len(w)] for i, w in enumerate(batch_words)]


class BertFeaturizer:
    """Words → BERT's layers per word: each word's first sub-word, or the mean of its sub-words.

    Words past ``max_seq_len`` sub-words are cut off and get zero vectors (counted in
    ``truncated_words``). Counts the sub-words run and their forward FLOPs."""

    def __init__(self, model_dir: Path, device, pooling: str, max_seq_len: int,
                 random_init: bool = False):
        from transformers import AutoTokenizer

        from ctxrep.models.bert import BertModel
        from ctxrep.models.bert_hf import load_pretrained

        self.model = load_pretrained(model_dir).bert.to(device).eval()
        if random_init:  # the untrained control: this architecture, freshly initialised
            torch.manual_seed(seeds.RANDOM_INIT)
            fresh = BertModel(self.model.config).to(next(self.model.parameters()).dtype)
            self.model.load_state_dict(fresh.state_dict())
        self.tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
        self.device, self.pooling = device, pooling
        self.max_len = min(max_seq_len, self.model.config.max_position_embeddings)
        self.n_layers = self.model.config.num_hidden_layers + 1
        self.dim = self.model.config.hidden_size
        self.params = count_parameters(self.model)
        self.truncated_words, self.tokens, self.unit, self.flops = 0, 0, "sub-word tokens", 0.0

    @classmethod
    def from_params(cls, model_dir: Path, device, p, random_init: bool) -> BertFeaturizer:
        """As stage extract builds it from its ``extract`` params."""
        return cls(model_dir, device, p.bert_subword_pooling, p.bert_max_seq_len, random_init)

    @torch.no_grad()
    def __call__(self, batch_words: list[list[str]]) -> list[np.ndarray]:
        enc = self.tokenizer([w if w else ["."] for w in batch_words], is_split_into_words=True,
                             truncation=True, max_length=self.max_len, padding=True,
                             return_tensors="pt")
        out = self.model(enc["input_ids"].to(self.device), enc["token_type_ids"].to(self.device),
                         enc["attention_mask"].to(self.device), output_hidden_states=True)
        hidden = torch.stack(out.hidden_states, dim=1).float().cpu()  # (B, L+1, T, H)
        for length in enc["attention_mask"].sum(1).tolist():  # forward = 1/3 of training FLOPs
            self.tokens += length
            self.flops += length * flops_per_token(self.model.config, length, 0.0) / 3
        results = []
        for i, words in enumerate(batch_words):
            feats, truncated = pool_subwords(hidden[i], enc.word_ids(i), len(words), self.pooling)
            self.truncated_words += truncated
            results.append(feats)
        return results


def extract_task(featurize, task_splits: dict, kind: str, out_dir: Path, batch_size: int) -> dict:
    """Write every split × field of one task; return its meta."""
    from tqdm.auto import tqdm

    meta = {"n_layers": featurize.n_layers, "dim": featurize.dim, "fields": list(kinds.get(kind).FIELDS),
            "splits": {}}
    for split, dataset in task_splits.items():
        meta["splits"][split] = {"examples": len(dataset),
                                 "fingerprint": examples_fingerprint(dataset, kind)}
        for field in kinds.get(kind).FIELDS:
            writer = FieldWriter(out_dir, split, field)
            words = [task_words(ex, field) for ex in dataset.select_columns([field])]
            for start in tqdm(range(0, len(words), batch_size), desc=f"{out_dir.name}/{split}.{field}",
                              unit="batch", leave=False, disable=None):
                for layers in featurize(words[start:start + batch_size]):
                    writer.add(layers)
            meta["splits"][split][f"{field}_words"] = writer.close()
    (out_dir / "meta.json").write_text(json.dumps(meta, indent=2, sort_keys=True))
    return meta


# Each model family's featurizer, as stage extract@<family> runs it: a core family's names its
# own (``Family.featurizer``); a left-to-right LM is BERT's network.
_CLASSES = {c.__name__: c for c in (ElmoFeaturizer, BertFeaturizer)}
FEATURIZERS = {**{name: _CLASSES[CORE[name].featurizer] for name in NAMES},
               **dict.fromkeys(LEFT_TO_RIGHT, BertFeaturizer)}
