"""Linear probes on a synthetic feature store where exactly one layer carries the signal."""

from __future__ import annotations

import json

import numpy as np
import pytest
from datasets import ClassLabel, Dataset, DatasetDict, Features, List, Value

from ctxrep.config import ParamError
from ctxrep.config.composition import defaults
from ctxrep.kinds import pair_vector, target_word
from ctxrep.metrics import compute
from ctxrep.transfer.features import FeatureStore, FieldWriter, examples_fingerprint
from ctxrep.transfer.probe import probe_model

N_LAYERS, DIM, N_TAGS = 3, 16, 4
SIGNAL_LAYER = 1
PARAMS = defaults("probe", max_train_words=1500, max_train_pairs=400, epochs=8, batch_size=64,
                  lr=0.05)


def _layers_for(labels: np.ndarray, rng: np.random.Generator, centroids: np.ndarray) -> np.ndarray:
    """(N_LAYERS, n, DIM) noise, except SIGNAL_LAYER = the label's centroid + noise."""
    layers = rng.normal(size=(N_LAYERS, len(labels), DIM))
    layers[SIGNAL_LAYER] = centroids[labels] + 0.5 * rng.normal(size=(len(labels), DIM))
    return layers


def _write_meta(root, fields, data: DatasetDict, kind: str) -> DatasetDict:
    """meta.json as extract writes it, fingerprints of the examples included."""
    (root / "meta.json").write_text(json.dumps({
        "n_layers": N_LAYERS, "dim": DIM, "fields": list(fields),
        "splits": {s: {"fingerprint": examples_fingerprint(d, kind)} for s, d in data.items()}}))
    return data


def make_ud_pos(root, rng, n_sentences=(300, 80)):
    """A tagging data set and its features; only SIGNAL_LAYER tells the tags apart."""
    centroids = 2.0 * rng.normal(size=(N_TAGS, DIM))
    root.mkdir(parents=True, exist_ok=True)
    splits = {}
    for split, n in zip(("train", "validation"), n_sentences):
        writer, rows = FieldWriter(root, split, "tokens"), []
        for _ in range(n):
            tags = rng.integers(0, N_TAGS, size=rng.integers(3, 9))
            writer.add(_layers_for(tags, rng, centroids))
            rows.append({"tokens": [f"w{t}" for t in tags], "tags": tags.tolist()})
        writer.close()
        splits[split] = rows
    features = Features({"tokens": List(Value("string")),
                         "tags": List(ClassLabel(names=[f"T{i}" for i in range(N_TAGS)]))})
    data = DatasetDict({s: Dataset.from_list(r, features=features) for s, r in splits.items()})
    return _write_meta(root, ["tokens"], data, "tagging")


def make_wic(root, rng, n_pairs=(400, 120)):
    """Pairs whose target word's SIGNAL_LAYER vectors agree exactly when the label is T."""
    root.mkdir(parents=True, exist_ok=True)
    splits = {}
    for split, n in zip(("train", "validation"), n_pairs):
        first, second = FieldWriter(root, split, "sentence1"), FieldWriter(root, split, "sentence2")
        rows = []
        for _ in range(n):
            label = int(rng.integers(0, 2))
            senses = np.array([0, 0 if label else 1])
            centroids = 2.0 * rng.normal(size=(2, DIM))
            target = _layers_for(senses, rng, centroids)           # (layers, 2, DIM)
            s1, s2 = rng.normal(size=(N_LAYERS, 4, DIM)), rng.normal(size=(N_LAYERS, 3, DIM))
            s1[:, 2], s2[:, 0] = target[:, 0], target[:, 1]          # target word positions
            first.add(s1)
            second.add(s2)
            rows.append({"sentence1": "a b bank d", "start1": 4, "sentence2": "bank f g",
                         "start2": 0, "label": label})
        first.close()
        second.close()
        splits[split] = rows
    features = Features({"sentence1": Value("string"), "start1": Value("int32"),
                         "sentence2": Value("string"), "start2": Value("int32"),
                         "label": ClassLabel(names=["F", "T"])})
    data = DatasetDict({s: Dataset.from_list(r, features=features) for s, r in splits.items()})
    return _write_meta(root, ["sentence1", "sentence2"], data, "word_in_context")


@pytest.fixture(scope="module")
def probe_result(tmp_path_factory):
    features_root = tmp_path_factory.mktemp("features")
    rng = np.random.default_rng(0)
    datasets = {"ud_pos": make_ud_pos(features_root / "toy" / "ud_pos", rng),
                "wic": make_wic(features_root / "toy" / "wic", rng)}
    result, predictions = probe_model("toy", features_root, datasets.__getitem__, PARAMS)
    return result, features_root, datasets, predictions


@pytest.mark.parametrize("task,chance", [("ud_pos", 1 / N_TAGS), ("wic", 0.5)])
def test_signal_layer_scores_far_above_the_others(probe_result, task, chance):
    scores = probe_result[0]["tasks"][task]["layers"]
    assert len(scores) == N_LAYERS
    assert scores[SIGNAL_LAYER] > 0.9
    for layer in set(range(N_LAYERS)) - {SIGNAL_LAYER}:
        assert scores[layer] < chance + 0.2, (layer, scores)


