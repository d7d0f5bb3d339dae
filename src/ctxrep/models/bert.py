"""BERT (Devlin et al. 2019), readable top to bottom.

    BertConfig          sizes and regularisation, validated; Turc et al. (2019) named sizes
    Embeddings          token + learned absolute position + segment, LayerNorm, dropout
    SelfAttention       multi-head scaled dot-product attention (fused QKV, SDPA kernel)
    FeedForward         Linear -> GELU (erf) -> Linear
    EncoderLayer        post-LN as in BERT, or pre-LN
    BertModel           embeddings + L encoder layers + [CLS] pooler; with ``is_decoder`` each
                        position attends to itself and its left only (a left-to-right LM, the
                        ablation of BERT's Table 5), and the pooler reads the last token
    MaskedLMHead        dense -> GELU -> LayerNorm -> tied decoder + bias
    BertForPreTraining  BertModel + MLM head + NSP head; the training forward decodes masked
                        positions only

Parameter names are ctxrep's own; `ctxrep.models.bert_hf` maps them to and from Hugging Face's
`BertForPreTraining` layout, so checkpoints written here load in `transformers` as-is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

IGNORE_INDEX = -100  # label value for positions that carry no MLM target (PyTorch's convention)

# Turc et al. (2019) "Well-read students learn better": name -> (layers, hidden); heads = hidden / 64.
NAMED_SIZES = {
    "tiny": (2, 128),
    "mini": (4, 256),
    "small": (4, 512),
    "medium": (8, 512),
    "base": (12, 768),
}

# ----------------------------------------------------------------------------------------------
# Configuration


@dataclass(kw_only=True)
class BertConfig:
    """Sizes and regularisation of a BERT encoder. Field names follow Hugging Face's BertConfig.
    The sizes and dropout have no values here: they come from a ``pretrain_bert`` params section
    (:meth:`from_params`) or a checkpoint's config (:func:`~ctxrep.models.bert_hf.config_from_hf`).
    Only BERT's own constants have defaults."""

    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    intermediate_size: int
    max_position_embeddings: int
    type_vocab_size: int = 2
    hidden_dropout_prob: float
    attention_probs_dropout_prob: float
    layer_norm_eps: float = 1e-12
    initializer_range: float = 0.02
    pre_layer_norm: bool  # False: post-LN as in BERT; True: LayerNorm before each sublayer
    pad_token_id: int = 0
    is_decoder: bool = False  # causal self-attention: a left-to-right LM (Hugging Face's name)

    @classmethod
    def named(cls, name: str, vocab_size: int, **overrides) -> BertConfig:
        """A named size (tiny, mini, small, medium, base) with 4x feed-forward width; the
        overrides give the rest (position embeddings, dropout, pre-LN)."""
        if name not in NAMED_SIZES:
            raise ValueError(f"name: unknown BERT size {name!r}; expected one of {sorted(NAMED_SIZES)}")
        layers, hidden = NAMED_SIZES[name]
        sizes = dict(
            vocab_size=vocab_size,
            hidden_size=hidden,
            num_hidden_layers=layers,
            num_attention_heads=hidden // 64,
            intermediate_size=4 * hidden,
        )
        return cls(**{**sizes, **overrides}).validate()

    @classmethod
    def from_params(cls, p, vocab_size: int, pad_token_id: int = 0,
                    is_decoder: bool = False) -> BertConfig:
        """The architecture a ``pretrain_bert`` (or ``pretrain_gpt``) params section
        (``ctxrep.config.BertParams``) describes: a named ``size``, or the custom size keys."""
        common = dict(vocab_size=vocab_size, max_position_embeddings=p.max_position_embeddings,
                      hidden_dropout_prob=p.dropout, attention_probs_dropout_prob=p.dropout,
                      pre_layer_norm=p.pre_layer_norm, pad_token_id=pad_token_id,
                      is_decoder=is_decoder)
        if p.size != "custom":
            return cls.named(p.size, **common)
        return cls(hidden_size=p.hidden_size, num_hidden_layers=p.num_hidden_layers,
                   num_attention_heads=p.num_attention_heads,
                   intermediate_size=p.intermediate_size, **common).validate()

    @property
    def head_size(self) -> int:
        return self.hidden_size // self.num_attention_heads

    def validate(self) -> BertConfig:
        """Raise ValueError naming the offending key; return self so calls can be chained."""
        positive = (
            "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
            "intermediate_size", "max_position_embeddings", "type_vocab_size",
        )  # fmt: skip
        for key in positive:
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{key}: expected a positive integer, got {value!r}")
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"hidden_size: {self.hidden_size} is not divisible by "
                f"num_attention_heads={self.num_attention_heads}"
            )
        for key in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            value = getattr(self, key)
            if not 0.0 <= value < 1.0:
                raise ValueError(f"{key}: expected a probability in [0, 1), got {value!r}")
        for key in ("layer_norm_eps", "initializer_range"):
            if not getattr(self, key) > 0:
                raise ValueError(f"{key}: expected a positive number, got {getattr(self, key)!r}")
        if not 0 <= self.pad_token_id < self.vocab_size:
            raise ValueError(f"pad_token_id: {self.pad_token_id} is outside the vocabulary [0, {self.vocab_size})")
        for key in ("pre_layer_norm", "is_decoder"):
            if not isinstance(getattr(self, key), bool):
                raise ValueError(f"{key}: expected true or false, got {getattr(self, key)!r}")
        return self


