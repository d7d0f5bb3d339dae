"""Elmo: a pretrained biLM as a feature extractor, saved and loaded as a directory.

    elmo = Elmo.from_pretrained("data/models/bilm")
    out = elmo([["The", "cat", "sat"], ["Hi"]])
    out.layers  # (B, L + 1, T, 2P): layer 0 = [x; x] (token layer, duplicated to width 2P),
                #                    layer l = [h^fwd_l; h^bwd_l]
    out.mask    # (B, T) real words; <S> and </S> are not part of the output

Files of a saved model: ``model.safetensors`` (weights, loaded only through safetensors),
``config.json`` (``BiLMConfig``), ``vocab.txt`` (the output words, one per line, id = line
number) and ``char_spec.json`` (``CharIdSpec``).

Published ELMo weights (bilm-tf / AllenNLP: ``options.json`` + ``*_weights.hdf5``) load too,
either directly, ``Elmo.from_pretrained(("options.json", "weights.hdf5"))``, or after
``ctxrep import-elmo options.json weights.hdf5 OUT_DIR`` as a saved model directory
(:func:`import_elmo`; the layout mapping is ``ctxrep.models.elmo_import``'s). They have no
output softmax and no vocabulary (``vocab == []``, ``BiLMConfig.vocab_size == 0``): features
only.

The extractor is stateless: in eval mode a sentence gets the same vectors in any batch.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import save_file
from torch import nn

from ctxrep.errors import InputError
from ctxrep.io import atomic_dir, load_safetensors
from ctxrep.models.bilm import BiLM, BiLMConfig
from ctxrep.text.elmo_chars import ELMO_CHAR_SPEC, CharIdSpec, batch_to_char_ids, char_ids_mask, word_to_char_ids

WEIGHTS_FILE = "model.safetensors"
CONFIG_FILE = "config.json"
VOCAB_FILE = "vocab.txt"
CHAR_SPEC_FILE = "char_spec.json"
MODEL_FILES = (WEIGHTS_FILE, CONFIG_FILE, VOCAB_FILE, CHAR_SPEC_FILE)


@dataclass
class ElmoOutput:
    layers: torch.Tensor  # (B, L + 1, T, 2P), zero at padding
    mask: torch.Tensor  # (B, T) bool


class Elmo(nn.Module):
    def __init__(self, bilm: BiLM, vocab: list[str], char_spec: CharIdSpec = ELMO_CHAR_SPEC) -> None:
        super().__init__()
        config = bilm.config
        if len(vocab) != config.vocab_size:
            raise ValueError(f"vocab has {len(vocab)} words but BiLMConfig.vocab_size={config.vocab_size}")
        if char_spec.n_char_ids != config.n_characters or char_spec.max_word_length != config.max_chars_per_token:
            raise ValueError(
                f"char spec (n_char_ids={char_spec.n_char_ids}, "
                f"max_word_length={char_spec.max_word_length}) does not fit "
                f"BiLMConfig (n_characters={config.n_characters}, max_chars_per_token={config.max_chars_per_token})"
            )
        self.bilm = bilm
        self.vocab = list(vocab)
        self.char_spec = char_spec

    @property
    def num_output_layers(self) -> int:
        return self.bilm.config.n_layers + 1

    @property
    def output_dim(self) -> int:
        return 2 * self.bilm.config.projection_dim

    def forward(self, inputs: list[list[str]] | torch.Tensor, mask: torch.Tensor | None = None) -> ElmoOutput:
        """``inputs``: tokenised sentences, or char ids (B, T, W) already wrapped in ``<S>`` ... ``</S>``."""
        device = self.bilm.token_encoder.char_embedding.weight.device
        if isinstance(inputs, torch.Tensor):
            char_ids = inputs.to(device)
        else:
            char_ids = batch_to_char_ids(inputs, add_bos_eos=True, spec=self.char_spec).to(device)
        mask = char_ids_mask(char_ids) if mask is None else mask.to(device)
        lengths = mask.sum(dim=1)
        self._check_sentence_markers(char_ids, lengths)

        out = self.bilm(char_ids, mask)
        layers = [torch.cat([out.token_layer, out.token_layer], dim=-1)]
        layers += [torch.cat([f, b], dim=-1) for f, b in zip(out.forward_states, out.backward_states)]
        layers = torch.stack(layers, dim=1)[:, :, 1:-1]  # drop <S>; </S> (at length - 1) is masked below
        word_mask = torch.arange(layers.shape[2], device=device).unsqueeze(0) < (lengths - 2).unsqueeze(1)
        return ElmoOutput(layers * word_mask[:, None, :, None], word_mask)

    def _check_sentence_markers(self, char_ids: torch.Tensor, lengths: torch.Tensor) -> None:
        bos = torch.tensor(word_to_char_ids(self.char_spec.bos_token, self.char_spec), device=char_ids.device)
        eos = torch.tensor(word_to_char_ids(self.char_spec.eos_token, self.char_spec), device=char_ids.device)
        rows = torch.arange(char_ids.shape[0], device=char_ids.device)
        if (lengths < 2).any() or not (char_ids[:, 0] == bos).all() or not (char_ids[rows, lengths - 1] == eos).all():
            raise ValueError("Elmo expects every sentence's char ids wrapped in <S> ... </S> (add_bos_eos=True)")

    # -------------------------------------------------------------------------
    # persistence

    def save_pretrained(self, directory: str | Path) -> None:
        if any("\n" in word for word in self.vocab):
            raise ValueError("a vocab word contains a newline; vocab.txt stores one word per line")
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        state = {name: t.detach().contiguous().cpu() for name, t in self.bilm.state_dict().items()}
        save_file(state, str(directory / WEIGHTS_FILE))
        (directory / CONFIG_FILE).write_text(json.dumps(self.bilm.config.to_dict(), indent=2) + "\n", encoding="utf-8")
        with open(directory / VOCAB_FILE, "w", encoding="utf-8", newline="") as f:
            f.write("".join(word + "\n" for word in self.vocab))
        (directory / CHAR_SPEC_FILE).write_text(json.dumps(self.char_spec.to_dict(), indent=2) + "\n", encoding="utf-8")

    @classmethod
    def from_pretrained(cls, source: str | Path | tuple[str | Path, str | Path],
                        device: str | torch.device = "cpu") -> Elmo:
        """Load a model in eval mode from ``source``, which is either

        * a saved model directory (``save_pretrained``, the pretrain_bilm stage or
          ``ctxrep import-elmo``): weights are read only through safetensors; or
        * an ``(options.json, weights.hdf5)`` pair in the published bilm-tf / AllenNLP format,
          converted in memory by ``ctxrep.models.elmo_import`` (no softmax, empty vocab).
        """
        if isinstance(source, (tuple, list)):
            if len(source) != 2:
                raise ValueError(f"expected a model directory or an (options.json, weights.hdf5) pair, got {source!r}")
            # imported here: only published weights need h5py
            from ctxrep.models.elmo_import import load_bilm_tf

            bilm, char_spec = load_bilm_tf(*source)
            return cls(bilm, [], char_spec).to(device).eval()
        directory = Path(source)
        for name in MODEL_FILES:
            if not (directory / name).is_file():
                raise FileNotFoundError(f"{directory / name} is missing: not a saved Elmo model")
        config = BiLMConfig.from_dict(json.loads((directory / CONFIG_FILE).read_text(encoding="utf-8")))
        char_spec = CharIdSpec.from_dict(json.loads((directory / CHAR_SPEC_FILE).read_text(encoding="utf-8")))
        with open(directory / VOCAB_FILE, encoding="utf-8", newline="") as f:
            vocab = f.read().split("\n")[:-1]  # one word per line, every line ends with \n
        bilm = BiLM(config)
        bilm.load_state_dict(load_safetensors(directory / WEIGHTS_FILE), strict=True)
        return cls(bilm, vocab, char_spec).to(device).eval()


# -----------------------------------------------------------------------------
# bilm-tf / AllenNLP files <-> saved model directories (the mapping: ctxrep.models.elmo_import)


def import_elmo(options_path: str | Path, weights_path: str | Path, out_dir: str | Path) -> Path:
    """Convert a bilm-tf options/weights pair into a saved Elmo model directory (written atomically).

    An existing ``out_dir`` is replaced only if it holds nothing but a saved model's files.
    """
    from ctxrep.models.elmo_import import load_bilm_tf

    out_dir = Path(out_dir)
    if out_dir.exists() and (not out_dir.is_dir() or any(p.name not in MODEL_FILES for p in out_dir.iterdir())):
        raise InputError(f"{out_dir}: exists and is not a saved model directory; choose a new path")
    bilm, spec = load_bilm_tf(options_path, weights_path)
    with atomic_dir(out_dir) as tmp:
        Elmo(bilm, [], spec).save_pretrained(tmp)
    return out_dir


def export_elmo(model_dir: str | Path, out_dir: str | Path) -> Path:
    """Write the saved Elmo model in ``model_dir`` (e.g. ``data/models/bilm``) as bilm-tf's
    ``options.json`` + ``weights.hdf5`` in ``out_dir`` (new; written atomically). Its softmax and
    vocabulary are left out, as bilm-tf's ``dump_weights`` does."""
    import h5py

    from ctxrep.models.elmo_import import tf_datasets, tf_options

    out_dir = Path(out_dir)
    if out_dir.exists():
        raise InputError(f"{out_dir}: exists; choose a new path")
    try:
        elmo = Elmo.from_pretrained(model_dir)
    except FileNotFoundError as e:
        raise InputError(str(e)) from e
    options, datasets = tf_options(elmo.bilm.config, elmo.char_spec), tf_datasets(elmo.bilm)
    with atomic_dir(out_dir) as tmp:
        (tmp / "options.json").write_text(json.dumps(options, indent=2) + "\n", encoding="utf-8")
        with h5py.File(tmp / "weights.hdf5", "w") as f:
            for name, array in sorted(datasets.items()):
                f.create_dataset(name, data=array)
    return out_dir
