"""The pretrained models in MLflow's model registry, under stable names and aliases, tagged with
their DVC hash, logged so that ``mlflow.pyfunc.load_model(...).predict`` works.

- BERT (:data:`BERT_NAME`, from ``data/models/bert``, a Hugging Face model directory) is
  logged with MLflow's ``transformers`` flavour and its tokenizer. A directory with the
  pretrained MLM head (``ctxrep.models.bert_import.has_mlm_head``: trained by pretrain_bert,
  saved as ``BertForPreTraining``) is logged as ``BertForMaskedLM`` (the MLM head, without the
  NSP head and pooler) under the task ``fill-mask``::

      mlflow.pyfunc.load_model("models:/ctxrep-bert@latest-tiny").predict(["the [MASK] sat ."])
      # -> ["cat"]: the best fill per text
      mlflow.transformers.load_model("models:/ctxrep-bert@latest-tiny")("the [MASK] sat .")
      # -> the pipeline: [{"token_str": "cat", "score": 0.3, ...}, ...]

  An imported encoder without one (saved as ``BertModel``) is logged as ``BertModel`` under
  ``feature-extraction`` (``predict`` gives the last hidden states per text): no random head is
  ever registered as if pretrained. The version tags ``task``, ``hf_architecture`` and
  ``mlm_head`` and the version description say which it is.
- The biLM (:data:`BILM_NAME`, from ``data/models/bilm``) is a ``pyfunc`` model,
  :class:`ctxrep.models.elmo_pyfunc.ElmoPyfunc`, with the model directory as its artifact
  ``bilm``; loading it needs ``ctxrep`` installed::

      mlflow.pyfunc.load_model("models:/ctxrep-bilm@latest-tiny").predict(["The cat sat ."])
      # -> [array of shape (layers, tokens, dim)] per sentence, as Elmo gives them

**Aliases.** Each registration points the alias ``latest-<profile>`` (e.g. ``latest-tiny``,
``latest-default``; see :func:`alias`) of its model at the new version, so
``models:/ctxrep-bert@latest-tiny`` is the BERT of the last pipeline run of profile ``tiny``.
Without a profile the alias is ``latest-default`` (MLflow reserves ``latest`` itself:
``models:/<name>/latest`` is the newest version whatever its profile).

Each registered version carries the tags ``dvc_md5`` (the hash DVC records for the model
directory in ``dvc.lock``: ``<md5>.dir``), ``dvc_path``, ``git_commit``, ``pipeline_key`` and
``profile``, so a version is traced to the DVC output, the commit and the pipeline run that made
it. Registration never stops a stage whose model is already written: a failure is logged as a
warning and as the run tag ``registry_error``. Logging works offline: the ``transformers``
flavour only fails to fetch a model card, which it says in a warning.
"""


from __future__ import annotations

import contextlib

import logging
import re
from pathlib import Path

from ctxrep.families import bert, bilm

log = logging.getLogger(__name__)

BERT_NAME = "ctxrep-bert"
BILM_NAME = "ctxrep-bilm"
# What loading the logged BERT needs besides MLflow (written into the model's requirements
# instead of inferred, which would take seconds per run).
_BERT_REQUIREMENTS = ["torch", "transformers", "tokenizers", "safetensors"]
# What loading the logged biLM needs besides MLflow and ctxrep itself (its code: see
# ctxrep.models.elmo_pyfunc).
_BILM_REQUIREMENTS = ["torch", "safetensors", "numpy", "pandas"]


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



def alias(profile: str | None) -> str:
    """The alias a registration of ``profile`` points at its version: ``latest-<profile>``
    (``latest-default`` without a profile; MLflow reserves ``latest``)."""
    return "latest-" + re.sub(r"[^\w-]", "-", str(profile) if profile else "default")


def register_bert(run, model_dir: Path | str, profile: str | None = None):
    """Log ``model_dir`` to ``run`` (a :class:`ctxrep.tracking.StageRun`, the active run) with
    the ``transformers`` flavour (``fill-mask`` when it holds the MLM head, else
    ``feature-extraction``), register it as :data:`BERT_NAME` and point :func:`alias` at it.
    Returns the ``ModelVersion``, or None if logging failed (warned)."""
    model_dir = Path(model_dir)
    try:
        import mlflow
        from transformers import AutoTokenizer, BertForMaskedLM, BertModel

        from ctxrep.models.bert_import import has_mlm_head

        _check_active(run)
        tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
        mlm_head = has_mlm_head(model_dir)
        if mlm_head:
            model, loading = BertForMaskedLM.from_pretrained(str(model_dir), output_loading_info=True)
            if loading["missing_keys"]:  # never a fresh head registered as if pretrained
                raise ValueError(f"{model_dir}: its MLM head lacks {sorted(loading['missing_keys'])}")
            task, note = "fill-mask", "BertForMaskedLM: the pretrained encoder and MLM head"
        else:
            model = BertModel.from_pretrained(str(model_dir))
            task, note = "feature-extraction", ("BertModel: an encoder without a pretrained MLM "
                                                "head, so features only (no fill-mask)")
        with hub_offline():  # the flavour looks for a model card on the Hub: nothing to fetch
            info = mlflow.transformers.log_model(
                {"model": model.eval(), "tokenizer": tokenizer}, name=bert.FAMILY.name, task=task,
                pip_requirements=_BERT_REQUIREMENTS)
        extra = {"task": task, "hf_architecture": type(model).__name__,
                 "mlm_head": str(mlm_head).lower()}
        return _register(run, info.model_uri, BERT_NAME, model_dir, profile, extra,
                         f"{note}; task {task}. Load: mlflow.pyfunc.load_model(uri).predict(texts)")
    except Exception as e:  # noqa: BLE001 — the model is written; its record must not undo that
        return _failed(run, BERT_NAME, e)