# ----------------------------------------------------------------------------------------------
# Encoder


class Embeddings(nn.Module):
    """x_t = Dropout(LayerNorm(E_word[w_t] + E_position[t] + E_segment[s_t]))."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.word = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id)
        self.position = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.segment = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(input_ids.size(1), device=input_ids.device)
        x = self.word(input_ids) + self.position(positions) + self.segment(token_type_ids)
        return self.dropout(self.norm(x))


class SelfAttention(nn.Module):
    """Multi-head attention: concat_h softmax(Q_h K_h^T / sqrt(d_h) + M) V_h, then W_o.

    Q, K and V come from one fused projection (one matmul instead of three). M is -inf at padded
    keys (and, in a left-to-right model, at every key right of the query). The score matrix never
    leaves the SDPA kernel.
    """

    def __init__(self, config: BertConfig):
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.dropout_p = config.attention_probs_dropout_prob
        self.qkv = nn.Linear(config.hidden_size, 3 * config.hidden_size)
        self.out = nn.Linear(config.hidden_size, config.hidden_size)

    def forward(self, x: torch.Tensor, key_mask: torch.Tensor | None) -> torch.Tensor:
        """x: (B, T, H); key_mask: (B, 1, 1, T) or (B, 1, T, T) bool, True where a key may be
        attended, or None."""
        batch, length, hidden = x.shape
        # (B, T, 3H) -> 3 x (B, heads, T, head_size)
        q, k, v = self.qkv(x).view(batch, length, 3, self.num_heads, -1).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(
            q, k, v, attn_mask=key_mask, dropout_p=self.dropout_p if self.training else 0.0
        )
        return self.out(y.transpose(1, 2).reshape(batch, length, hidden))


class FeedForward(nn.Module):
    """FFN(x) = W_2 GELU(W_1 x + b_1) + b_2, with the exact (erf) GELU as in BERT."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.up = nn.Linear(config.hidden_size, config.intermediate_size)
        self.down = nn.Linear(config.intermediate_size, config.hidden_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.gelu(self.up(x)))


class EncoderLayer(nn.Module):
    """One Transformer encoder layer.

    post-LN (BERT):  x = LN_1(x + Drop(Attn(x)));   x = LN_2(x + Drop(FFN(x)))
    pre-LN:          x = x + Drop(Attn(LN_1(x)));   x = x + Drop(FFN(LN_2(x)))
    """

    def __init__(self, config: BertConfig):
        super().__init__()
        self.pre_layer_norm = config.pre_layer_norm
        self.attention = SelfAttention(config)
        self.attention_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.feed_forward = FeedForward(config)
        self.feed_forward_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, x: torch.Tensor, key_mask: torch.Tensor | None) -> torch.Tensor:
        if self.pre_layer_norm:
            x = x + self.dropout(self.attention(self.attention_norm(x), key_mask))
            return x + self.dropout(self.feed_forward(self.feed_forward_norm(x)))
        x = self.attention_norm(x + self.dropout(self.attention(x, key_mask)))
        return self.feed_forward_norm(x + self.dropout(self.feed_forward(x)))


