"""The ELMo bidirectional language model (Peters et al. 2018), readable top to bottom.

    words --chars--> CharCNN --> x_t (context-free token layer, width P)
    x --> forward LSTM stack  --> h^fwd_{t,1..L}   (each state sees tokens <= t)
    x --> backward LSTM stack --> h^bwd_{t,1..L}   (each state sees tokens >= t)
    h^fwd_{t,L} -> softmax -> p(w_{t+1} | w_<=t)    } one output softmax shared by
    h^bwd_{t,L} -> softmax -> p(w_{t-1} | w_>=t)    } both directions

Conventions (the training loop, `Elmo` and the tests rely on them):

* ``char_ids`` (B, T, 50): sentences wrapped in ``<S>`` ... ``</S>``, encoded by
  ``ctxrep.text.elmo_chars``; real tokens are a left-aligned prefix of each row.
* ``mask`` (B, T) bool: True at real tokens (``<S>`` and ``</S>`` included).
* ``target_ids`` (B, T): the word id of every position, same layout; word ids are sorted by
  descending corpus frequency (sampled softmax's log-uniform sampler assumes it).
* The forward direction predicts ``target_ids[t+1]`` from its top state at t, the backward
  direction ``target_ids[t-1]`` from its top state at t; so forward never predicts ``<S>`` and
  backward never predicts ``</S>``, and each direction makes (length - 1) predictions per sentence.
* The backward LM is the same kind of stack run on each sentence reversed (only its real tokens,
  so padding stays at the end), and its states are reversed back: ``backward_states[l][:, t]``
  is aligned with token t like ``forward_states[l][:, t]``.
* States are zero at padding positions. The model is stateless: nothing carries over between
  batches, so in eval mode a sentence gets the same vectors in any batch.

A biLM without an output softmax (``vocab_size=0``) computes features only: the published
bilm-tf / AllenNLP weights ship none (``ctxrep.models.elmo_import`` loads them); asking such a
model for an LM loss raises ``InputError``.

Parameter count of the `original` preset: 93.6M without the output softmax (as in the paper),
plus (P + 1) * vocab_size for the softmax (+406M for the 793k-word 1B Word Benchmark vocab).
torch's LSTM keeps two bias vectors where TF's keeps one (+65k here).
"""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from ctxrep.errors import InputError
from ctxrep.models import lstmp_cpu
from ctxrep.models.highway import Highway
from ctxrep.models.sampled_softmax import full_softmax_nll, sampled_softmax_nll
from ctxrep.text.elmo_chars import MAX_WORD_LENGTH, N_CHAR_IDS

# -----------------------------------------------------------------------------
# config

# torch's CPU LSTM falls back from oneDNN to its reference kernel when proj_size is set, and says
# so once per process; the fallback is expected here, so the message is noise.
warnings.filterwarnings("ignore", message="LSTM with projections is not supported with oneDNN")

ACTIVATIONS = {"relu": F.relu, "tanh": torch.tanh}
ELMO_FILTERS = [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]]  # 2048 filters
ONE_BILLION_WORD_VOCAB = 793471


