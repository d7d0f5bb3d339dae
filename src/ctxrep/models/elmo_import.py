"""The bilm-tf / AllenNLP layout of ELMo weights (``options.json`` + ``*_weights.hdf5``) and a
ctxrep ``BiLM``, mapped both ways
(:func:`load_bilm_tf`, :func:`tf_options`, :func:`tf_datasets`); the saved Elmo model
directories on either side are :mod:`ctxrep.models.elmo`'s (``import_elmo``, ``export_elmo``):

    ctxrep import-elmo options.json weights.hdf5 OUT_DIR     # a saved Elmo model directory
    Elmo.from_pretrained(("options.json", "weights.hdf5"))  # the same model, in memory
    ctxrep export-elmo MODEL_DIR OUT_DIR                     # OUT_DIR/options.json, weights.hdf5

The result is an ordinary ``BiLM`` computing what bilm-tf computes with the same weights. It has
no output softmax and no vocabulary (``vocab_size=0``): bilm-tf's ``dump_weights`` leaves the
softmax out, so the published files serve feature extraction only.

Format mapping. TF kernels are (in, out) and multiply from the right; torch weights are (out, in).

options.json -> BiLMConfig / CharIdSpec
  char_cnn.embedding.dim -> char_embed_dim; filters, n_highway (absent: 0), activation;
  max_characters_per_token -> max_chars_per_token and the char spec's max_word_length;
  n_characters: 261 in training options, 262 at inference (the padding row); both accepted.
  lstm.dim -> cell_dim; projection_dim; n_layers (absent: 1); cell_clip, proj_clip (absent: no
  clipping); use_skip_connections (absent: false) -> skip_connections; top-level dropout (absent: 0,
  used in training mode only).

weights.hdf5 -> BiLM state dict
  char_embed (261, E)          -> char_embedding.weight (262, E) with a zero row 0 prepended:
                                  bilm-tf's Batcher adds 1 to every char id so 0 marks padding,
                                  the same ids ``ctxrep.text.elmo_chars`` produces.
  CNN/W_cnn_i (1, w, E, n)     -> convs[i].weight (n, E, w): a VALID conv2d over the chars is a Conv1d;
  CNN/b_cnn_i                  -> convs[i].bias. Max over positions, then the activation (both sides).
  CNN_high_k/{W,b}_transform,  -> highway.layers[k]. bilm-tf gates the transform:
  CNN_high_k/{W,b}_carry            y = g * relu(x W_t + b_t) + (1 - g) * x,   g = sigmoid(x W_c + b_c);
                                  ``Highway`` gates the carried x, y = g' * x + (1 - g') * relu(...),
                                  so g' = 1 - g = sigmoid(-(x W_c + b_c)): the carry kernel and bias
                                  are negated.
  CNN_proj/{W,b}_proj          -> projection (bilm-tf has none when n_filters == projection_dim: identity).
  RNN_d/RNN/MultiRNNCell/Cell{k}/LSTMCell/...   direction d (0 forward, 1 backward), layer k:
    W_0 (P + P, 4C)            -> TF's LSTMCell computes [i, j, f, o] = [x_t; h_{t-1}] W_0 + B with the
                                  gates in the order input, candidate (j), forget, output. The rows for
                                  x_t become weight_ih, those for h_{t-1} weight_hh, and the gate blocks
                                  are reordered to torch's [i, f, g(=j), o].
    B (4C,)                    -> bias_ih, reordered the same way, plus 1.0 on the forget gate: TF adds
                                  forget_bias=1.0 at run time and does not store it in B. bias_hh = 0.
    W_P_0 (C, P)               -> weight_hr: h_t = (sigmoid(o) * tanh(c_t)) W_P_0.
  Clipping as in TF's LSTMCell: c_t is clipped to [-cell_clip, cell_clip] right after its update
  (before the output gate reads it); the projected h_t to [-proj_clip, proj_clip], and that clipped
  h_t is both the layer's output and its next recurrent input. The skip connection (layers k > 0)
  adds the layer's input to its output after the clip, outside the recurrence (TF's ResidualWrapper).
  The backward LM reads each sentence reversed (``tf.reverse_sequence``), as ``BiLM`` does.
  Datasets other than these (e.g. a softmax, if a file had one) are ignored.

One difference by design: bilm-tf's and AllenNLP's inference graphs carry LSTM states from one batch
to the next; ``BiLM`` starts every batch from zero states, which is what they compute on a first batch.

Export is the same mapping inverted (:func:`tf_options`, :func:`tf_datasets`; the command is
:func:`ctxrep.models.elmo.export_elmo`), with what bilm-tf's ``dump_weights``
writes: no softmax and no vocabulary. torch's two LSTM biases become TF's one
(B = bias_ih + bias_hh, less the forget bias TF adds at run time), so a round trip reproduces the
layers up to float rounding of that sum. A biLM whose filters already have the LSTM width
(n_filters == projection_dim) cannot be exported unless its projection is the identity: bilm-tf
has no projection there.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

from ctxrep.errors import InputError
from ctxrep.models.bilm import BiLM, BiLMConfig
from ctxrep.text.elmo_chars import CharIdSpec

TF_FORGET_BIAS = 1.0  # tf.nn.rnn_cell.LSTMCell(forget_bias=1.0), added to the f gate at run time
_MISSING = object()


# -----------------------------------------------------------------------------
# options.json


def read_options(path: str | Path) -> tuple[BiLMConfig, CharIdSpec]:
    """The architecture an ``options.json`` describes; ``InputError`` names the file and key."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: ELMo options file not found")
    try:
        options = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        where = f"line {e.lineno}: {e.msg}" if isinstance(e, json.JSONDecodeError) else str(e)
        raise InputError(f"{path}: not valid JSON ({where})") from e

    def get(key: str, kind: type | tuple[type, ...], default=_MISSING):
        value = options
        for part in key.split("."):
            if not isinstance(value, dict) or part not in value:
                if default is not _MISSING:
                    return default
                raise InputError(f"{path}: key {key!r} is missing (a bilm-tf options file has it)")
            value = value[part]
        if value is None and default is not _MISSING:
            return default
        if not isinstance(value, kind) or (isinstance(value, bool) and kind in (int, float, (int, float))):
            raise InputError(f"{path}: key {key!r} = {value!r}, expected {getattr(kind, '__name__', kind)}")
        return value

    if not isinstance(options, dict) or "char_cnn" not in options:
        raise InputError(f"{path}: key 'char_cnn' is missing; only char-CNN ELMo models can be imported")
    n_characters = get("char_cnn.n_characters", int)
    if n_characters not in (261, 262):
        raise InputError(f"{path}: key 'char_cnn.n_characters' = {n_characters}, expected 261 or 262 "
                         "(bilm-tf's byte-level char ids)")
    cell_dim, projection_dim = get("lstm.dim", int), get("lstm.projection_dim", int)
    if projection_dim >= cell_dim:
        raise InputError(f"{path}: lstm.projection_dim={projection_dim} >= lstm.dim={cell_dim}: an LSTM without "
                         "projection is not supported")
    clips = {key: get(f"lstm.{key}", (int, float), None) for key in ("cell_clip", "proj_clip")}
    try:
        spec = CharIdSpec(max_word_length=get("char_cnn.max_characters_per_token", int))
        config = BiLMConfig(
            vocab_size=0,  # no softmax in the published weights
            n_characters=spec.n_char_ids,
            max_chars_per_token=spec.max_word_length,
            char_embed_dim=get("char_cnn.embedding.dim", int),
            filters=get("char_cnn.filters", list),
            n_highway=get("char_cnn.n_highway", int, 0),
            activation=get("char_cnn.activation", str),
            projection_dim=projection_dim,
            cell_dim=cell_dim,
            n_layers=get("lstm.n_layers", int, 1),
            skip_connections=get("lstm.use_skip_connections", bool, False),
            cell_clip=None if clips["cell_clip"] is None else float(clips["cell_clip"]),
            proj_clip=None if clips["proj_clip"] is None else float(clips["proj_clip"]),
            dropout=float(get("dropout", (int, float), 0.0)),
            # no softmax (vocab_size 0): unused, recorded as every features-only config records them
            softmax="full", n_negatives=8192,
        ).validate()
    except ValueError as e:
        raise InputError(f"{path}: {e}") from e
    return config, spec


