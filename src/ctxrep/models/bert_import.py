"""Import a published BERT (a Hugging Face model directory or Hub id) as a ctxrep model directory.

    ctxrep import-bert google/bert_uncased_L-4_H-256_A-4 OUT_DIR   # Hub id (needs the Hub or its cache)
    ctxrep import-bert path/to/bert-base-uncased OUT_DIR           # a downloaded directory

``OUT_DIR`` is the ``data/models/bert/`` contract: ``config.json`` + ``model.safetensors`` as
:func:`ctxrep.models.bert_hf.save_pretrained` writes them (any layout ``load_pretrained`` reads,
re-saved as safetensors), and the checkpoint's *own* tokenizer, re-saved by ``transformers``
(``tokenizer.json`` + ``tokenizer_config.json``) exactly as it loads from the source, so every
downstream stage (extract, fine-tuning) tokenizes with the checkpoint's WordPiece vocabulary and
casing, never ours. Parts a checkpoint lacks (pooler, MLM/NSP heads: unused by transfer) are
initialised from a fixed seed, so the same files always give the same bytes.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

import torch

from ctxrep.errors import InputError
from ctxrep.io import atomic_dir
from ctxrep.models.bert_hf import load_pretrained, save_pretrained
from ctxrep.published import MissingWeights, bert_files

log = logging.getLogger(__name__)

SPECIAL_TOKENS = ("[CLS]", "[SEP]", "[PAD]", "[MASK]", "[UNK]")
FRESH_INIT_SEED = 0  # parts the checkpoint lacks: the same bytes on every import
HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?")
# What a snapshot of a Hub BERT needs (not the TF / Flax / ONNX copies of the weights).
HUB_FILES = ["config.json", "model.safetensors", "model.safetensors.index.json",
             "model-*.safetensors", "pytorch_model.bin", "vocab.txt", "tokenizer.json",
             "tokenizer_config.json", "special_tokens_map.json"]


def resolve(source: str | Path) -> Path:
    """A local directory for ``source``: the directory itself, or the Hub snapshot of a Hub id
    (from the local Hugging Face cache first; downloaded only when the Hub is reachable and not
    switched off with ``HF_HUB_OFFLINE=1``). An unreachable Hub is a :class:`MissingWeights`
    that says how to provide the directory locally."""
    path = Path(source)
    if path.exists() or not HUB_ID.fullmatch(str(source)):
        return path
    from huggingface_hub import snapshot_download

    repo_id = str(source)
    try:
        return Path(snapshot_download(repo_id, allow_patterns=HUB_FILES, local_files_only=True))
    except Exception:  # noqa: BLE001 — not in the cache: try the Hub below
        pass
    try:
        return Path(snapshot_download(repo_id, allow_patterns=HUB_FILES))
    except Exception as e:  # noqa: BLE001 — offline, unreachable, unknown id, no access
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise MissingWeights(
            f"{repo_id}: not a local directory, and the Hugging Face Hub cannot serve it here "
            f"({type(e).__name__}: {reason}). To provide it locally, on a machine that reaches "
            f"https://huggingface.co/{repo_id} run `ctxrep import-bert {repo_id} DIR` (or `hf "
            f"download {repo_id} --local-dir DIR`), copy DIR to this machine and pass DIR "
            f"instead of the Hub id.") from e


def import_bert(source: str | Path, out_dir: str | Path) -> tuple[Path, list[Path]]:
    """Write the model directory for ``source`` (a directory or Hub id) to ``out_dir``,
    atomically. Returns ``out_dir`` and the source files it read."""
    from transformers import AutoTokenizer

    folder = resolve(source)
    files = bert_files(folder)
    try:
        torch.manual_seed(FRESH_INIT_SEED)
        model = load_pretrained(folder)
    except (ValueError, FileNotFoundError) as e:
        raise InputError(f"{folder}: not a BERT checkpoint ctxrep can load: {e}") from e
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    except Exception as e:  # noqa: BLE001 — transformers raises many kinds for a broken tokenizer
        raise InputError(f"{folder}: its tokenizer does not load ({type(e).__name__}: {e})") from e
    vocab = tokenizer.get_vocab()
    missing = [t for t in SPECIAL_TOKENS if t not in vocab]
    if missing:
        raise InputError(f"{folder}: the tokenizer lacks {missing}; a BERT WordPiece vocabulary "
                         f"has {list(SPECIAL_TOKENS)}")
    if max(vocab.values()) >= model.config.vocab_size:
        raise InputError(f"{folder}: the tokenizer has ids up to {max(vocab.values())}, but "
                         f"config.json's vocab_size is {model.config.vocab_size}")
    tokenizer.model_max_length = min(tokenizer.model_max_length,
                                     model.config.max_position_embeddings)
    with atomic_dir(out_dir) as tmp:
        save_pretrained(model, tmp)
        tokenizer.save_pretrained(str(tmp))
    return Path(out_dir), files


__all__ = ["import_bert", "resolve", "SPECIAL_TOKENS"]