@dataclass(kw_only=True)
class BiLMConfig:
    """The biLM's architecture. Its sizes, regularisation and objective have no values here: they
    come from a ``pretrain_bilm`` params section (:meth:`from_params`), a published preset, a
    saved model's ``config.json`` or a published ``options.json``. Only the char-id encoding's
    constants and ELMo's residual connections have defaults."""

    vocab_size: int  # output words, ids sorted by descending frequency; 0 = no softmax (features only)
    # token encoder
    n_characters: int = N_CHAR_IDS  # rows of the char embedding (id 0 = missing word)
    max_chars_per_token: int = MAX_WORD_LENGTH
    char_embed_dim: int
    filters: list[list[int]]  # [width, n_filters] per filter
    n_highway: int
    activation: str  # after the max-pool over chars; highway uses ReLU
    # LSTM stacks
    projection_dim: int  # width of the token layer and of every LSTM output (P)
    cell_dim: int  # LSTM memory cell size (C), projected down to P
    n_layers: int
    skip_connections: bool = True  # residual connections between LSTM layers (bilm-tf use_skip_connections)
    cell_clip: float | None  # clip the memory cell to [-c, c] (bilm-tf: 3); None = no clipping
    proj_clip: float | None  # clip the projected state to [-c, c] (bilm-tf: 3); None = no clipping
    dropout: float  # on every LSTM input and on the top states before the softmax
    # output
    softmax: str  # "full" | "sampled" (training objective; evaluation is always full)
    n_negatives: int  # sampled softmax: unique candidates per batch

    def validate(self) -> BiLMConfig:
        """Raise ValueError naming the first bad key; return self."""

        def fail(key: str, why: str) -> None:
            raise ValueError(f"BiLMConfig.{key}={getattr(self, key)!r}: {why}")

        for key in ("n_characters", "max_chars_per_token", "char_embed_dim",
                    "projection_dim", "cell_dim", "n_layers", "n_negatives"):
            value = getattr(self, key)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                fail(key, "must be a positive integer")
        vocab_size = self.vocab_size
        if not isinstance(vocab_size, int) or isinstance(vocab_size, bool) or vocab_size == 1 or vocab_size < 0:
            fail("vocab_size", "must be >= 2, or 0 for a biLM without output softmax (features only)")
        if not isinstance(self.skip_connections, bool):
            fail("skip_connections", "must be true or false")
        if not self.filters or not all(
            isinstance(f, (list, tuple)) and len(f) == 2 and all(isinstance(v, int) and v >= 1 for v in f)
            for f in self.filters
        ):
            fail("filters", "must be a non-empty list of [width, n_filters] pairs of positive integers")
        if max(width for width, _ in self.filters) > self.max_chars_per_token:
            fail("filters", f"a filter is wider than max_chars_per_token={self.max_chars_per_token}")
        if not isinstance(self.n_highway, int) or self.n_highway < 0:
            fail("n_highway", "must be a non-negative integer")
        if self.activation not in ACTIVATIONS:
            fail("activation", f"must be one of {sorted(ACTIVATIONS)}")
        if self.projection_dim >= self.cell_dim:
            fail("projection_dim", f"must be smaller than cell_dim={self.cell_dim}: the projection reduces the cell")
        for key in ("cell_clip", "proj_clip"):
            value = getattr(self, key)
            if value is not None and not (isinstance(value, (int, float)) and value > 0):
                fail(key, "must be null (no clipping) or a positive number")
        if not (isinstance(self.dropout, (int, float)) and 0 <= self.dropout < 1):
            fail("dropout", "must be in [0, 1)")
        if self.softmax not in ("full", "sampled"):
            fail("softmax", "must be 'full' or 'sampled'")
        if self.softmax == "sampled" and self.vocab_size and self.n_negatives >= self.vocab_size:
            fail("n_negatives", f"must be smaller than vocab_size={self.vocab_size} for the sampled softmax")
        return self

    @property
    def n_filters(self) -> int:
        return sum(n for _, n in self.filters)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> BiLMConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        for key in data:
            if key not in known:
                raise ValueError(f"BiLMConfig: unknown key {key!r} (expected some of {sorted(known)})")
        data = dict(data)
        if "filters" in data and isinstance(data["filters"], (list, tuple)):
            data["filters"] = [list(f) if isinstance(f, (list, tuple)) else f for f in data["filters"]]
        return cls(**data).validate()

    @classmethod
    def from_params(cls, p, vocab_size: int) -> BiLMConfig:
        """The architecture a ``pretrain_bilm`` params section (``ctxrep.config.BiLMParams``)
        describes: its size keys, or a published ``preset``."""
        common = dict(vocab_size=vocab_size, dropout=p.dropout, softmax=p.softmax,
                      n_negatives=p.n_negatives)
        if p.preset != "custom":
            return cls.preset(p.preset, **common)
        sizes = ("projection_dim", "cell_dim", "n_layers", "filters", "n_highway",
                 "char_embed_dim", "activation", "cell_clip", "proj_clip")
        return cls.from_dict({**{k: getattr(p, k) for k in sizes}, **common})

    @classmethod
    def preset(cls, name: str, **overrides) -> BiLMConfig:
        """A published ELMo size (see PRESETS), with e.g. ``vocab_size=`` of your corpus."""
        if name not in PRESETS:
            raise ValueError(f"unknown BiLM preset {name!r}, expected one of {sorted(PRESETS)}")
        return cls.from_dict({**PRESETS[name], **overrides})


