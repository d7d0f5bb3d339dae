"""Feature-based task models: frozen features → ScalarMix → task BiLSTM → head.

As in Peters et al. (2018, §3.3), the contextual vector of word k is mixed from the layers,

    ELMo_k = γ Σ_j softmax(s)_j h_{k,j}

and concatenated with the word's context-independent representation x_k — here the static
word vectors trained on the same corpus (``ctxrep.models.word_vectors``; the paper's GloVe) —
before the task encoder: [ELMo_k; x_k]. ``elmo-io`` also concatenates a second mix, with its
own weights, to the encoder's output. Methods differ only in what they read and how the
layers are combined:

    static        x_k alone (no model features): the paper's baseline
    elmo-token    the biLM's token layer (layer 0) alone, no x_k: a control
    elmo-last     the top layer; x_k
    elmo-avg      an equal, fixed mix; x_k
    elmo          a learned mix (with λ·‖s − mean s‖² pulling it toward equal); x_k
    elmo-io       learned mixes at the encoder's input and output; x_k
    bert-feature  a learned mix over BERT's L+1 layers; x_k
    elmo-random   as ``elmo``, on the features of an untrained biLM (control)
    bert-random   as ``bert-feature``, on the features of an untrained BERT (control)

The heads on the encoder are their task kinds' (``ctxrep.kinds.<kind>``, e.g.
:class:`~ctxrep.kinds.tagging.Tagger`); they see a text field's frozen inputs as one
:class:`WordFeatures` (``batch["layers"]``, ``batch["layers2"]``) and pass it to the encoder
unopened.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from ctxrep import config
from ctxrep.families.records import AVERAGE, LAST, LEARNED, TOKEN
from ctxrep.models.scalar_mix import ScalarMix


@dataclass
class WordFeatures:
    """The frozen inputs of a batch of one text field: the model's layers (B, N, T, D) and the
    static word vectors x_k (B, T, Dw), each None when the method does not read it."""

    layers: torch.Tensor | None = None
    vectors: torch.Tensor | None = None


class LayerCombiner(nn.Module):
    """(B, N, T, D) layers → (B, T, D), combined as ``mix`` says (ctxrep.families.records: a
    learned or a fixed equal scalar mix, the token layer or the top layer); ``weights()`` for the
    report."""

    def __init__(self, mix: str, n_layers: int, layer_norm: bool):
        super().__init__()
        self.combination = mix
        self.mix = None
        if mix == LEARNED:
            self.mix = ScalarMix(n_layers, do_layer_norm=layer_norm)
        elif mix == AVERAGE:
            self.mix = ScalarMix(n_layers, do_layer_norm=layer_norm, trainable=False)

    def forward(self, layers: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        if self.combination == TOKEN:
            return layers[:, 0]
        if self.combination == LAST:
            return layers[:, -1]
        return self.mix(layers, mask)

    def penalty(self, coef: float) -> torch.Tensor:
        if self.mix is None or not self.mix.scalars.requires_grad:
            return torch.zeros(())
        return self.mix.penalty(coef)

    def weights(self) -> list[float] | None:
        return None if self.mix is None else [round(float(w), 6) for w in self.mix.weights()]


class FeatureEncoder(nn.Module):
    """[combined layers; x_k] → dropout → BiLSTM (→ [states; output mix] for elmo-io).

    ``n_layers`` × ``dim``: the model features the method reads (0 × 0 for ``static``);
    ``vector_dim``: the size of x_k (0 for ``elmo-token``, which reads none)."""

    def __init__(self, method: str, n_layers: int, dim: int, hidden: int, n_rnn_layers: int,
                 dropout: float, layer_norm: bool, vector_dim: int = 0):
        super().__init__()
        if not config.is_feature_method(method):
            raise ValueError(f"unknown feature-based method {method!r}")
        self.method = method
        record = config.method_record(method)
        self.reads_layers = config.features_of(method) is not None
        self.reads_vectors = config.reads_word_vectors(method)
        if self.reads_layers != (n_layers > 0 and dim > 0):
            raise ValueError(f"{method} {'reads' if self.reads_layers else 'reads no'} model "
                             f"features: got n_layers={n_layers}, dim={dim}")
        if self.reads_vectors != (vector_dim > 0):
            raise ValueError(f"{method} {'reads' if self.reads_vectors else 'reads no'} word "
                             f"vectors: got vector_dim={vector_dim}")
        self.input_mix = LayerCombiner(record.mix, n_layers, layer_norm) if self.reads_layers else None
        in_dim = (dim if self.reads_layers else 0) + (vector_dim if self.reads_vectors else 0)
        self.dropout = nn.Dropout(dropout)
        self.rnn = nn.LSTM(in_dim, hidden, num_layers=n_rnn_layers, batch_first=True,
                           bidirectional=True, dropout=dropout if n_rnn_layers > 1 else 0.0)
        # the output's mix has weights of its own (ELMo Table 3)
        self.output_mix = LayerCombiner(record.mix, n_layers, layer_norm) if record.at_output else None
        self.out_dim = 2 * hidden + (dim if self.output_mix is not None else 0)

    def forward(self, inputs: WordFeatures, mask: torch.Tensor) -> torch.Tensor:
        """inputs: layers (B, N, T, D) and/or x_k (B, T, Dw); mask (B, T) → (B, T, out_dim),
        zero at padding."""
        parts = []
        if self.reads_layers:
            parts.append(self.input_mix(inputs.layers, mask))
        if self.reads_vectors:
            parts.append(inputs.vectors)
        x = torch.cat(parts, dim=-1) if len(parts) > 1 else parts[0]
        lengths = mask.sum(1).clamp_min(1).cpu()
        packed = pack_padded_sequence(self.dropout(x), lengths, batch_first=True,
                                      enforce_sorted=False)
        states, _ = pad_packed_sequence(self.rnn(packed)[0], batch_first=True,
                                        total_length=x.shape[1])
        if self.output_mix is not None:
            states = torch.cat([states, self.output_mix(inputs.layers, mask)], dim=-1)
        return self.dropout(states) * mask[..., None]

    def penalty(self, coef: float) -> torch.Tensor:
        p = self.input_mix.penalty(coef) if self.input_mix is not None else torch.zeros(())
        return p + self.output_mix.penalty(coef) if self.output_mix is not None else p

    def mix_weights(self) -> dict:
        out = {"input": self.input_mix.weights() if self.input_mix is not None else None}
        if self.output_mix is not None:
            out["output"] = self.output_mix.weights()
        return out


def pool(states: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Max- and mean-pool over real positions: (B, T, H) → (B, 2H)."""
    m = mask[..., None]
    mx = states.masked_fill(~m, float("-inf")).amax(1).nan_to_num(0.0, neginf=0.0)
    mean = (states * m).sum(1) / m.sum(1).clamp_min(1)
    return torch.cat([mx, mean], dim=-1)


def mlp(in_dim: int, hidden: int, out_dim: int, dropout: float) -> nn.Sequential:
    """Linear → ReLU → Dropout → Linear: W_2 Dropout(max(0, W_1 x + b_1)) + b_2."""
    return nn.Sequential(nn.Linear(in_dim, hidden), nn.ReLU(), nn.Dropout(dropout),
                         nn.Linear(hidden, out_dim))