class Pooler(nn.Module):
    """pooled = tanh(W h_s + b): the sentence representation the NSP head and the sentence-level
    task heads read. s is [CLS] (position 0); in a left-to-right model, where [CLS] has read
    nothing, s is the last real token, the only one that has read the whole input (as GPT's
    classifier reads its last token, Radford et al. 2018)."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)

    def forward(self, hidden: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
        """positions: (B,) the token each row pools, or None for position 0."""
        summary = hidden[:, 0] if positions is None else hidden[torch.arange(len(hidden)), positions]
        return torch.tanh(self.dense(summary))


class BertOutput(NamedTuple):
    last_hidden_state: torch.Tensor  # (B, T, H)
    pooled_output: torch.Tensor  # (B, H)
    hidden_states: tuple[torch.Tensor, ...] | None  # L + 1 tensors (B, T, H): embeddings, then each layer


class BertModel(nn.Module):
    """The BERT encoder: embeddings, a stack of encoder layers and the [CLS] pooler."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.config = config.validate()
        self.embeddings = Embeddings(config)
        self.layers = nn.ModuleList(EncoderLayer(config) for _ in range(config.num_hidden_layers))
        # pre-LN leaves the residual stream un-normalised; one LayerNorm closes the stack.
        self.final_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps) if config.pre_layer_norm else None
        self.pooler = Pooler(config)
        self.apply(lambda module: init_bert_weights(module, config))

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        output_hidden_states: bool = False,
    ) -> BertOutput:
        """input_ids, token_type_ids, attention_mask: (B, T); attention_mask is 1 at real tokens, 0 at padding.

        attention_mask=None means no padding; on CUDA that lets SDPA pick its flash kernel.
        """
        if input_ids.size(1) > self.config.max_position_embeddings:
            raise ValueError(
                f"input_ids: length {input_ids.size(1)} exceeds "
                f"max_position_embeddings={self.config.max_position_embeddings}"
            )
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        # (B, T) -> (B, 1, 1, T): broadcast over heads and query positions.
        key_mask = None if attention_mask is None else attention_mask.bool()[:, None, None, :]
        pooled_at = None
        if self.config.is_decoder:  # and, per query t, the keys <= t: (T, T) broadcast over B
            length = input_ids.size(1)
            causal = torch.ones(length, length, dtype=torch.bool, device=input_ids.device).tril()
            key_mask = causal if key_mask is None else key_mask & causal
            pooled_at = (torch.full_like(input_ids[:, 0], length - 1) if attention_mask is None
                         else attention_mask.sum(1) - 1)

        x = self.embeddings(input_ids, token_type_ids)
        hidden_states = [x]
        for layer in self.layers:
            x = layer(x, key_mask)
            hidden_states.append(x)
        if self.final_norm is not None:
            x = self.final_norm(x)
            hidden_states[-1] = x  # so hidden_states[-1] is last_hidden_state for both layouts
        return BertOutput(x, self.pooler(x, pooled_at),
                          tuple(hidden_states) if output_hidden_states else None)


# ----------------------------------------------------------------------------------------------
# Pretraining heads


class MaskedLMHead(nn.Module):
    """logits = LayerNorm(GELU(W h + b)) E_word^T + b_vocab.

    The decoder matrix is the word-embedding matrix E_word (tied), passed in at call time so the
    parameter exists once; only the per-token output bias b_vocab belongs to this head.
    """

    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))

    def forward(self, hidden: torch.Tensor, word_embeddings: torch.Tensor) -> torch.Tensor:
        return F.linear(self.norm(F.gelu(self.dense(hidden))), word_embeddings, self.bias)


class PreTrainingOutput(NamedTuple):
    """Losses and accuracy counts; counts are tensors so logging them never forces a device sync."""

    loss: torch.Tensor  # mlm_loss + nsp_loss (nsp_loss only when NSP labels are given)
    mlm_loss: torch.Tensor  # mean cross-entropy over masked positions
    nsp_loss: torch.Tensor | None  # mean cross-entropy over sequences, None without NSP labels
    mlm_correct: torch.Tensor  # number of masked positions predicted right
    mlm_count: torch.Tensor  # number of masked positions
    nsp_correct: torch.Tensor | None
    nsp_count: torch.Tensor | None
    mlm_hits: torch.Tensor | None = None  # (masked positions,) bool, row-major: predicted right


class PreTrainingLogits(NamedTuple):
    mlm_logits: torch.Tensor  # (B, T, V)
    nsp_logits: torch.Tensor  # (B, 2): index 0 = IsNext, 1 = NotNext (random B)


