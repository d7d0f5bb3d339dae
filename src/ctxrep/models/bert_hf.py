"""Hugging Face interop for ctxrep's BERT: write and read `transformers` BERT model directories.

`save_pretrained` writes `config.json` + `model.safetensors` (+ tokenizer files) that
`transformers.BertForPreTraining.from_pretrained` and `AutoTokenizer.from_pretrained` load as-is.
`load_pretrained` reads such a directory (ours, or one written by `transformers`, including the
`BertModel`, `BertForMaskedLM` and old TF-converted `gamma`/`beta` layouts) into ctxrep's model.

The two layouts differ in names only, except that ctxrep fuses the query, key and value
projections into one matrix: HF's three (H, H) matrices are its row blocks, in that order.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Iterator
from pathlib import Path

import torch
from safetensors.torch import save_file

from ctxrep.io import load_safetensors
from ctxrep.models.bert import BertConfig, BertForPreTraining, BertModel

log = logging.getLogger(__name__)

# Our config fields that Hugging Face's BertConfig spells the same way.
_SHARED_CONFIG_KEYS = (
    "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
    "max_position_embeddings", "type_vocab_size", "hidden_dropout_prob",
    "attention_probs_dropout_prob", "layer_norm_eps", "initializer_range", "pad_token_id",
)  # fmt: skip

# What Hugging Face's BertConfig takes for a key that a config.json leaves out (`save_pretrained`
# writes only what differs from these): BERT-base's sizes, as transformers defines them.
HF_BERT_DEFAULTS = dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                        intermediate_size=3072, max_position_embeddings=512, type_vocab_size=2,
                        hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1,
                        layer_norm_eps=1e-12, initializer_range=0.02, pad_token_id=0)

# Buffers and tied copies that HF checkpoints may carry; none of them holds a weight of its own.
_DERIVED_HF_KEYS = (
    "embeddings.position_ids",
    "embeddings.token_type_ids",
    "cls.predictions.decoder.weight",  # = word embeddings (tied)
    "cls.predictions.decoder.bias",  # = cls.predictions.bias (tied)
)


def _encoder_names(config: BertConfig) -> Iterator[tuple[str, str]]:
    """(ctxrep name inside BertModel, HF name inside HF's BertModel) for every one-to-one tensor."""
    yield "embeddings.word.weight", "embeddings.word_embeddings.weight"
    yield "embeddings.position.weight", "embeddings.position_embeddings.weight"
    yield "embeddings.segment.weight", "embeddings.token_type_embeddings.weight"
    pairs = [("embeddings.norm", "embeddings.LayerNorm"), ("pooler.dense", "pooler.dense")]
    for i in range(config.num_hidden_layers):
        ours, theirs = f"layers.{i}.", f"encoder.layer.{i}."
        pairs += [
            (ours + "attention.out", theirs + "attention.output.dense"),
            (ours + "attention_norm", theirs + "attention.output.LayerNorm"),
            (ours + "feed_forward.up", theirs + "intermediate.dense"),
            (ours + "feed_forward.down", theirs + "output.dense"),
            (ours + "feed_forward_norm", theirs + "output.LayerNorm"),
        ]
    for ours, theirs in pairs:
        for kind in ("weight", "bias"):
            yield f"{ours}.{kind}", f"{theirs}.{kind}"


def _qkv_names(i: int) -> tuple[str, list[str]]:
    """The fused QKV prefix of layer i and HF's three separate prefixes, in fusion order."""
    theirs = f"encoder.layer.{i}.attention.self."
    return f"layers.{i}.attention.qkv", [theirs + part for part in ("query", "key", "value")]


_HEAD_NAMES = (
    ("mlm.dense.weight", "cls.predictions.transform.dense.weight"),
    ("mlm.dense.bias", "cls.predictions.transform.dense.bias"),
    ("mlm.norm.weight", "cls.predictions.transform.LayerNorm.weight"),
    ("mlm.norm.bias", "cls.predictions.transform.LayerNorm.bias"),
    ("mlm.bias", "cls.predictions.bias"),
    ("nsp.weight", "cls.seq_relationship.weight"),
    ("nsp.bias", "cls.seq_relationship.bias"),
)


# ----------------------------------------------------------------------------------------------
# ctxrep -> Hugging Face


def hf_config_dict(config: BertConfig, architecture: str, dtype: torch.dtype) -> dict:
    """config.json contents for Hugging Face's BertConfig."""
    return {
        "architectures": [architecture],
        "model_type": "bert",
        **{key: getattr(config, key) for key in _SHARED_CONFIG_KEYS},
        "hidden_act": "gelu",  # exact erf GELU, as ctxrep uses
        "position_embedding_type": "absolute",
        "tie_word_embeddings": True,
        "dtype": str(dtype).removeprefix("torch."),
        # only when set: an encoder's config.json stays as Hugging Face writes one
        **({"is_decoder": True} if config.is_decoder else {}),
    }


def to_hf_state_dict(model: BertForPreTraining | BertModel) -> dict[str, torch.Tensor]:
    """ctxrep state dict -> HF names (`bert.`-prefixed with heads for BertForPreTraining)."""
    encoder, prefix = (model.bert, "bert.") if isinstance(model, BertForPreTraining) else (model, "")
    ours = encoder.state_dict()
    out = {prefix + theirs: ours[name] for name, theirs in _encoder_names(encoder.config)}
    for i in range(encoder.config.num_hidden_layers):
        fused, parts = _qkv_names(i)
        for kind in ("weight", "bias"):
            for part, block in zip(parts, ours[f"{fused}.{kind}"].chunk(3, dim=0)):
                out[f"{prefix}{part}.{kind}"] = block
    if isinstance(model, BertForPreTraining):
        heads = model.state_dict()
        out.update({theirs: heads[name] for name, theirs in _HEAD_NAMES})
    # safetensors wants contiguous, unshared CPU tensors.
    return {name: tensor.detach().to("cpu").contiguous().clone() for name, tensor in out.items()}


def save_pretrained(
    model: BertForPreTraining | BertModel,
    directory: str | Path,
    tokenizer_dir: str | Path | None = None,
    do_lower_case: bool = True,
) -> Path:
    """Write a Hugging Face BERT model directory: config.json, model.safetensors and, when
    tokenizer_dir is given, its tokenizer.json / vocab.txt plus tokenizer_config.json and
    special_tokens_map.json for `AutoTokenizer`. The tied decoder is not stored, as HF does.
    Writes into `directory` in place; callers wanting atomicity write to a temp dir and rename."""
    config = model.config
    if config.pre_layer_norm:
        raise ValueError(
            "pre_layer_norm: pre-LN BERT has no Hugging Face BertModel equivalent (HF BERT is post-LN); "
            "export is only supported for pre_layer_norm=false"
        )
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    architecture = "BertForPreTraining" if isinstance(model, BertForPreTraining) else "BertModel"
    dtype = next(model.parameters()).dtype
    (directory / "config.json").write_text(json.dumps(hf_config_dict(config, architecture, dtype), indent=2) + "\n")
    save_file(to_hf_state_dict(model), directory / "model.safetensors", metadata={"format": "pt"})
    if tokenizer_dir is not None:
        save_tokenizer_files(tokenizer_dir, directory, do_lower_case, config.max_position_embeddings)
    return directory


def save_tokenizer_files(
    tokenizer_dir: str | Path, directory: str | Path, do_lower_case: bool, model_max_length: int
) -> None:
    """Copy a tokenizer (tokenizer.json and/or vocab.txt) and its description for AutoTokenizer.
    A folder that describes itself (tokenizer_config.json and special_tokens_map.json, as
    ``ctxrep.text.wordpiece`` and a family's own tokenizer write them) keeps its description,
    with the model's length; a bare WordPiece folder (an older corpus) is described as BERT's."""
    tokenizer_dir, directory = Path(tokenizer_dir), Path(directory)
    copied = [name for name in ("tokenizer.json", "vocab.txt") if (tokenizer_dir / name).is_file()]
    if not copied:
        raise FileNotFoundError(f"tokenizer_dir: neither tokenizer.json nor vocab.txt in {tokenizer_dir}")
    for name in copied:
        shutil.copyfile(tokenizer_dir / name, directory / name)
    if (tokenizer_dir / "tokenizer_config.json").is_file():
        described = json.loads((tokenizer_dir / "tokenizer_config.json").read_text())
        described["model_max_length"] = model_max_length
        (directory / "tokenizer_config.json").write_text(json.dumps(described, indent=2) + "\n")
        shutil.copyfile(tokenizer_dir / "special_tokens_map.json",
                        directory / "special_tokens_map.json")
        return
    special = {
        "unk_token": "[UNK]",
        "sep_token": "[SEP]",
        "pad_token": "[PAD]",
        "cls_token": "[CLS]",
        "mask_token": "[MASK]",
    }
    tokenizer_config = {
        "tokenizer_class": "BertTokenizerFast",
        "do_lower_case": do_lower_case,
        "model_max_length": model_max_length,
        **special,
    }
    (directory / "tokenizer_config.json").write_text(json.dumps(tokenizer_config, indent=2) + "\n")
    (directory / "special_tokens_map.json").write_text(json.dumps(special, indent=2) + "\n")


# ----------------------------------------------------------------------------------------------
# Hugging Face -> ctxrep


def config_from_hf(hf_config: dict) -> BertConfig:
    """BertConfig from a Hugging Face config.json dict; unsupported variants fail by key."""
    if hf_config.get("model_type", "bert") != "bert":
        raise ValueError(f"model_type: expected 'bert', got {hf_config['model_type']!r}")
    if hf_config.get("hidden_act", "gelu") != "gelu":
        raise ValueError(f"hidden_act: only the exact 'gelu' is supported, got {hf_config['hidden_act']!r}")
    if hf_config.get("position_embedding_type", "absolute") != "absolute":
        found = hf_config["position_embedding_type"]
        raise ValueError(f"position_embedding_type: only 'absolute' is supported, got {found!r}")
    if hf_config.get("add_cross_attention", False):
        raise ValueError("add_cross_attention: only self-attention (an encoder, or a left-to-right "
                         "LM with is_decoder) is supported")
    if hf_config.get("vocab_size") is None:
        raise ValueError("vocab_size: missing from the checkpoint's config.json")
    known = {key: hf_config[key] for key in _SHARED_CONFIG_KEYS if hf_config.get(key) is not None}
    return BertConfig(**{**HF_BERT_DEFAULTS, **known}, pre_layer_norm=False,
                      is_decoder=bool(hf_config.get("is_decoder", False))).validate()


def read_hf_weights(directory: Path) -> dict[str, torch.Tensor]:
    """Tensors of an HF checkpoint: model.safetensors (single or sharded) or pytorch_model.bin."""
    if (directory / "model.safetensors").is_file():
        return load_safetensors(directory / "model.safetensors")
    index = directory / "model.safetensors.index.json"
    if index.is_file():
        shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        return {name: t for shard in shards for name, t in load_safetensors(directory / shard).items()}
    if (directory / "pytorch_model.bin").is_file():
        return torch.load(directory / "pytorch_model.bin", map_location="cpu", weights_only=True)
    raise FileNotFoundError(f"{directory}: no model.safetensors, model.safetensors.index.json or pytorch_model.bin")


def _canonical_hf_names(weights: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Strip the `bert.` prefix (absent in BertModel checkpoints) and rename TF-era gamma/beta."""
    out = {}
    for name, tensor in weights.items():
        name = name.removeprefix("bert.")
        if name.endswith(".gamma") or name.endswith(".beta"):
            name = name.rsplit(".", 1)[0] + (".weight" if name.endswith(".gamma") else ".bias")
        out[name] = tensor
    return out


def from_hf_state_dict(model: BertForPreTraining, weights: dict[str, torch.Tensor]) -> list[str]:
    """Load HF-named tensors into `model`; return the ctxrep names left at their fresh init
    (optional parts: pooler and heads). Missing encoder tensors or unknown names raise ValueError."""
    weights = _canonical_hf_names(weights)
    config = model.config
    mapped: dict[str, torch.Tensor] = {}
    for ours, theirs in _encoder_names(config):
        if theirs in weights:
            mapped["bert." + ours] = weights.pop(theirs)
    for i in range(config.num_hidden_layers):
        fused, parts = _qkv_names(i)
        for kind in ("weight", "bias"):
            names = [f"{part}.{kind}" for part in parts]
            if all(name in weights for name in names):
                mapped[f"bert.{fused}.{kind}"] = torch.cat([weights.pop(name) for name in names], dim=0)
    if "cls.predictions.bias" not in weights and "cls.predictions.decoder.bias" in weights:
        weights["cls.predictions.bias"] = weights["cls.predictions.decoder.bias"]
    for ours, theirs in _HEAD_NAMES:
        if theirs in weights:
            mapped[ours] = weights.pop(theirs)

    decoder = weights.get("cls.predictions.decoder.weight")
    if decoder is not None and not torch.equal(decoder, mapped.get("bert.embeddings.word.weight", decoder)):
        raise ValueError("cls.predictions.decoder.weight: differs from the word embeddings; ctxrep's decoder is tied")
    unexpected = sorted(name for name in weights if name not in _DERIVED_HF_KEYS)
    if unexpected:
        raise ValueError(f"unexpected tensors in the checkpoint (not a BERT encoder/pretraining layout?): {unexpected}")

    state = model.state_dict()
    optional = ("bert.pooler.", "mlm.", "nsp.")
    missing = [name for name in state if name not in mapped]
    required_missing = [name for name in missing if not name.startswith(optional)]
    if required_missing:
        raise ValueError(f"checkpoint lacks encoder tensors (ctxrep names): {required_missing}")
    for name, tensor in mapped.items():
        if tensor.shape != state[name].shape:
            expected = tuple(state[name].shape)
            raise ValueError(f"{name}: checkpoint shape {tuple(tensor.shape)} != config shape {expected}")
    model.load_state_dict({**state, **mapped})
    return missing


def load_pretrained(directory: str | Path) -> BertForPreTraining:
    """Read a Hugging Face BERT checkpoint directory (ours or `transformers`') into ctxrep.

    Accepts BertForPreTraining, BertForMaskedLM and BertModel layouts. Parts the checkpoint lacks
    (pooler, MLM or NSP head) keep BERT's fresh initialisation and are logged; use `.bert` for
    the encoder alone, and :func:`load_pretrained_parts` to know which parts are fresh. The model
    is returned in eval mode, on CPU, in the checkpoint's dtype.
    """
    return load_pretrained_parts(directory)[0]


def load_pretrained_parts(directory: str | Path) -> tuple[BertForPreTraining, list[str]]:
    """:func:`load_pretrained`, and the ctxrep names of the tensors the checkpoint lacked (left
    at their fresh initialisation)."""
    directory = Path(directory)
    config_path = directory / "config.json"
    if not config_path.is_file():
        raise FileNotFoundError(f"{config_path}: missing; not a Hugging Face model directory")
    config = config_from_hf(json.loads(config_path.read_text()))
    weights = read_hf_weights(directory)
    model = BertForPreTraining(config)
    model.to(next(t.dtype for t in weights.values() if t.is_floating_point()))
    fresh = from_hf_state_dict(model, weights)
    if fresh and _architecture(config_path) != "BertModel":  # an encoder alone lacks heads by design
        modules = sorted({name.rsplit(".", 1)[0] for name in fresh})
        log.warning("%s: not in the checkpoint, freshly initialised: %s", directory, modules)
    return model.eval(), fresh


def _architecture(config_path: Path) -> str | None:
    architectures = json.loads(config_path.read_text()).get("architectures") or [None]
    return architectures[0]


__all__ = [
    "save_pretrained",
    "save_tokenizer_files",
    "load_pretrained",
    "load_pretrained_parts",
    "to_hf_state_dict",
    "from_hf_state_dict",
    "config_from_hf",
    "hf_config_dict",
    "read_hf_weights",
]
