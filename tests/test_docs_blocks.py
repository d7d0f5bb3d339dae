"""The generated blocks of README.md and docs/*.md say what the committed records say
(``ctxrep docs --check``), and the renderer behaves on small records: a changed record fails the
check, an unknown block or a broken marker is a one-line error, every claim's source reads
without the seed documents, and a degenerate or stand-in comparison is flagged in its row."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ctxrep import docs_blocks, run_record
from ctxrep.errors import InputError

REPO = Path(__file__).resolve().parents[1]


def test_every_marked_block_in_the_repository_matches_the_records():
    differed = docs_blocks.update(REPO, check=True)
    assert not differed, ("blocks differ from the records (run `ctxrep docs`): "
                          + ", ".join(differed))


def test_the_readme_has_the_blocks_of_the_default_run():
    text = (REPO / "README.md").read_text()
    for name in ("claims-default", "scores-default", "run-default", "budgets"):
        assert f"<!-- ctxrep:begin {name} -->" in text, name


def test_every_claim_source_and_statement_reads_without_the_seed_documents():
    from ctxrep.analysis.claims import CLAIMS, LAYER_CLAIMS
    from ctxrep.report.evidence import LEARNING_CURVE_SOURCE

    for claim in (*CLAIMS, *LAYER_CLAIMS):
        assert "seed" not in docs_blocks.in_words(claim.source), claim.source
        assert "seed 0" not in docs_blocks.statement_in_words(claim.statement), claim.statement
    assert "seed" not in docs_blocks.in_words(LEARNING_CURVE_SOURCE)
    with pytest.raises(InputError, match="SOURCES_IN_WORDS"):
        docs_blocks.in_words("a new paper (seed 009 §2)")


# ------------------------------------------------------------------------------------------
# small records


def cell(mean, std=0.01, degenerate=False, n=3):
    return {"mean": mean, "std": std, "ci95": [mean - 0.01, mean + 0.01], "degenerate": degenerate,
            "did_not_learn": False, "metric": "accuracy", "n_seeds": n}


def claim(better, worse, task, estimate, low, high, verdict):
    return {"better": better, "worse": worse, "task": task, "claim": f"{better} beats {worse}",
            "source": "ELMo Table 1 (seed 004 §4.1)", "estimate": estimate, "ci95": [low, high],
            "verdict": verdict}


def write_records(root: Path, readme: str | None = None) -> None:
    (root / "metrics").mkdir(parents=True, exist_ok=True)
    (root / "bench/results").mkdir(parents=True, exist_ok=True)
    summary = {
        "baselines": {"sst2": {"majority": 0.5, "lookup": 0.6}},
        "cells": {"sst2": {"elmo": cell(0.62), "elmo-random": cell(0.505, degenerate=True),
                           "bert-finetune": cell(0.8), "bert-scratch": cell(0.51, std=0.02)}},
        "claims": [claim("elmo", "elmo-random", "sst2", 0.115, 0.09, 0.14, "reproduced"),
                   claim("bert-finetune", "bert-scratch", "sst2", 0.29, 0.25, 0.33,
                         "reproduced")],
        "pretrain": {}, "intrinsic": {},
    }
    (root / "metrics/summary.json").write_text(json.dumps(summary))
    (root / "metrics/headline.json").write_text(json.dumps(
        {"claims": {"reproduced": 2, "contradicted": 0, "inconclusive": 0}}))
    (root / "metrics/claims.json").write_text(json.dumps(
        {"elmo_vs_elmo-random": {"sst2": {"delta": 0.115, "low": 0.09, "high": 0.14}}}))
    (root / "params.yaml").write_text(
        "import_bert:\n  checkpoint: all-MiniLM-L6-v2\ntransfer:\n  bert-finetune:\n"
        "    bert: import_bert\n  bert-scratch:\n    bert: import_bert\n  elmo: {}\n")
    (root / "bench/results/budgets.json").write_text(json.dumps({"entries": [
        {"budget": "test", "command": "make test", "seconds": 700, "commit": "a" * 40,
         "date": "2026-12-07T10:00Z", "cpu": "AMD EPYC", "vendor": "AuthenticAMD", "cores": 2,
         "rc": 0, "passed": 900, "failed": 0, "fresh_clone": True, "source": "a test"}]}))
    (root / "README.md").write_text(readme if readme is not None else (
        "# t\n\nbefore\n<!-- ctxrep:begin claims-default -->\nstale\n"
        "<!-- ctxrep:end claims-default -->\nbetween\n<!-- ctxrep:begin budgets -->\n"
        "<!-- ctxrep:end budgets -->\nafter\n"))


def test_a_failed_budget_run_is_not_called_within_its_budget(tmp_path):
    write_records(tmp_path)
    path = tmp_path / "bench/results/budgets.json"
    budgets = json.loads(path.read_text())
    budgets["entries"][0].update(rc=2, failed=3)  # stopped early: a short time, not a pass
    path.write_text(json.dumps(budgets))
    docs_blocks.update(tmp_path, check=False)
    text = (tmp_path / "README.md").read_text()
    assert "**11 min 40 s** (failed: not a budget time) | exit 2, 900 passed, 3 failed" in text


def test_the_blocks_are_written_then_checked_then_a_changed_record_fails(tmp_path):
    write_records(tmp_path)
    assert docs_blocks.update(tmp_path, check=True) == ["README.md: claims-default",
                                                       "README.md: budgets"]
    docs_blocks.update(tmp_path, check=False)
    text = (tmp_path / "README.md").read_text()
    assert text.startswith("# t\n\nbefore\n<!-- ctxrep:begin claims-default -->\n| claim |")
    assert "between\n" in text and text.endswith("<!-- ctxrep:end budgets -->\nafter\n")
    assert "stale" not in text and "**11 min 40 s** (within)" in text
    assert docs_blocks.update(tmp_path, check=True) == []
    # a record changes: the check names the block written from it
    budgets = json.loads((tmp_path / "bench/results/budgets.json").read_text())
    budgets["entries"][0]["seconds"] = 1000
    (tmp_path / "bench/results/budgets.json").write_text(json.dumps(budgets))
    assert docs_blocks.update(tmp_path, check=True) == ["README.md: budgets"]


def test_the_claims_row_flags_degenerate_controls_and_stand_in_checkpoints(tmp_path):
    write_records(tmp_path)
    rows = docs_blocks.claims_block(docs_blocks.Records(tmp_path))
    first, second = rows[2], rows[3]
    assert "ELMo paper, Table 1" in first and "seed 0" not in first
    assert "⚠ `elmo-random` degenerate" in first and "at the majority baseline" in first
    assert "† stand-in checkpoint" in second and "⚠ `bert-scratch` at the majority baseline" in second
    notes = rows[-1]
    assert "**reproduced** when the whole CI is above 0" in notes
    assert "2 reproduced, 0 contradicted, 0 inconclusive" in notes
    assert "all-MiniLM-L6-v2" in notes


def test_records_that_disagree_are_an_error(tmp_path):
    write_records(tmp_path)
    (tmp_path / "metrics/claims.json").write_text(json.dumps(
        {"elmo_vs_elmo-random": {"sst2": {"delta": 0.2, "low": 0.09, "high": 0.14}}}))
    with pytest.raises(InputError, match="disagree"):
        docs_blocks.update(tmp_path, check=True)


@pytest.mark.parametrize("readme, message", [
    ("<!-- ctxrep:begin no-such-block -->\n<!-- ctxrep:end no-such-block -->\n",
     "README.md:1: unknown block 'no-such-block'; known: claims-default"),
    ("<!-- ctxrep:begin budgets -->\n", "README.md:1: block 'budgets' has no end marker"),
    ("x\n<!-- ctxrep:end budgets -->\n", "README.md:2: end of block 'budgets' without its begin"),
    ("<!-- ctxrep:begin budgets -->\n<!-- ctxrep:begin claims-default -->\n",
     "README.md:2: block 'claims-default' begins inside block 'budgets'"),
])
def test_a_broken_marker_is_an_error_naming_file_and_line(tmp_path, readme, message):
    write_records(tmp_path, readme)
    with pytest.raises(InputError) as e:
        docs_blocks.update(tmp_path, check=True)
    assert str(e.value).startswith(message)


def test_a_missing_record_is_an_error_naming_it(tmp_path):
    write_records(tmp_path, "<!-- ctxrep:begin run-default -->\n<!-- ctxrep:end run-default -->\n")
    with pytest.raises(InputError, match=r"metrics/run.json: missing"):
        docs_blocks.update(tmp_path, check=True)


def run_cli(*argv: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ctxrep", "docs", *argv], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def test_the_command_exits_1_naming_each_differing_block_and_2_on_bad_input(tmp_path):
    write_records(tmp_path)
    proc = run_cli("--check", "--root", str(tmp_path))
    assert proc.returncode == 1 and "README.md: claims-default" in proc.stdout, proc.stderr
    assert run_cli("--root", str(tmp_path)).returncode == 0
    assert run_cli("--check", "--root", str(tmp_path)).returncode == 0
    for bad in (str(tmp_path / "absent"), str(tmp_path / "README.md")):
        proc = run_cli("--check", "--root", bad)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2 and len(lines) == 1, proc.stderr
        assert lines[0].startswith("ctxrep docs: --root"), proc.stderr
    (tmp_path / "README.md").write_text("<!-- ctxrep:begin nope -->\n<!-- ctxrep:end nope -->\n")
    proc = run_cli("--root", str(tmp_path))
    assert proc.returncode == 2 and "unknown block 'nope'" in proc.stderr


# ------------------------------------------------------------------------------------------
# the run record


def test_the_run_record_names_each_stage_ran_restored_or_untimed(tmp_path):
    import os
    import time

    (tmp_path / "dvc.lock").write_text("schema: '2.0'\nstages:\n  tokenize: {}\n  fetch: {}\n"
                                       "  pretrain: {}\n")
    (tmp_path / "params.yaml").write_text("compute:\n  isa: native\n  threads: 2\n")
    timings = tmp_path / "reports/timings"
    timings.mkdir(parents=True)
    (timings / "pretrain.json").write_text('{"wall_s": 5.0}')
    os.utime(timings / "pretrain.json", (time.time() - 3600,) * 2)  # an earlier run's
    run = run_record.RunStart("default", "c" * 40, False, time.time() - 60)
    (timings / "tokenize.json").write_text('{"wall_s": 12.34}')
    record = run_record.build(tmp_path, run, run.started + 42.0,
                              machine={"model": "X", "vendor": "V", "cores": 2})
    assert record["stages"] == {"fetch": {"status": "untimed"},
                                "pretrain": {"status": "restored"},
                                "tokenize": {"status": "ran", "wall_s": 12.3}}
    assert record["dvc_wall_s"] == 42.0 and record["compute"] == {"isa": "native", "threads": 2}
    assert record["stage_counts"] == {"ran": 1, "restored": 1, "untimed": 1}
    path = run_record.write(record, tmp_path)
    text = path.read_text()
    assert list(json.loads(text)) == sorted(json.loads(text)) and text.endswith("}\n")


def test_the_committed_run_record_is_tracked_and_not_a_dvc_output():
    ignored = subprocess.run(["git", "check-ignore", "-q", "metrics/run.json"], cwd=REPO)
    assert ignored.returncode == 1, "metrics/run.json is ignored by git"
    assert "metrics/run.json" not in (REPO / "dvc.yaml").read_text()
    record = json.loads((REPO / "metrics/run.json").read_text())
    assert {"profile", "commit", "dirty", "started_utc", "dvc_wall_s", "machine", "compute",
            "stages"} <= set(record)
