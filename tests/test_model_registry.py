"""The model registry: a tiny real BERT and biLM registered as a stage registers them, then
loaded by alias with ``mlflow.pyfunc.load_model`` in a fresh process, and they predict.

One SQLite store serves the module (creating one costs seconds)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

TEXTS = ["the cat sat on the mat .", "the dog sat on the log .", "a cat and a dog ."]
SENTENCES = ["the river bank", "Ünïcode words and a " + "very" * 15, "one", ""]
TOLERANCE = 1e-5


def tiny_bert(root: Path, mlm_head: bool = True) -> Path:
    """A real tiny BERT directory as pretrain_bert writes it (``BertForPreTraining`` with its
    WordPiece tokenizer), or as an imported encoder is saved (``BertModel``, no MLM head)."""
    import torch

    from ctxrep.models.bert import BertConfig, BertForPreTraining
    from ctxrep.models.bert_hf import save_pretrained
    from ctxrep.text.wordpiece import save_wordpiece, train_wordpiece

    tokenizer = train_wordpiece(TEXTS, vocab_size=60, lowercase=True, charset=set("".join(TEXTS)))
    save_wordpiece(tokenizer, root / "tokenizer", lowercase=True)
    config = BertConfig(vocab_size=tokenizer.get_vocab_size(), hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=64, max_position_embeddings=32,
                        hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1, pre_layer_norm=False)
    torch.manual_seed(0)
    model = BertForPreTraining(config).eval()
    out = root / ("bert" if mlm_head else "bert-encoder")
    return save_pretrained(model if mlm_head else model.bert, out, tokenizer_dir=root / "tokenizer")


def tiny_bilm(path: Path, seed: int = 0) -> Path:
    """A real tiny biLM directory as pretrain_bilm writes it (``Elmo.save_pretrained``)."""
    import torch

    from ctxrep.models.bilm import BiLM, BiLMConfig
    from ctxrep.models.elmo import Elmo

    config = BiLMConfig(vocab_size=5, char_embed_dim=4, filters=[[1, 4], [2, 8]], n_highway=1,
                        projection_dim=8, cell_dim=16, n_layers=2, skip_connections=True,
                        cell_clip=3.0, proj_clip=3.0, dropout=0.0, activation="relu",
                        softmax="full", n_negatives=8192)
    torch.manual_seed(seed)
    bilm = BiLM(config)
    with torch.no_grad():  # away from the default init: the layers differ visibly
        for param in bilm.parameters():
            param.normal_(0.0, 0.5)
        bilm.token_encoder.char_embedding.weight[0] = 0.0
    Elmo(bilm.eval(), ["<S>", "</S>", "<UNK>", "the", "bank"]).save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """(root, tracking URI): a scratch repo root with its own SQLite store, stage runs opened
    in it as a stage opens them (DVC's input hashes left out: no DVC repo here)."""
    from ctxrep import tracking

    root = tmp_path_factory.mktemp("registry")
    (root / "dvc.yaml").write_text("stages: {}\n")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        mp.setenv("MLFLOW_TRACKING_URI", uri)
        mp.setenv("CTXREP_PIPELINE_RUN", "registry")
        for var in ("DVC_ROOT", "DVC_EXP_NAME"):
            mp.delenv(var, raising=False)
        mp.setattr(tracking, "input_hashes", lambda stage, cwd=None: {})
        try:
            yield root, uri
        finally:  # stage_run set the process-wide URI (the variable is restored by mp)
            import mlflow

            mlflow.set_tracking_uri(None)


@pytest.fixture(scope="module")
def registered(store):
    """The tiny BERT and biLM, each registered by its stage's run under profile ``tiny``."""
    from ctxrep import model_registry, tracking

    root, _ = store
    bert, bilm = tiny_bert(root), tiny_bilm(root / "bilm")
    with tracking.stage_run("pretrain_bert") as run:
        bert_version = model_registry.register_bert(run, bert, profile="tiny")
    with tracking.stage_run("pretrain_bilm") as run:
        bilm_version = model_registry.register_bilm(run, bilm, profile="tiny")
    assert bert_version is not None and bilm_version is not None
    return {"bert": (bert, bert_version), "bilm": (bilm, bilm_version)}


FRESH = textwrap.dedent("""
    import json, sys
    import mlflow
    import numpy as np
    import pandas as pd

    sentences, out = json.loads(sys.argv[1]), sys.argv[2]
    bert = mlflow.pyfunc.load_model("models:/ctxrep-bert@latest-tiny")
    fills = bert.predict(["the [MASK] sat ."])
    two = bert.predict(["the [MASK] sat .", "a [MASK] and a dog ."])
    pipeline = mlflow.transformers.load_model("models:/ctxrep-bert@latest-tiny")
    scored = pipeline("the [MASK] sat .", top_k=3)
    bilm = mlflow.pyfunc.load_model("models:/ctxrep-bilm@latest-tiny")
    features = bilm.predict(sentences)
    from_frame = bilm.predict(pd.DataFrame({"text": sentences}))
    np.savez(out, *features)
    print(json.dumps({"fills": list(fills), "two": list(two),
                      "scored": [{k: d[k] for k in ("token", "token_str", "score")} for d in scored],
                      "frame_equal": all(np.array_equal(a, b) for a, b in zip(features, from_frame)),
                      "n": len(features)}))
""")


@pytest.mark.slow
def test_both_registered_models_predict_in_a_fresh_process(registered, store, tmp_path):
    from ctxrep.models.elmo import Elmo

    root, uri = store
    bert, _ = registered["bert"]
    bilm, _ = registered["bilm"]
    env = {**os.environ, "MLFLOW_TRACKING_URI": uri, "HF_HUB_OFFLINE": "1",
           "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false",
           "MLFLOW_DISABLE_TELEMETRY": "true"}
    out = tmp_path / "features.npz"
    done = subprocess.run([sys.executable, "-c", FRESH, json.dumps(SENTENCES), str(out)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])

    vocab = (bert / "vocab.txt").read_text(encoding="utf-8").split("\n")[:-1]
    scored = got["scored"]
    assert len(scored) == 3 and all(0.0 < d["score"] <= 1.0 for d in scored)
    assert [d["score"] for d in scored] == sorted((d["score"] for d in scored), reverse=True)
    assert [d["token_str"] for d in scored] == [vocab[d["token"]] for d in scored]
    assert got["fills"] == [scored[0]["token_str"]]  # pyfunc: the best fill per text
    assert len(got["two"]) == 2 and got["two"][0] == got["fills"][0]

    elmo = Elmo.from_pretrained(bilm)
    features = np.load(out)
    assert got["n"] == len(SENTENCES) == len(features.files) and got["frame_equal"]
    for i, sentence in enumerate(SENTENCES):
        words = sentence.split()
        mine = features[f"arr_{i}"]
        assert mine.shape == (elmo.num_output_layers, len(words), elmo.output_dim)
        if words:
            expected = elmo([words]).layers[0].detach().numpy()
            assert np.abs(mine - expected).max() <= TOLERANCE


@pytest.mark.slow  # the tiny models' registration: seconds
def test_the_registered_bilm_is_code_not_a_pickle(registered, store):
    """Loading ``ctxrep-bilm`` runs ctxrep's own file (MLflow's models from code): the model
    holds no pickled Python object that loading would run."""
    import mlflow

    _, version = registered["bilm"]
    local = Path(mlflow.artifacts.download_artifacts(version.source))
    logged = {p.relative_to(local).as_posix() for p in local.rglob("*") if p.is_file()}
    assert not [p for p in logged if p.endswith((".pkl", ".pickle", ".cloudpickle"))], logged
    assert "elmo_pyfunc_code.py" in {Path(p).name for p in logged}


@pytest.mark.slow  # the tiny models' registration: seconds
def test_bert_with_its_mlm_head_is_registered_for_fill_mask(registered):
    import mlflow

    from ctxrep import model_registry

    bert, version = registered["bert"]
    client = mlflow.MlflowClient()
    assert client.get_model_version_by_alias(model_registry.BERT_NAME, "latest-tiny").version == version.version
    assert version.tags["task"] == "fill-mask" and version.tags["mlm_head"] == "true"
    assert version.tags["hf_architecture"] == "BertForMaskedLM"
    assert version.tags["dvc_md5"] == model_registry.dvc_md5(bert) and version.tags["profile"] == "tiny"
    flavor = mlflow.models.get_model_info(f"models:/{model_registry.BERT_NAME}/{version.version}").flavors
    assert flavor["transformers"]["task"] == "fill-mask" and "python_function" in flavor


@pytest.mark.slow  # transformers' logging of a BERT: seconds
def test_an_imported_encoder_without_mlm_head_is_not_registered_for_fill_mask(store):
    import mlflow

    from ctxrep import model_registry, tracking
    from ctxrep.models.bert_import import has_mlm_head

    root, _ = store
    encoder = tiny_bert(root, mlm_head=False)
    assert not has_mlm_head(encoder)
    with tracking.stage_run("pretrain_bert") as run:
        version = model_registry.register_bert(run, encoder, profile="published")
    assert version is not None
    assert version.tags["task"] == "feature-extraction" and version.tags["mlm_head"] == "false"
    assert version.tags["hf_architecture"] == "BertModel"
    client = mlflow.MlflowClient()
    described = client.get_model_version(model_registry.BERT_NAME, version.version)
    assert "no fill-mask" in described.description
    aliased = client.get_model_version_by_alias(model_registry.BERT_NAME, "latest-published")
    assert aliased.version == version.version
    flavor = mlflow.models.get_model_info(f"models:/{model_registry.BERT_NAME}/{version.version}").flavors
    assert flavor["transformers"]["task"] == "feature-extraction"
    assert flavor["transformers"].get("instance_type") != "FillMaskPipeline"


@pytest.mark.slow  # the tiny models' registration: seconds
def test_the_bilm_is_registered_with_its_dvc_hash(registered, store, tmp_path):
    import mlflow

    from ctxrep import model_registry, tracking

    _, first = registered["bilm"]
    model = tiny_bilm(tmp_path / "bilm", seed=1)  # new weights: a new DVC hash
    with tracking.stage_run("pretrain_bilm") as run:
        second = model_registry.register_bilm(run, model, profile="retrained")
    assert (first.name, int(second.version)) == ("ctxrep-bilm", int(first.version) + 1)
    assert first.tags["dvc_md5"].endswith(".dir") and first.tags["dvc_md5"] != second.tags["dvc_md5"]
    assert second.tags["dvc_md5"] == model_registry.dvc_md5(model) and second.tags["profile"] == "retrained"
    client = mlflow.MlflowClient()  # one alias per profile: latest-tiny stays where it was
    assert client.get_model_version_by_alias("ctxrep-bilm", "latest-retrained").version == second.version
    assert client.get_model_version_by_alias("ctxrep-bilm", "latest-tiny").version == first.version
    got = Path(mlflow.artifacts.download_artifacts(f"models:/ctxrep-bilm/{second.version}",
                                                   dst_path=str(tmp_path / "got")))
    weights = [p for p in got.rglob("model.safetensors")]
    assert len(weights) == 1 and weights[0].read_bytes() == (model / "model.safetensors").read_bytes()
    assert "python_function" in mlflow.models.get_model_info(
        f"models:/ctxrep-bilm/{second.version}").flavors


def test_a_failed_registration_is_warned_and_tagged_not_raised(store, tmp_path, caplog):
    from ctxrep import model_registry, tracking

    with tracking.stage_run("pretrain_bilm") as run:
        assert model_registry.register_bilm(run, tmp_path / "missing", profile="tiny") is None
    tags = run.client.get_run(run.run_id).data.tags
    assert tags["registry_error"].startswith("ctxrep-bilm") and "could not" in caplog.text


def test_the_alias_of_a_profile():
    from ctxrep.model_registry import alias

    assert alias("tiny") == "latest-tiny" and alias(None) == "latest-default"