@contextlib.contextmanager
def hub_offline():
    """huggingface_hub in offline mode, telemetry off, for the block: a model logged from a local
    folder has no Hub page, and nothing should leave the machine to look for one."""
    from huggingface_hub import constants

    saved = constants.HF_HUB_OFFLINE, constants.HF_HUB_DISABLE_TELEMETRY
    constants.HF_HUB_OFFLINE, constants.HF_HUB_DISABLE_TELEMETRY = True, True
    try:
        yield
    finally:
        constants.HF_HUB_OFFLINE, constants.HF_HUB_DISABLE_TELEMETRY = saved


def register_bilm(run, model_dir: Path | str, profile: str | None = None):
    """Log ``model_dir`` to ``run`` (the active run) as the ``pyfunc`` model
    :class:`ctxrep.models.elmo_pyfunc.ElmoPyfunc` (artifact ``bilm``), register it as
    :data:`BILM_NAME` and point :func:`alias` at it. Returns the ``ModelVersion``, or None if
    logging failed (warned)."""
    model_dir = Path(model_dir)
    try:
        import mlflow

        from ctxrep.models import elmo_pyfunc_code  # imported: a file of this stage's code
        from ctxrep.models.elmo_pyfunc import ARTIFACT

        _check_active(run)
        # The model as code (the file MLflow runs when it loads), not a pickled object.
        info = mlflow.pyfunc.log_model(
            name=bilm.FAMILY.name, python_model=elmo_pyfunc_code.__file__,
            artifacts={ARTIFACT: str(model_dir)}, pip_requirements=_BILM_REQUIREMENTS)
        return _register(run, info.model_uri, BILM_NAME, model_dir, profile,
                         {"task": "elmo-features"},
                         "ctxrep biLM (ELMo): predict(sentences) gives per sentence an array "
                         "[layers, tokens, dim]; loading needs ctxrep installed")
    except Exception as e:  # noqa: BLE001
        return _failed(run, BILM_NAME, e)


def _check_active(run) -> None:
    """The flavours log into the active run: it must be ``run``'s."""
    import mlflow

    active = mlflow.active_run()
    if active is None or active.info.run_id != run.run_id:
        raise RuntimeError(f"the active MLflow run is "
                           f"{active.info.run_id if active else 'none'}, not {run.run_id}")


def _register(run, source: str, name: str, model_dir: Path, profile: str | None,
              extra_tags: dict | None = None, description: str | None = None):
    from mlflow.exceptions import MlflowException

    client = run.client
    try:
        client.create_registered_model(
            name, description="ctxrep's pretrained model; each version's tags name the DVC "
                              "hash (dvc_md5) and git commit it came from; the alias "
                              "latest-<profile> is the newest version of each profile")
    except MlflowException as e:
        if "already exists" not in str(e).lower() and "RESOURCE_ALREADY_EXISTS" not in str(e):
            raise
    tags = {**_version_tags(run, model_dir, profile), **(extra_tags or {})}
    if source.startswith("models:/"):  # an MLflow 3 logged model: register it as such
        import mlflow

        version = mlflow.register_model(source, name, tags=tags)
    else:
        version = client.create_model_version(name, source, run_id=run.run_id, tags=tags)
    client.set_tag(run.run_id, f"registered:{name}", version.version)
    log.info("MLflow registry: %s version %s (%s)", name, version.version,
             version.tags.get("dvc_md5") if version.tags else "")
    try:  # the version is registered: a failure here is warned, the version still returned
        if description:
            client.update_model_version(name, version.version, description=description)
        client.set_registered_model_alias(name, alias(profile), version.version)
    except Exception as e:  # noqa: BLE001
        _failed(run, f"{name} version {version.version} (description/alias)", e)
    return version


def _failed(run, name: str, error: Exception):
    log.warning("MLflow registry: could not log/register %s: %s", name, error)
    try:
        run.client.set_tag(run.run_id, "registry_error", f"{name}: {error}"[:5000])
    except Exception:  # noqa: BLE001
        pass
    return None