# -----------------------------------------------------------------------------
# weights.hdf5


def _reorder_gates(rows: torch.Tensor) -> torch.Tensor:
    """TF's gate blocks [i, j, f, o] (along dim 0) -> torch's [i, f, g=j, o]."""
    i, j, f, o = rows.chunk(4, dim=0)
    return torch.cat([i, f, j, o], dim=0)


def _tf_gates(rows: torch.Tensor) -> torch.Tensor:
    """torch's gate blocks [i, f, g, o] (along dim 0) -> TF's [i, j=g, f, o]."""
    i, f, g, o = rows.chunk(4, dim=0)
    return torch.cat([i, g, f, o], dim=0)


def _state_dict(read, config: BiLMConfig) -> dict[str, torch.Tensor]:
    """``read(key, shape)`` returns one hdf5 dataset as a float32 tensor of that shape."""
    E, K, P, C = config.char_embed_dim, config.n_filters, config.projection_dim, config.cell_dim
    state = {}

    table = read("char_embed", (config.n_characters - 1, E))
    state["token_encoder.char_embedding.weight"] = torch.cat([torch.zeros(1, E), table])
    for i, (width, n) in enumerate(config.filters):
        state[f"token_encoder.convs.{i}.weight"] = read(f"CNN/W_cnn_{i}", (1, width, E, n))[0].permute(2, 1, 0)
        state[f"token_encoder.convs.{i}.bias"] = read(f"CNN/b_cnn_{i}", (n,))
    for k in range(config.n_highway):
        group = f"CNN_high_{k}"
        transform_w, carry_w = read(f"{group}/W_transform", (K, K)), read(f"{group}/W_carry", (K, K))
        transform_b, carry_b = read(f"{group}/b_transform", (K,)), read(f"{group}/b_carry", (K,))
        # Highway's Linear yields [transform, gate]; gate = 1 - TF's carry gate, hence the negation
        state[f"token_encoder.highway.layers.{k}.weight"] = torch.cat([transform_w.T, -carry_w.T])
        state[f"token_encoder.highway.layers.{k}.bias"] = torch.cat([transform_b, -carry_b])
    if K != P:
        state["token_encoder.projection.weight"] = read("CNN_proj/W_proj", (K, P)).T
        state["token_encoder.projection.bias"] = read("CNN_proj/b_proj", (P,))
    else:  # bilm-tf skips the projection when the filters already have the LSTM width
        state["token_encoder.projection.weight"] = torch.eye(P)
        state["token_encoder.projection.bias"] = torch.zeros(P)

    for direction, stack in ((0, "forward_lm"), (1, "backward_lm")):
        for k in range(config.n_layers):
            cell = f"RNN_{direction}/RNN/MultiRNNCell/Cell{k}/LSTMCell"
            kernel = _reorder_gates(read(f"{cell}/W_0", (P + P, 4 * C)).T)  # (4C, P_in + P); input rows first
            bias = _reorder_gates(read(f"{cell}/B", (4 * C,)))
            bias[C : 2 * C] += TF_FORGET_BIAS  # torch's f block
            lstm = f"{stack}.layers.{k}.lstm"
            state[f"{lstm}.weight_ih_l0"] = kernel[:, :P]
            state[f"{lstm}.weight_hh_l0"] = kernel[:, P:]
            state[f"{lstm}.bias_ih_l0"] = bias
            state[f"{lstm}.bias_hh_l0"] = torch.zeros(4 * C)
            state[f"{lstm}.weight_hr_l0"] = read(f"{cell}/W_P_0", (C, P)).T
    return {name: t.contiguous() for name, t in state.items()}


