"""Pretraining stages end to end on the tiny profile: outputs, HF round trip, kill -9 and resume.

The outputs are the session's tiny run's (``tiny_run``); stages rerun in copies of it."""

import json
import shutil

import pytest
import yaml

from ctxrep.training.curves import is_point
from ctxrep.report.inputs import read_curve, read_eval_curve
from tests.conftest import copy_run, kill_stage_when, run_stage, tree_hash

# outputs and DVC, not MLflow: stages run without MLflow runs (tests/conftest.py)
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("without_mlflow")]


@pytest.fixture
def repo(tiny_run):
    """The session's tiny run: its pretraining stages' outputs (read only)."""
    return tiny_run.repo


def test_bilm_stage_outputs(repo):
    from ctxrep.models.elmo import Elmo

    m = json.loads((repo / "metrics/pretrain_bilm.json").read_text())
    for key in ("val_ppl_forward", "val_ppl_backward", "val_ppl", "unigram_ppl", "train_tokens",
                "params"):
        assert key in m and m[key] > 0, key
    elmo = Elmo.from_pretrained(repo / "data/models/bilm")
    out = elmo([["The", "river", "bank"]])
    assert out.layers.shape[:3] == (1, 3, 3)
    params = yaml.safe_load((repo / "params.yaml").read_text())["pretrain_bilm"]
    curve = read_curve(repo / "dvclive/pretrain_bilm")  # DVCLive's, written as it trained
    assert curve.steps == [s for s in range(1, params["steps"] + 1)
                           if is_point(s, params["log_every"], params["steps"])]
    assert read_eval_curve(repo / "dvclive/pretrain_bilm").metrics["val_ppl"][-1] == \
        pytest.approx(m["val_ppl"], rel=1e-3)
    assert not (repo / "data/checkpoints/pretrain_bilm").exists(), "checkpoints left after success"
    assert not {"tokens_per_s", "train_seconds"} & set(m), "timings in a DVC metric"
    cost = json.loads((repo / "reports/compute/pretrain_bilm.json").read_text())  # the ledger row
    assert (cost["amount"], cost["unit"], cost["params"]) == (m["train_tokens"], "tokens", m["params"])
    timed = json.loads((repo / "reports/timings/pretrain_bilm.json").read_text())  # not DVC's
    assert timed["wall_s"] >= timed["train_s"] > 0 and timed["tokens_per_s"] > 0
    assert timed["heldout_curve"] and all(p["train_s"] > 0 for p in timed["heldout_curve"])
    assert not {"wall_s", "train_s", "tokens_per_s", "heldout_curve"} & set(cost)
    assert cost["flops"] == pytest.approx(m["train_flops"], 1e-3)


def test_bert_stage_output_loads_in_transformers(repo):
    import torch
    from transformers import AutoTokenizer, BertForPreTraining

    from ctxrep.models.bert_hf import load_pretrained

    m = json.loads((repo / "metrics/pretrain_bert.json").read_text())
    assert {"val_mlm_loss", "val_mlm_acc", "val_nsp_acc", "train_tokens", "params"} <= set(m)
    model_dir = repo / "data/models/bert"
    tok = AutoTokenizer.from_pretrained(str(model_dir))
    hf = BertForPreTraining.from_pretrained(str(model_dir)).eval()
    ours = load_pretrained(model_dir).eval()
    enc = tok(["the river bank", "a new game"], ["plays music", "the city"], padding=True,
              return_tensors="pt")
    with torch.no_grad():
        theirs = hf(**enc)
        mine = ours.logits(enc["input_ids"], enc["token_type_ids"], enc["attention_mask"])
    real = enc["attention_mask"].bool()
    assert (theirs.prediction_logits[real] - mine.mlm_logits[real]).abs().max() <= 1e-4
    assert (theirs.seq_relationship_logits - mine.nsp_logits).abs().max() <= 1e-4


def test_static_vectors_stage_is_deterministic(repo, tmp_path):
    """pretrain_static on the tiny corpus: vectors of the corpus's (lower-cased) words, its
    metrics and ledger row; a second run, with another hash salt, writes the same bytes."""
    from ctxrep.data.tokenized import TokenizedCorpus
    from ctxrep.models.word_vectors import WordVectors

    outputs = ("data/models/static", "metrics/pretrain_static.json")

    def hashes(root):
        return {f: tree_hash(root / f) if (root / f).is_dir() else (root / f).read_bytes()
                for f in outputs}

    copy = copy_run(repo, tmp_path / "repo")
    run_stage(copy, "pretrain_static.py", env={"PYTHONHASHSEED": "2"})
    assert hashes(copy) == hashes(repo)  # the pipeline's run had another hash salt
    vectors = WordVectors.load(repo / "data/models/static")
    corpus_words = {w.lower() for doc in TokenizedCorpus(repo / "data/tokenized").documents(
        "train", ["words"]) for s in doc["words"] for w in s}
    assert set(vectors.words) == corpus_words  # tiny: min_count 1, every word, lower-cased
    m = json.loads((repo / "metrics/pretrain_static.json").read_text())
    assert m["vocab_size"] == len(vectors.words) and m["dim"] == vectors.dim == 16
    assert 0 <= m["heldout_oov_rate"] < 1 and m["train_words"] > 0
    cost = json.loads((repo / "reports/compute/pretrain_static.json").read_text())
    assert (cost["amount"], cost["unit"], cost["params"]) == (m["train_words"], "words",
                                                              m["params"])
    assert cost["flops"] == pytest.approx(m["train_flops"], 1e-3) and "words_per_s" not in cost
    assert json.loads((repo / "reports/timings/pretrain_static.json").read_text())["words_per_s"] > 0


def _checkpoint_at_least(repo, ckpt_root, min_step=10):
    def reached():
        done = [p for p in (repo / ckpt_root).glob("*/step-*") if (p / "COMPLETE").exists()]
        return any(int(p.name.split("-")[1]) >= min_step for p in done)
    return reached


@pytest.mark.parametrize("script,model_file,ckpt", [
    ("pretrain_bilm.py", "data/models/bilm/model.safetensors", "data/checkpoints/pretrain_bilm"),
    ("pretrain_bert.py", "data/models/bert/model.safetensors", "data/checkpoints/pretrain_bert"),
])
def test_kill_9_then_rerun_matches_uninterrupted(repo, tmp_path, script, model_file, ckpt):
    killed = copy_run(repo, tmp_path / "killed")
    shutil.rmtree((killed / model_file).parent)  # the model to train again
    (killed / "metrics" / script.replace(".py", ".json")).unlink()
    assert kill_stage_when(killed, script, [], _checkpoint_at_least(killed, ckpt)), \
        "the run ended before it could be killed"
    assert not (killed / model_file).exists(), "a killed run left a model behind"
    run_stage(killed, script)
    assert (killed / model_file).read_bytes() == (repo / model_file).read_bytes()
    name = script.replace(".py", ".json")
    assert (killed / "metrics" / name).read_bytes() == (repo / "metrics" / name).read_bytes()
