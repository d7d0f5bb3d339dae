"""A transfer cell's record: its JSON round-trips unchanged, and a malformed file is rejected
naming the file and the key."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from ctxrep.io import write_json
from ctxrep.transfer.record import CellRecord, MetricScores, ReportInputError, SeedResult

PATH = Path("metrics/transfer/ud_pos/elmo.json")


def seed(score: float, epochs: int, mix: list[float]) -> SeedResult:
    return SeedResult(scores={"token_accuracy": score}, predictions=[[0, 1]], best_epoch=epochs,
                      curve={"train_loss": [1.0] * epochs, "dev": [0.5] * epochs},
                      train_examples=48, steps=6 * epochs, train_tokens=900, trainable_params=500,
                      train_flops=2.7e6, train_loss=0.9, resumed_from=0, seconds=1.5,
                      mix_weights={"input": mix})


def record(**fields) -> CellRecord:
    """A learning-curve point of ud_pos/elmo, two seeds (as run_cell builds it); ``fields``
    replace its values."""
    runs = [seed(0.8123456789, 3, [0.2, 0.3, 0.5]), seed(0.75, 2, [0.1, 0.1, 0.8])]
    cell = CellRecord(
        task="ud_pos", method="elmo", kind="tagging", metric="token_accuracy",
        metrics=["token_accuracy"], primary="token_accuracy", eval_split="validation",
        seeds=[0, 1], train_fraction=0.5,
        scores={"token_accuracy": MetricScores.over_seeds([r.scores["token_accuracy"]
                                                           for r in runs])},
        best_epoch=[r.best_epoch for r in runs], curves=[r.curve for r in runs],
        degenerate=[False, True], mix_weights={"input": [r.mix_weights["input"] for r in runs]},
        train_examples=48, dev_examples=16, eval_examples=64, word_vector_oov_rate=0.125)
    return replace(cell, **fields)


def round_trip(cell: CellRecord) -> CellRecord:
    return CellRecord.from_json(json.loads(json.dumps(cell.to_json())), PATH)


def test_scores_are_summarised_over_seeds_and_rounded():
    scores = record().scores["token_accuracy"]
    assert scores == MetricScores(mean=0.781173, std=0.044085, values=[0.812346, 0.75])
    assert MetricScores.over_seeds([0.5]).std == 0.0


@pytest.mark.parametrize("cell", [
    record(),
    record(train_fraction=None, mix_weights=None, word_vector_oov_rate=None),  # fine-tuned
    record(train_fraction=None, mix_weights=None, word_vector_oov_rate=None, start="import_bert"),
    CellRecord(task="ud_pos", method="elmo", kind="tagging", metric="token_accuracy",
               metrics=["token_accuracy"], primary="token_accuracy", eval_split="validation",
               seeds=[0, 1], unavailable="no location serves ud_pos"),
], ids=["feature-based", "fine-tuned", "fine-tuned-published", "unavailable"])
def test_a_record_round_trips_through_its_json_unchanged(cell):
    again = round_trip(cell)
    assert again == cell and again.to_json() == cell.to_json()
    assert list(again.to_json()) == list(cell.to_json())   # the same keys, in the same order


def test_optional_keys_are_written_only_when_set():
    point = record().to_json()
    assert list(point) == ["task", "method", "kind", "metric", "metrics", "primary",
                           "eval_split", "seeds", "train_fraction", "scores", "best_epoch",
                           "curves", "degenerate", "mix_weights", "train_examples",
                           "dev_examples", "eval_examples", "word_vector_oov_rate"]
    cell = record(train_fraction=None, mix_weights=None, word_vector_oov_rate=None).to_json()
    assert not {"train_fraction", "mix_weights", "word_vector_oov_rate"} & set(cell)
    unavailable = record(unavailable="no data").to_json()
    assert list(unavailable)[-2:] == ["train_fraction", "unavailable"]
    assert "scores" not in unavailable


def test_what_the_report_reads():
    cell = record(scores={"token_accuracy": MetricScores(0.5, 0.1, [0.4, 0.6]),
                          "accuracy": MetricScores(1, 0, [1, 1])},
                  mix_weights={"input": [None, None], "output": [[0.5, 0.5], [0.4, 0.6]]})
    assert (cell.mean, cell.std, cell.n_seeds) == (0.5, 0.1, 2)
    assert cell.others == {"accuracy": 1.0} and isinstance(cell.others["accuracy"], float)
    assert cell.learned_mix == {"output": [[0.5, 0.5], [0.4, 0.6]]}


# Cells as the transfer stage wrote them before CellRecord existed (the tiny profile's pipeline;
# keys sorted as write_json sorts them): fine-tuned, static word vectors only (no mix, an OOV
# rate), a learned mix. Note the integer values of num_tokens: they stay integers.
WRITTEN = {
    "ud_pos/bert-finetune": (
        '{"best_epoch": [2, 1], "curves": [{"dev": [0.2, 0.4], "train_loss": [2.847435, 2.784'
        '083]}, {"dev": [0.2, 0.2], "train_loss": [2.817155, 2.71787]}], "degenerate": [false'
        ', false], "dev_examples": 1, "eval_examples": 4, "eval_split": "validation", "kind":'
        ' "tagging", "method": "bert-finetune", "metric": "token_accuracy", "metrics": ["toke'
        'n_accuracy"], "primary": "token_accuracy", "scores": {"num_tokens": {"mean": 20.0, "'
        'std": 0.0, "values": [20, 20]}, "token_accuracy": {"mean": 0.3, "std": 0.141421, "va'
        'lues": [0.4, 0.2]}}, "seeds": [0, 1], "task": "ud_pos", "train_examples": 3}'),
    "ud_pos/static": (
        '{"best_epoch": [2, 1], "curves": [{"dev": [0.2, 0.4, 0.4], "train_loss": [2.807688, '
        '2.757582, 2.730678]}, {"dev": [0.2, 0.2, 0.2], "train_loss": [2.857788, 2.813161, 2.'
        '786898]}], "degenerate": [false, false], "dev_examples": 1, "eval_examples": 4, "eva'
        'l_split": "validation", "kind": "tagging", "method": "static", "metric": "token_accu'
        'racy", "metrics": ["token_accuracy"], "mix_weights": {"input": [null, null]}, "prima'
        'ry": "token_accuracy", "scores": {"num_tokens": {"mean": 20.0, "std": 0.0, "values":'
        ' [20, 20]}, "token_accuracy": {"mean": 0.3, "std": 0.141421, "values": [0.4, 0.2]}},'
        ' "seeds": [0, 1], "task": "ud_pos", "train_examples": 3, "word_vector_oov_rate": 0.8'
        '}'),
    "sst2/elmo": (
        '{"best_epoch": [1, 2], "curves": [{"dev": [0.5, 0.5, 0.0], "train_loss": [0.688382, '
        '0.694114, 0.690391]}, {"dev": [0.5, 1.0, 1.0], "train_loss": [0.6936, 0.687025, 0.66'
        '347]}], "degenerate": [true, false], "dev_examples": 2, "eval_examples": 12, "eval_s'
        'plit": "validation", "kind": "classification", "method": "elmo", "metric": "accuracy'
        '", "metrics": ["accuracy", "macro_f1"], "mix_weights": {"input": [[0.335113, 0.33244'
        '3, 0.332443], [0.336212, 0.331838, 0.33195]]}, "primary": "accuracy", "scores": {"ac'
        'curacy": {"mean": 0.583333, "std": 0.117851, "values": [0.5, 0.666667]}, "macro_f1":'
        ' {"mean": 0.5, "std": 0.235702, "values": [0.333333, 0.666667]}}, "seeds": [0, 1], "'
        'task": "sst2", "train_examples": 10, "word_vector_oov_rate": 0.130435}'),
}


@pytest.mark.parametrize("cell", sorted(WRITTEN))
def test_a_written_cell_reads_and_writes_back_the_same_bytes(tmp_path, cell):
    written, again = tmp_path / "metrics/transfer" / f"{cell}.json", tmp_path / "again.json"
    write_json(written, json.loads(WRITTEN[cell]))
    record = CellRecord.from_json(json.loads(written.read_text()), written)
    write_json(again, record.to_json())
    assert again.read_bytes() == written.read_bytes()


def write(tmp_path: Path, data: dict) -> Path:
    path = tmp_path / PATH
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


def without(data: dict, key: str) -> dict:
    return {k: v for k, v in data.items() if k != key}


@pytest.mark.parametrize("change,message", [
    (lambda d: without(d, "seeds"), r"missing key\(s\) \['seeds'\]"),
    (lambda d: without(d, "curves"), r"missing key\(s\) \['curves'\]"),
    (lambda d: {**d, "task": "sst2"}, "'sst2'/'elmo', but its path says 'ud_pos'/'elmo'"),
    (lambda d: {**d, "scores": {"f1": d["scores"]["token_accuracy"]}},
     "no entry for the primary metric 'token_accuracy'"),
    (lambda d: {**d, "scores": {"token_accuracy": {"mean": "high", "std": 0, "values": []}}},
     "'scores.token_accuracy.mean' = 'high': expected a number"),
    (lambda d: {**d, "mix_weights": {"input": [[0.5, 0.5], None]}},
     "mix_weights: expected .* for 'input'"),
    (lambda d: {**d, "degenerate": False}, "'degenerate' = False: expected a list"),
], ids=["seeds", "curves", "task", "primary", "mean", "mix", "degenerate"])
def test_a_malformed_record_is_rejected_naming_the_file_and_key(tmp_path, change, message):
    path = write(tmp_path, change(record().to_json()))
    with pytest.raises(ReportInputError, match=message) as error:
        CellRecord.from_json(json.loads(path.read_text()), path)
    assert error.value.path == path and str(path) in str(error.value)


def test_rows_that_start_from_a_published_bert_are_marked_in_the_report():
    """A fine-tuning cell from import_bert (or any BERT cell when pretrain_bert imported its
    weights) is marked †, and the footnote says what that means for a comparison with elmo."""
    from ctxrep.report.evidence import published_footnote, published_methods
    from ctxrep.report.inputs import ReportInputs

    def inputs(bert_source: str, finetune_from: str) -> ReportInputs:
        cells = {"bert-finetune": record(method="bert-finetune", start=finetune_from),
                 "bert-feature": record(method="bert-feature"), "elmo": record()}
        return ReportInputs(tasks=["ud_pos"], methods=list(cells), tokenize=None, pretrain={},
                            curves={}, transfer={"ud_pos": cells}, probes={},
                            corpus_manifest=None, task_manifests={}, neighbors=None,
                            weights={"bert": {"source": bert_source}})

    assert published_methods(inputs("train", "pretrain_bert")) == set()
    assert published_methods(inputs("train", "import_bert")) == {"bert-finetune"}
    assert published_methods(inputs("import", "pretrain_bert")) == {"bert-finetune",
                                                                    "bert-feature"}
    note = published_footnote({"bert-finetune"})[1]
    assert note.startswith("† `bert-finetune` use a published BERT") and "`elmo`" in note
    assert published_footnote(set()) == []


@pytest.mark.parametrize("cell, flags", [
    ("ud_pos/bert-finetune", [False, False]), ("ud_pos/static", [False, False]),
    # seed 0 of the tiny profile's sst2/elmo: 0.688 -> 0.694 -> 0.690, stuck near ln 2
    ("sst2/elmo", [True, False]),
])
def test_did_not_learn_is_read_off_the_written_curves(cell, flags):
    """No record key for it: the report derives each seed's flag from ``curves``."""
    from ctxrep.report.summary import seeds_did_not_learn
    path = Path("metrics/transfer") / f"{cell}.json"
    assert seeds_did_not_learn(CellRecord.from_json(json.loads(WRITTEN[cell]), path)) == flags