# The released AllenNLP/bilm-tf models: elmo_2x{cell}_{proj}_2048cnn_{n}xhighway, trained on the
# 1B Word Benchmark with a sampled softmax of 8192 negatives.
_PUBLISHED = dict(filters=ELMO_FILTERS, char_embed_dim=16, activation="relu", n_layers=2, cell_clip=3.0, proj_clip=3.0,
                  dropout=0.1, softmax="sampled", n_negatives=8192, vocab_size=ONE_BILLION_WORD_VOCAB)
PRESETS: dict[str, dict] = {
    "small": dict(_PUBLISHED, cell_dim=1024, projection_dim=128, n_highway=1),  # 2x1024_128_2048cnn_1xhighway
    "medium": dict(_PUBLISHED, cell_dim=2048, projection_dim=256, n_highway=1),  # 2x2048_256_2048cnn_1xhighway
    "original": dict(_PUBLISHED, cell_dim=4096, projection_dim=512, n_highway=2),  # 2x4096_512_2048cnn_2xhighway
}

# -----------------------------------------------------------------------------
# token encoder


class CharCNN(nn.Module):
    """Context-free word vectors from characters (Kim et al. 2016, as in ELMo).

    For one word with char ids c_1..c_W (W = max_chars_per_token):
        e_i = E[c_i]                                        char embedding, (W, char_embed_dim)
        z_k = act(max_i conv_k(e)_i)                        one feature per filter, K = sum n_filters
        x   = Highway(z)                                    n_highway layers, ReLU
        out = W_p x + b_p                                   projection to projection_dim
    The vector depends only on the word's characters, so any word, seen or not, gets one, and
    each distinct word in a batch is encoded once (running text repeats its words: a batch of
    64 Wikipedia sentences holds about 2 tokens per distinct word). A word's padding makes every
    window past its last character read the same ids, so the max over those windows is the
    value of any one of them: the batch's chars are cut after the longest word plus the widest
    filter (``content_width``), which keeps one such window per word and skips about half of the
    convolutions on Wikipedia's words (same value, same gradient, up to rounding).
    """

    def __init__(self, config: BiLMConfig) -> None:
        super().__init__()
        self.char_embedding = nn.Embedding(config.n_characters, config.char_embed_dim, padding_idx=0)
        self.convs = nn.ModuleList(nn.Conv1d(config.char_embed_dim, n, width) for width, n in config.filters)
        self.activation = ACTIVATIONS[config.activation]
        self.highway = Highway(config.n_filters, config.n_highway, activation=F.relu)
        self.projection = nn.Linear(config.n_filters, config.projection_dim)
        self.widest_filter = max(width for width, _ in config.filters)

    def forward(self, char_ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """(B, T, W) char ids -> (B, T, P) token vectors, zero where ``mask`` is False."""
        B, T, W = char_ids.shape
        words, occurrence = distinct_rows(char_ids.reshape(B * T, W))
        words = words[:, :content_width(words, self.widest_filter)]
        # (distinct words, E, width), Conv1d's layout, made once (each conv would copy it, both ways)
        chars = self.char_embedding(words).transpose(1, 2).contiguous()
        # max, not amax: the same value and, summed, the same gradient (tied windows read the same
        # characters); its backward scatters to one position where amax's compares and divides
        features = torch.cat([conv(chars).max(dim=-1).values for conv in self.convs], dim=-1)
        vectors = self.projection(self.highway(self.activation(features)))
        # Looked up with F.embedding, not indexing: its backward sums a word's occurrences in a
        # fixed order (indexing's backward uses parallel atomic adds on CPU).
        tokens = F.embedding(occurrence, vectors)
        return tokens.view(B, T, -1) * mask.unsqueeze(-1)


def content_width(words: torch.Tensor, widest: int) -> int:
    """How many leading char positions of (N, W) ``words`` a max-pooled convolution of widths up
    to ``widest`` needs: the last position where some word's id differs from its final id (its
    padding), plus 1, plus ``widest``, at most W.

    Every window that starts at or after that last differing position reads one id over and over
    (each word's own padding id), so all of a word's windows there give one value. Cutting at the
    width returned keeps, for every filter width w, the window that starts there (it ends by the
    cut) and drops only copies of it: the max is unchanged, and where a dropped copy held it, the
    kept one reads the same ids, so the gradient is unchanged too.
    """
    W = words.shape[1]
    differs = (words != words[:, -1:]).any(dim=0).nonzero()
    content = int(differs[-1]) + 1 if len(differs) else 0
    return min(W, content + widest)


def distinct_rows(rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``torch.unique(rows, dim=0, return_inverse=True)`` for (N, W) integer rows, in another
    (fixed) order and about four times faster at a batch's 400 x 50 char ids.

    Each row is keyed by a dot product with fixed random coefficients below 2^31 (ids below
    2^9 keep every key under 2^46: no overflow), keys are made unique, and each key's first row
    stands for it. Two distinct rows with one key are caught by checking that every row is the
    row standing for it, and then ``torch.unique(dim=0)`` answers instead: exact either way.
    """
    coefficients = torch.randint(1, 2**31, (rows.shape[1],), generator=torch.Generator().manual_seed(0))
    keys = (rows * coefficients.to(rows.device)).sum(1)
    _, inverse = torch.unique(keys, return_inverse=True)
    positions = torch.arange(rows.shape[0], device=rows.device)
    first = torch.full((int(inverse.max()) + 1,), rows.shape[0], device=rows.device)
    first = first.scatter_reduce(0, inverse, positions, reduce="amin")
    distinct = rows[first]
    if not torch.equal(distinct[inverse], rows):
        return torch.unique(rows, dim=0, return_inverse=True)
    return distinct, inverse


# -----------------------------------------------------------------------------
# LSTM stacks


class LstmWithProjection(nn.Module):
    """One LSTM layer whose output is a projection of the cell output (LSTMP, Sak et al. 2014).

        [i, f, g, o] = W_ih x_t + W_hh h_{t-1} + b                     (gates of width C)
        c_t = sigmoid(f) * c_{t-1} + sigmoid(i) * tanh(g)             clipped to [-cell_clip, cell_clip]
        h_t = W_hr (sigmoid(o) * tanh(c_t))                           (width P), clipped to [-proj_clip, proj_clip]

    Without clipping this is exactly ``torch.nn.LSTM(proj_size=P)``: on GPU one cuDNN call, on CPU
    (fp32) the C++ time loop of ``lstmp_cpu``, which is faster than torch's there. With clipping,
    the same parameters run through the explicit loop below.
    """

    def __init__(self, input_dim: int, cell_dim: int, projection_dim: int,
                 cell_clip: float | None = None, proj_clip: float | None = None) -> None:
        super().__init__()
        self.lstm = nn.LSTM(input_dim, cell_dim, proj_size=projection_dim, batch_first=True)
        self.cell_clip = cell_clip
        self.proj_clip = proj_clip
        self.clipped = cell_clip is not None or proj_clip is not None
        with torch.no_grad():  # forget-gate bias 1: remember by default (Jozefowicz et al. 2015)
            self.lstm.bias_ih_l0[cell_dim : 2 * cell_dim].fill_(1.0)
            self.lstm.bias_hh_l0[cell_dim : 2 * cell_dim].zero_()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, input_dim) -> (B, T, P); the state at t depends on x_1..x_t only."""
        return self.run_together([self], [x])[0]

    @staticmethod
    def run_together(layers: list[LstmWithProjection], xs: list[torch.Tensor]) -> list[torch.Tensor]:
        """``[layer(x) for layer, x in zip(layers, xs)]`` for independent layers; on CPU (fp32, no
        clipping) one call of the C++ kernel, which runs their time loops concurrently."""
        if not any(layer.clipped for layer in layers) and all(lstmp_cpu.applies(x) for x in xs):
            return lstmp_cpu.lstmp(xs, [layer.lstm for layer in layers])
        return [layer._forward_clipped(x) if layer.clipped else layer.lstm(x)[0] for layer, x in zip(layers, xs)]

    def _forward_clipped(self, x: torch.Tensor) -> torch.Tensor:
        lstm = self.lstm
        B, T, _ = x.shape
        x_gates = F.linear(x, lstm.weight_ih_l0, lstm.bias_ih_l0 + lstm.bias_hh_l0)  # all steps in one matmul
        h = x.new_zeros(B, lstm.proj_size)
        c = torch.zeros(B, lstm.hidden_size, device=x.device, dtype=torch.float32)  # the cell stays fp32 under autocast
        outputs = []
        for t in range(T):
            gates = (x_gates[:, t] + F.linear(h, lstm.weight_hh_l0)).float()
            i, f, g, o = gates.chunk(4, dim=-1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            if self.cell_clip is not None:
                c = c.clamp(-self.cell_clip, self.cell_clip)
            h = F.linear(torch.sigmoid(o) * torch.tanh(c), lstm.weight_hr_l0)
            if self.proj_clip is not None:
                h = h.clamp(-self.proj_clip, self.proj_clip)
            outputs.append(h)
        return torch.stack(outputs, dim=1)


class LstmStack(nn.Module):
    """One direction of the biLM: n_layers LSTMP layers, residual connections from layer 2 on.

        h_0 = x,   h_l = LSTMP_l(dropout(h_{l-1})) + (h_{l-1} if l > 1 and skip_connections else 0)
    Returns [h_1, ..., h_L], each zeroed at padding. The residual is added to the layer's output
    only; the layer's own recurrence uses its (clipped) projected state, as TF's ResidualWrapper.
    """

    def __init__(self, config: BiLMConfig) -> None:
        super().__init__()
        P, C = config.projection_dim, config.cell_dim
        self.layers = nn.ModuleList(
            LstmWithProjection(P, C, P, config.cell_clip, config.proj_clip) for _ in range(config.n_layers)
        )
        self.dropout = nn.Dropout(config.dropout)
        self.skip_connections = config.skip_connections

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> list[torch.Tensor]:
        return run_stacks([self], [x], mask)[0]


def run_stacks(stacks: list[LstmStack], xs: list[torch.Tensor], mask: torch.Tensor) -> list[list[torch.Tensor]]:
    """Each stack's ``forward`` on its input, layer l of every stack run together
    (``LstmWithProjection.run_together``): the biLM's two directions are independent, so their
    layers can share the machine's cores."""
    states = [[] for _ in stacks]
    for index in range(len(stacks[0].layers)):
        layers = [stack.layers[index] for stack in stacks]
        hs = layers[0].run_together(layers, [stack.dropout(x) for stack, x in zip(stacks, xs)])
        for stack, h, x, out in zip(stacks, hs, xs, states):
            if index > 0 and stack.skip_connections:  # residuals connect LSTM layers, not the token layer to layer 1
                h = h + x
            out.append(h * mask.unsqueeze(-1))
        xs = [out[-1] for out in states]
    return states


def reverse_padded(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Reverse the first lengths[b] steps of each row of x (B, T, ...); padding stays where it is."""
    T = x.shape[1]
    steps = torch.arange(T, device=x.device).unsqueeze(0)  # (1, T)
    source = lengths.unsqueeze(1) - 1 - steps  # position t reads from length - 1 - t
    source = torch.where(source >= 0, source, steps)
    source = source.view(*source.shape, *([1] * (x.dim() - 2))).expand_as(x)
    return x.gather(1, source)


# -----------------------------------------------------------------------------
# the biLM


@dataclass
class BiLMOutput:
    token_layer: torch.Tensor  # (B, T, P), context-free
    forward_states: list[torch.Tensor]  # L x (B, T, P); state t has seen tokens <= t
    backward_states: list[torch.Tensor]  # L x (B, T, P); state t has seen tokens >= t


@dataclass
class LMLoss:
    """Summed token NLL and predicted-token counts per direction (sums, so DDP can all-reduce them)."""

    forward_nll: torch.Tensor
    backward_nll: torch.Tensor
    forward_tokens: torch.Tensor
    backward_tokens: torch.Tensor

    @property
    def loss(self) -> torch.Tensor:
        """The training loss: mean of the two directions' per-token NLL (as bilm-tf)."""
        forward = self.forward_nll / self.forward_tokens.clamp_min(1)
        backward = self.backward_nll / self.backward_tokens.clamp_min(1)
        return 0.5 * (forward + backward)


class BiLM(nn.Module):
    def __init__(self, config: BiLMConfig) -> None:
        super().__init__()
        self.config = config.validate()
        self.token_encoder = CharCNN(config)
        self.forward_lm = LstmStack(config)
        self.backward_lm = LstmStack(config)
        self.dropout = nn.Dropout(config.dropout)
        self.softmax: nn.Linear | None = None  # shared by both directions; none for feature-only weights
        if config.vocab_size:
            self.softmax = nn.Linear(config.projection_dim, config.vocab_size)
            nn.init.normal_(self.softmax.weight, std=config.projection_dim**-0.5)
            nn.init.zeros_(self.softmax.bias)

    def lstm_implementation(self, device: torch.device) -> str:
        """What runs the LSTM layers' time loop on ``device`` (fp32): for a run's record."""
        # the test LstmWithProjection.forward makes, asked of a layer and an fp32 tensor on device
        if self.forward_lm.layers[0].clipped:
            return "explicit loop (clipping)"
        if lstmp_cpu.applies(torch.empty(0, device=device)):
            return "ctxrep.models.lstmp_cpu (C++)"
        return "torch.nn.LSTM"

    def num_parameters(self, include_softmax: bool = True) -> int:
        n = sum(p.numel() for p in self.parameters())
        if include_softmax or self.softmax is None:
            return n
        return n - sum(p.numel() for p in self.softmax.parameters())

    def _require_softmax(self) -> nn.Linear:
        if self.softmax is None:
            raise InputError(
                "this biLM has no output softmax (vocab_size=0): its weights were imported for feature "
                "extraction (published bilm-tf/AllenNLP checkpoints ship no softmax and no vocabulary), so it "
                "cannot compute an LM loss or perplexity. Training needs a softmax over a word vocabulary: "
                "pretrain a biLM with the pretrain_bilm stage instead."
            )
        return self.softmax

    def forward(self, char_ids: torch.Tensor, mask: torch.Tensor) -> BiLMOutput:
        """char_ids (B, T, W), mask (B, T) -> token layer and per-layer states of both directions."""
        lengths = mask.sum(dim=1)
        tokens = self.token_encoder(char_ids, mask)
        # backward LM: read each sentence right to left, then put the states back in reading order
        forward_states, reversed_states = run_stacks(
            [self.forward_lm, self.backward_lm], [tokens, reverse_padded(tokens, lengths)], mask)
        backward_states = [reverse_padded(h, lengths) for h in reversed_states]
        return BiLMOutput(tokens, forward_states, backward_states)

    def _prediction_pairs(self, out: BiLMOutput, target_ids: torch.Tensor, mask: torch.Tensor):
        """Top states and the words they predict: forward t -> t+1, backward t -> t-1, real pairs only."""
        pairs = mask[:, :-1] & mask[:, 1:]  # pair (t, t+1) of real tokens
        forward_hidden = out.forward_states[-1][:, :-1][pairs]
        backward_hidden = out.backward_states[-1][:, 1:][pairs]
        return forward_hidden, target_ids[:, 1:][pairs], backward_hidden, target_ids[:, :-1][pairs]

    def lm_loss(self, char_ids: torch.Tensor, target_ids: torch.Tensor, mask: torch.Tensor) -> LMLoss:
        """The training objective, with the softmax named by ``config.softmax``."""
        softmax = self._require_softmax()
        out = self(char_ids, mask)
        pairs = self._prediction_pairs(out, target_ids, mask)
        forward_hidden, forward_targets, backward_hidden, backward_targets = pairs
        hidden = self.dropout(torch.cat([forward_hidden, backward_hidden]))
        targets = torch.cat([forward_targets, backward_targets])
        if self.config.softmax == "sampled":
            nll = sampled_softmax_nll(hidden, targets, softmax, self.config.n_negatives)
        else:
            nll = full_softmax_nll(hidden, targets, softmax)
        n = forward_targets.numel()
        count = torch.tensor(n, device=nll.device)
        return LMLoss(nll[:n].sum(), nll[n:].sum(), count, count.clone())

    @torch.no_grad()
    def exact_nll(self, char_ids: torch.Tensor, target_ids: torch.Tensor, mask: torch.Tensor) -> LMLoss:
        """Evaluation: the full-softmax NLL whatever ``config.softmax`` is (perplexity = exp(nll / tokens))."""
        softmax = self._require_softmax()
        out = self(char_ids, mask)
        pairs = self._prediction_pairs(out, target_ids, mask)
        forward_hidden, forward_targets, backward_hidden, backward_targets = pairs
        rows = max(1, 2**26 // self.config.vocab_size)  # bound the (rows, V) logits to ~256 MB

        def nll_sum(hidden: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
            total = torch.zeros((), device=hidden.device, dtype=torch.float32)
            for start in range(0, targets.numel(), rows):
                total += full_softmax_nll(hidden[start : start + rows], targets[start : start + rows], softmax).sum()
            return total

        count = torch.tensor(forward_targets.numel(), device=char_ids.device)
        return LMLoss(nll_sum(forward_hidden, forward_targets), nll_sum(backward_hidden, backward_targets),
                      count, count.clone())


# -----------------------------------------------------------------------------
# cost model


def flops_per_token(config: BiLMConfig) -> float:
    """Analytic training FLOPs per token: 3 x the forward FLOPs (backward ~ 2 x forward)."""
    return 3.0 * forward_flops_per_token(config, softmax=True)


def forward_flops_per_token(config: BiLMConfig, softmax: bool) -> float:
    """Analytic forward FLOPs per token, 2 per multiply-add, elementwise work ignored.

    Counts the char convolutions, highway, token projection, both LSTM stacks (input, recurrent
    and projection matmuls) and, with ``softmax``, both directions' output softmax (full: V
    logits; sampled: n_negatives + 1; assumes every position is predicted in both directions,
    each sentence makes length - 1, slightly fewer). Feature extraction runs without it.
    """
    P, C = config.projection_dim, config.cell_dim
    lstm_layer = 2 * (P + P) * 4 * C + 2 * C * P
    lstms = 2 * config.n_layers * lstm_layer
    logits = config.vocab_size if config.softmax == "full" else config.n_negatives + 1
    output = 2 * 2 * P * logits if softmax else 0
    return token_encoder_flops(config) + lstms + output


def token_encoder_flops(config: BiLMConfig, chars: int | None = None) -> float:
    """Forward FLOPs of the char-CNN token encoder for one word: convolutions, highway, projection,
    the convolutions over ``chars`` positions (the model's: ``max_chars_per_token``)."""
    E, K, P = config.char_embed_dim, config.n_filters, config.projection_dim
    W = config.max_chars_per_token if chars is None else chars
    char_cnn = sum(2 * (W - width + 1) * width * E * n for width, n in config.filters)
    highway = config.n_highway * 2 * K * (2 * K)
    return char_cnn + highway + 2 * K * P