class BertForPreTraining(nn.Module):
    """BERT with the masked-LM and next-sentence-prediction heads."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.config = config
        self.bert = BertModel(config)
        self.mlm = MaskedLMHead(config)
        self.nsp = nn.Linear(config.hidden_size, 2)
        for module in (self.mlm, self.nsp):
            module.apply(lambda m: init_bert_weights(m, config))

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        next_sentence_label: torch.Tensor | None = None,
    ) -> PreTrainingOutput:
        """Training forward. labels: (B, T), the original token id at masked positions and -100
        elsewhere; next_sentence_label: (B,), 0 = IsNext, 1 = NotNext, or None for MLM only.

        Only the masked positions (about 15%) go through the MLM transform and the vocabulary
        projection, which is the most expensive matmul in a small BERT.
        """
        if labels is None:
            raise ValueError("labels: the pretraining forward needs MLM labels; use .logits() for inference")
        encoded = self.bert(input_ids, token_type_ids, attention_mask)
        is_masked = labels != IGNORE_INDEX
        targets = labels[is_masked]
        mlm_logits = self.mlm(encoded.last_hidden_state[is_masked], self.bert.embeddings.word.weight)
        # sum / max(count, 1): a batch with no masked token gives loss 0, not NaN.
        mlm_count = targets.new_tensor(targets.numel())
        mlm_loss = F.cross_entropy(mlm_logits.float(), targets, reduction="sum") / mlm_count.clamp(min=1)
        with torch.no_grad():
            mlm_hits = mlm_logits.argmax(-1) == targets
            mlm_correct = mlm_hits.sum()

        nsp_loss = nsp_correct = nsp_count = None
        loss = mlm_loss
        if next_sentence_label is not None:
            nsp_logits = self.nsp(encoded.pooled_output)
            nsp_loss = F.cross_entropy(nsp_logits.float(), next_sentence_label)
            loss = loss + nsp_loss
            with torch.no_grad():
                nsp_correct = (nsp_logits.argmax(-1) == next_sentence_label).sum()
                nsp_count = next_sentence_label.new_tensor(next_sentence_label.numel())
        return PreTrainingOutput(loss, mlm_loss, nsp_loss, mlm_correct, mlm_count, nsp_correct,
                                 nsp_count, mlm_hits)

    def logits(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
    ) -> PreTrainingLogits:
        """MLM logits at every position and NSP logits, as Hugging Face's BertForPreTraining returns."""
        encoded = self.bert(input_ids, token_type_ids, attention_mask)
        return PreTrainingLogits(
            self.mlm(encoded.last_hidden_state, self.bert.embeddings.word.weight),
            self.nsp(encoded.pooled_output),
        )


# ----------------------------------------------------------------------------------------------
# Initialisation, optimiser groups, FLOPs


@torch.no_grad()
def init_bert_weights(module: nn.Module, config: BertConfig) -> None:
    """BERT's initialisation, with std ``config.initializer_range`` (:func:`init_weights`)."""
    init_weights(module, config.initializer_range)


@torch.no_grad()
def init_weights(module: nn.Module, std: float) -> None:
    """BERT's initialisation: weights ~ N(0, std), biases 0, LayerNorm gain 1 and bias 0."""
    if isinstance(module, nn.Linear):
        nn.init.normal_(module.weight, std=std)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
    elif isinstance(module, nn.Embedding):
        nn.init.normal_(module.weight, std=std)
        if module.padding_idx is not None:
            module.weight[module.padding_idx].zero_()
    elif isinstance(module, nn.LayerNorm):
        nn.init.ones_(module.weight)
        nn.init.zeros_(module.bias)


def flops_per_token(config: BertConfig, seq_len: int, masked_fraction: float = 0.15) -> float:
    """Training FLOPs per input token (forward + backward = 3 x forward), for MFU.

    Counts the matmuls a pretraining step needs (Kaplan et al. 2020; Chowdhery et al. 2022):
      encoder weights:  6 * L * (4 H^2 + 2 H I)            (QKV + output projection, FFN)
      attention:        6 * L * 2 * T * H                  (Q K^T and A V for each query)
      MLM head:         6 * masked_fraction * (H^2 + H V)  (transform + tied decoder, masked tokens only)
    Embedding lookups, LayerNorms, the pooler and the NSP head are negligible and not counted.
    Useful work only: a model that decodes every position does more FLOPs, not more model FLOPs.
    """
    hidden, inner, layers = config.hidden_size, config.intermediate_size, config.num_hidden_layers
    encoder_weights = layers * (4 * hidden * hidden + 2 * hidden * inner)
    attention = layers * 2 * seq_len * hidden
    mlm_head = masked_fraction * (hidden * hidden + hidden * config.vocab_size)
    return 6.0 * (encoder_weights + attention + mlm_head)


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


__all__ = [
    "IGNORE_INDEX",
    "NAMED_SIZES",
    "BertConfig",
    "BertModel",
    "BertOutput",
    "BertForPreTraining",
    "PreTrainingOutput",
    "PreTrainingLogits",
    "init_bert_weights",
    "flops_per_token",
    "count_parameters",
]