def test_result_records_metric_and_sizes(probe_result):
    result = probe_result[0]
    assert result["model"] == "toy"
    pos, wic = result["tasks"]["ud_pos"], result["tasks"]["wic"]
    assert pos["metric"] == "token_accuracy" and wic["metric"] == "accuracy"
    assert PARAMS.max_train_words <= pos["train_items"] < PARAMS.max_train_words + 9
    assert pos["eval_examples"] == 80
    assert wic["train_examples"] == wic["train_items"] == PARAMS.max_train_pairs
    assert wic["eval_examples"] == 120


def test_probe_is_deterministic(probe_result):
    result, features_root, datasets, predictions = probe_result
    assert probe_model("toy", features_root, datasets.__getitem__, PARAMS) == (result, predictions)


def test_saved_predictions_regroup_by_example_and_score_as_the_probe_does(probe_result):
    result, _, datasets, predictions = probe_result
    pos, wic = predictions["ud_pos"], predictions["wic"]
    names = datasets["ud_pos"]["validation"].features["tags"].feature.names
    gold_tags = [[names[t] for t in tags] for tags in datasets["ud_pos"]["validation"]["tags"]]
    assert pos["references"] == gold_tags           # tag names, a list per sentence, in order
    assert wic["references"] == list(datasets["wic"]["validation"]["label"])
    for task, entry in (("ud_pos", pos), ("wic", wic)):
        assert len(entry["layers"]) == N_LAYERS
        for layer, predicted in enumerate(entry["layers"]):
            metric = compute(result["tasks"][task]["metric"], predicted, entry["references"])
            assert round(metric[result["tasks"][task]["metric"]], 4) == \
                result["tasks"][task]["layers"][layer]


def test_task_without_features_is_skipped_with_a_reason(tmp_path):
    result, predictions = probe_model("toy", tmp_path, lambda task: pytest.fail("no data set "
                                                                         "needed"), PARAMS)
    assert predictions == {}
    for entry in result["tasks"].values():
        assert "layers" not in entry
        assert "extract featurizes only the tasks of grid.tasks" in entry["skipped"]


def test_features_out_of_sync_with_data_set_name_the_store(tmp_path):
    rng = np.random.default_rng(1)
    dataset = make_ud_pos(tmp_path / "toy" / "ud_pos", rng, n_sentences=(10, 5))
    truncated = DatasetDict({"train": dataset["train"].select(range(4)),
                             "validation": dataset["validation"]})
    with pytest.raises(ValueError, match="ud_pos.*extracted for other examples"):
        probe_model("toy", tmp_path, lambda task: truncated, PARAMS, tasks=("ud_pos",))


def test_target_word_and_pair_vector():
    assert target_word("the river bank", 10) == 2
    assert target_word("the river bank", 4) == 1
    with pytest.raises(ValueError):
        target_word("the river", 3)       # the space between words
    u, v = np.array([1.0, -2.0]), np.array([3.0, 1.0])
    assert pair_vector(u, v).tolist() == [1, -2, 3, 1, 2, 3, 3, -2]


def test_probe_params_are_validated():
    assert defaults("probe", epochs=3).epochs == 3
    with pytest.raises(ParamError, match="probe.epochs"):
        defaults("probe", epochs=0)
    with pytest.raises(ParamError, match="probe.max_words"):
        defaults("probe", max_words=5)


def test_feature_store_round_trip_used_by_the_probe(tmp_path):
    """The fixture writer and the store agree on layout (guards the synthetic data itself)."""
    rng = np.random.default_rng(2)
    make_ud_pos(tmp_path / "ud_pos", rng, n_sentences=(3, 2))
    field = FeatureStore(tmp_path / "ud_pos").field("train", "tokens")
    assert len(field) == 3 and field[0].shape[0] == N_LAYERS and field[0].shape[2] == DIM


@pytest.mark.slow
def test_probe_stage_end_to_end(tmp_path):
    from conftest import NO_MLFLOW, run_stage, scratch_repo

    repo = scratch_repo(tmp_path)
    dataset = make_ud_pos(repo / "data/features/bilm/ud_pos", np.random.default_rng(3))
    dataset.save_to_disk(str(repo / "data/raw/tasks/ud_pos/dataset"))
    (repo / "data/raw/tasks/ud_pos/MANIFEST.json").write_text('{"available": true}')
    proc = run_stage(repo, "probe.py", "bilm", env=NO_MLFLOW)
    assert "[probe@bilm] done" in proc.stdout
    result = json.loads((repo / "metrics/probe/bilm.json").read_text())
    scores = result["tasks"]["ud_pos"]["layers"]
    assert scores.index(max(scores)) == SIGNAL_LAYER
    assert "skipped" in result["tasks"]["wic"]
    assert run_stage(repo, "probe.py", "gpt", env=NO_MLFLOW, check=False).returncode != 0
