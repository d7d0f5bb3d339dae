"""The pretrained models in MLflow's model registry, under stable names, tagged with their DVC hash.

- BERT (``data/models/bert``, a Hugging Face model directory) is logged with MLflow's
  ``transformers`` flavour (task ``fill-mask``, the ``BertForPreTraining`` weights with their
  MLM and NSP heads, and the tokenizer), so ``mlflow.transformers.load_model(
  "models:/ctxrep-bert/<version>", return_type="components")["model"]`` is that model. Logging
  works offline: the flavour only fails to fetch a model card, which it says in a warning.
- The biLM (``data/models/bilm``) has no MLflow flavour: its directory is logged as artifacts
  of the stage run and registered from there (load it with
  ``ctxrep.models.elmo.Elmo.from_pretrained`` on ``mlflow.artifacts.download_artifacts(...)``).

Each registered version carries the tags ``dvc_md5`` (the hash DVC records for the model
directory in ``dvc.lock``: ``<md5>.dir``), ``dvc_path``, ``git_commit``, ``pipeline_key`` and
``profile``, so a version is traced to the DVC output, the commit and the pipeline run that made
it. Registration never stops a stage whose model is already written: a failure is logged as a
warning and as the run tag ``registry_error``.
"""

from __future__ import annotations

import logging
from pathlib import Path

log = logging.getLogger(__name__)

BERT_NAME = "ctxrep-bert"
BILM_NAME = "ctxrep-bilm"
# What loading the logged BERT needs besides MLflow (written into the model's requirements
# instead of inferred, which would take seconds per run).
_BERT_REQUIREMENTS = ["torch", "transformers", "tokenizers", "safetensors"]


def dvc_md5(path: Path | str) -> str:
    """The hash DVC records for ``path`` (a directory: ``<md5>.dir``; a file: its md5),
    computed the way ``dvc commit`` does, without a DVC repo."""
    from dvc_data.hashfile.build import build
    from dvc_data.hashfile.db import HashFileDB
    from dvc_objects.fs import MemoryFileSystem
    from dvc_objects.fs.local import LocalFileSystem

    staging = HashFileDB(MemoryFileSystem(), "/staging")
    _, _, obj = build(staging, str(Path(path).resolve()), LocalFileSystem(), "md5")
    return obj.hash_info.value


def _version_tags(run, model_dir: Path, profile: str | None) -> dict:
    tags = run.run.data.tags
    return {"dvc_md5": dvc_md5(model_dir), "dvc_path": model_dir.as_posix(),
            "git_commit": tags.get("git_commit", ""), "git_dirty": tags.get("git_dirty", ""),
            "pipeline_key": tags.get("pipeline_key", ""), "profile": str(profile),
            "stage_run_id": run.run_id}


def register_bert(run, model_dir: Path | str, profile: str | None = None):
    """Log ``model_dir`` to ``run`` (a :class:`ctxrep.tracking.StageRun`, the active run) with
    the ``transformers`` flavour and register it as :data:`BERT_NAME`. Returns the
    ``ModelVersion``, or None if logging failed (warned)."""
    model_dir = Path(model_dir)
    try:
        import mlflow
        from transformers import AutoTokenizer, BertForPreTraining

        model = BertForPreTraining.from_pretrained(str(model_dir)).eval()
        tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
        info = mlflow.transformers.log_model(
            {"model": model, "tokenizer": tokenizer}, name="bert", task="fill-mask",
            pip_requirements=_BERT_REQUIREMENTS)
        return _register(run, info.model_uri, BERT_NAME, model_dir, profile)
    except Exception as e:  # noqa: BLE001 — the model is written; its record must not undo that
        return _failed(run, BERT_NAME, e)


def register_bilm(run, model_dir: Path | str, profile: str | None = None):
    """Log ``model_dir`` as artifacts (``bilm/``) of ``run`` and register them as
    :data:`BILM_NAME`. Returns the ``ModelVersion``, or None if logging failed (warned)."""
    model_dir = Path(model_dir)
    try:
        run.client.log_artifacts(run.run_id, str(model_dir), "bilm")
        return _register(run, f"{run.run.info.artifact_uri}/bilm", BILM_NAME, model_dir, profile)
    except Exception as e:  # noqa: BLE001
        return _failed(run, BILM_NAME, e)


def _register(run, source: str, name: str, model_dir: Path, profile: str | None):
    from mlflow.exceptions import MlflowException

    client = run.client
    try:
        client.create_registered_model(
            name, description="ctxrep's pretrained model; each version's tags name the DVC "
                              "hash (dvc_md5) and git commit it came from")
    except MlflowException as e:
        if "already exists" not in str(e).lower() and "RESOURCE_ALREADY_EXISTS" not in str(e):
            raise
    tags = _version_tags(run, model_dir, profile)
    if source.startswith("models:/"):  # an MLflow 3 logged model: register it as such
        import mlflow

        version = mlflow.register_model(source, name, tags=tags)
    else:
        version = client.create_model_version(name, source, run_id=run.run_id, tags=tags)
    client.set_tag(run.run_id, f"registered:{name}", version.version)
    log.info("MLflow registry: %s version %s (%s)", name, version.version,
             version.tags.get("dvc_md5") if version.tags else "")
    return version


def _failed(run, name: str, error: Exception):
    log.warning("MLflow registry: could not log/register %s: %s", name, error)
    try:
        run.client.set_tag(run.run_id, "registry_error", f"{name}: {error}"[:5000])
    except Exception:  # noqa: BLE001
        pass
    return None