def load_bilm_tf(options_path: str | Path, weights_path: str | Path) -> tuple[BiLM, CharIdSpec]:
    """A ``BiLM`` (eval mode, no softmax) and its char spec from a bilm-tf options/weights pair."""
    import h5py  # only importing published weights needs it

    config, spec = read_options(options_path)
    weights_path = Path(weights_path)
    if not weights_path.is_file():
        raise InputError(f"{weights_path}: ELMo weights file not found")
    try:
        f = h5py.File(weights_path, "r")
    except OSError as e:
        raise InputError(f"{weights_path}: not a readable HDF5 file ({e})") from e

    def read(key: str, shape: tuple[int, ...]) -> torch.Tensor:
        dataset = f.get(key)
        if not isinstance(dataset, h5py.Dataset):
            raise InputError(f"{weights_path}: dataset {key!r} is missing (expected for the architecture in "
                             f"{options_path})")
        if dataset.shape != shape:
            raise InputError(f"{weights_path}: dataset {key!r} has shape {dataset.shape}, expected {shape} "
                             f"from {options_path}")
        return torch.from_numpy(np.asarray(dataset[...], dtype=np.float32))

    with f:
        state = _state_dict(read, config)
    bilm = BiLM(config)
    bilm.load_state_dict(state, strict=True)
    return bilm.eval(), spec


# -----------------------------------------------------------------------------
# export: the same mapping, inverted


def tf_options(config: BiLMConfig, spec: CharIdSpec) -> dict:
    """The ``options.json`` of ``config`` in bilm-tf's keys (what :func:`read_options` reads, plus
    ``bidirectional``)."""
    return {
        "bidirectional": True,
        "char_cnn": {"activation": config.activation, "embedding": {"dim": config.char_embed_dim},
                     "filters": [list(f) for f in config.filters],
                     "max_characters_per_token": spec.max_word_length,
                     "n_characters": config.n_characters, "n_highway": config.n_highway},
        "dropout": config.dropout,
        "lstm": {"dim": config.cell_dim, "projection_dim": config.projection_dim,
                 "n_layers": config.n_layers, "use_skip_connections": config.skip_connections,
                 "cell_clip": config.cell_clip, "proj_clip": config.proj_clip},
    }


def tf_datasets(bilm: BiLM) -> dict[str, np.ndarray]:
    """``bilm``'s weights as bilm-tf's hdf5 datasets (name -> float32 array); the inverse of
    :func:`_state_dict`."""
    config = bilm.config
    K, P, C = config.n_filters, config.projection_dim, config.cell_dim
    state = {name: t.detach().float().cpu() for name, t in bilm.state_dict().items()}
    out = {"char_embed": state["token_encoder.char_embedding.weight"][1:]}  # row 0: padding
    for i in range(len(config.filters)):
        weight = state[f"token_encoder.convs.{i}.weight"]                    # (n, E, w)
        out[f"CNN/W_cnn_{i}"] = weight.permute(2, 1, 0)[None]                # (1, w, E, n)
        out[f"CNN/b_cnn_{i}"] = state[f"token_encoder.convs.{i}.bias"]
    for k in range(config.n_highway):
        weight = state[f"token_encoder.highway.layers.{k}.weight"]          # [transform; gate]
        bias = state[f"token_encoder.highway.layers.{k}.bias"]
        out[f"CNN_high_{k}/W_transform"], out[f"CNN_high_{k}/W_carry"] = weight[:K].T, -weight[K:].T
        out[f"CNN_high_{k}/b_transform"], out[f"CNN_high_{k}/b_carry"] = bias[:K], -bias[K:]
    projection_w = state["token_encoder.projection.weight"]
    projection_b = state["token_encoder.projection.bias"]
    if K != P:
        out["CNN_proj/W_proj"], out["CNN_proj/b_proj"] = projection_w.T, projection_b
    elif not (torch.equal(projection_w, torch.eye(P)) and not projection_b.any()):
        raise InputError(f"n_filters == projection_dim == {P} and the projection is not the "
                         "identity: bilm-tf has no projection layer there, so the biLM cannot "
                         "be written in its layout")
    for direction, stack in ((0, "forward_lm"), (1, "backward_lm")):
        for k in range(config.n_layers):
            lstm, cell = f"{stack}.layers.{k}.lstm", f"RNN_{direction}/RNN/MultiRNNCell/Cell{k}/LSTMCell"
            kernel = torch.cat([state[f"{lstm}.weight_ih_l0"], state[f"{lstm}.weight_hh_l0"]], dim=1)
            bias = state[f"{lstm}.bias_ih_l0"] + state[f"{lstm}.bias_hh_l0"]
            bias[C : 2 * C] -= TF_FORGET_BIAS  # TF adds it back at run time
            out[f"{cell}/W_0"] = _tf_gates(kernel).T                         # (P_in + P, 4C)
            out[f"{cell}/B"] = _tf_gates(bias)
            out[f"{cell}/W_P_0"] = state[f"{lstm}.weight_hr_l0"].T            # (C, P)
    return {name: t.contiguous().numpy().astype(np.float32) for name, t in out.items()}
