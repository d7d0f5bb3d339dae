"""`ctxrep compare [REV]`: a run reproduces a committed one when no claim's verdict flips; last
bits that move (another CPU's MKL branch) are reported, never failed."""

import copy
import json
import subprocess
import sys

import pytest
import yaml

from ctxrep import compare

SUMMARY = {
    "cells": {"ud_pos": {
        "elmo": {"metric": "accuracy", "mean": 0.9012, "std": 0.0021, "n_seeds": 5,
                 "ci95": [0.8981, 0.9043], "degenerate": False, "did_not_learn": False},
        "static": {"metric": "accuracy", "mean": 0.8411, "std": 0.0030, "n_seeds": 5,
                   "ci95": [0.8370, 0.8452], "degenerate": False, "did_not_learn": False}}},
    "baselines": {"ud_pos": {"lookup": 0.80}},
    "claims": [{"better": "elmo", "worse": "static", "task": "ud_pos", "claim": "ELMo helps",
                "source": "004", "estimate": 0.0601, "ci95": [0.0552, 0.0650],
                "verdict": "reproduced"}]}
LOCK = {"schema": "2.0", "stages": {
    "pretrain_bilm": {"cmd": "x", "outs": [{"path": "data/models/bilm", "md5": "aaa.dir"}]},
    "report": {"cmd": "y", "outs": [{"path": "metrics/summary.json", "md5": "bbb"}]}}}


def git(root, *args):
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=root,
                   check=True, capture_output=True)


def committed_run(tmp_path):
    root = tmp_path / "repo"
    (root / "metrics").mkdir(parents=True)
    (root / "metrics/summary.json").write_text(json.dumps(SUMMARY))
    (root / "dvc.lock").write_text(yaml.safe_dump(LOCK))
    (root / "params.yaml").write_text("profile: default\n")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "a run")
    return root


def rerun(root, summary, lock_md5=None):
    (root / "metrics/summary.json").write_text(json.dumps(summary))
    if lock_md5:
        lock = copy.deepcopy(LOCK)
        lock["stages"]["pretrain_bilm"]["outs"][0]["md5"] = lock_md5
        (root / "dvc.lock").write_text(yaml.safe_dump(lock))


def ctxrep_compare(root, *args):
    return subprocess.run([sys.executable, "-m", "ctxrep", "compare", *args], cwd=root,
                          capture_output=True, text=True, timeout=60)


def test_the_same_run_reproduces_byte_for_byte(tmp_path):
    root = committed_run(tmp_path)
    proc = ctxrep_compare(root)
    assert proc.returncode == 0, proc.stderr
    assert "2 identical, 0 differ" in proc.stdout and "every output the same bytes" in proc.stdout


def test_last_bits_that_move_are_noise_not_a_failure(tmp_path):
    """Another CPU: other bytes, means within their seeds' spread, the verdict kept: exit 0,
    the differing output named."""
    root = committed_run(tmp_path)
    moved = copy.deepcopy(SUMMARY)
    moved["cells"]["ud_pos"]["elmo"]["mean"] = 0.9019
    moved["claims"][0].update(estimate=0.0608, ci95=[0.0549, 0.0667])
    rerun(root, moved, lock_md5="ccc.dir")
    proc = ctxrep_compare(root)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 identical, 1 differ" in proc.stdout and "differs: data/models/bilm" in proc.stdout
    assert "reproduced within noise" in proc.stdout and "every cell within" in proc.stdout
    rows = comparison_rows(root)
    assert rows.claims[0].ref["verdict"] == rows.claims[0].here["verdict"] == "reproduced"
    assert all(r.agrees for r in rows.cells)


def comparison_rows(root):
    import os

    here = os.getcwd()
    os.chdir(root)
    try:
        return compare.compare("HEAD", root)
    finally:
        os.chdir(here)


def test_a_flipped_verdict_fails_and_names_the_row(tmp_path):
    root = committed_run(tmp_path)
    flipped = copy.deepcopy(SUMMARY)
    flipped["cells"]["ud_pos"]["elmo"]["mean"] = 0.8420
    flipped["claims"][0].update(estimate=0.0009, ci95=[-0.0040, 0.0058], verdict="inconclusive")
    rerun(root, flipped, lock_md5="ddd.dir")
    proc = ctxrep_compare(root, "HEAD")
    assert proc.returncode == compare.FLIPPED_EXIT, proc.stdout + proc.stderr
    assert "NOT REPRODUCED" in proc.stdout
    assert "elmo > static on ud_pos: reproduced → inconclusive" in proc.stdout
    assert "| ud_pos | elmo |" in proc.stdout and "**no**" in proc.stdout  # the cell, flagged


def test_the_spread_band_uses_seeds_or_else_the_cis():
    from scipy.stats import t

    a = {"mean": 0.50, "std": 0.01, "n_seeds": 4, "ci95": [0.49, 0.51]}
    b = {"mean": 0.53, "std": 0.01, "n_seeds": 4, "ci95": [0.52, 0.54]}
    row = compare.CellRow("t", "m", a, b)
    assert row.band() == pytest.approx(t.ppf(0.975, 3) * (0.01 ** 2 / 4 * 2) ** 0.5)  # 0.0225
    assert row.agrees is False
    assert compare.CellRow("t", "m", a, {**b, "mean": 0.52}).agrees is True
    one = compare.CellRow("t", "m", {**a, "std": 0.0, "n_seeds": 1}, {**b, "std": 0.0, "n_seeds": 1})
    assert one.band() == pytest.approx((0.01 ** 2 * 2) ** 0.5) and one.agrees is False


@pytest.mark.parametrize("setup, message", [
    ("no-run", "run the pipeline first"),
    ("bad-rev", "not a commit of this repository"),
    ("old-rev", "recorded no run's results"),
])
def test_a_side_without_results_is_one_line_and_exit_2(tmp_path, setup, message):
    root = committed_run(tmp_path)
    args = []
    if setup == "no-run":
        (root / "metrics/summary.json").unlink()
    elif setup == "bad-rev":
        args = ["no-such-rev"]
    else:
        git(root, "rm", "-q", "metrics/summary.json")
        git(root, "commit", "-qm", "before results were tracked")
        (root / "metrics").mkdir(exist_ok=True)
        (root / "metrics/summary.json").write_text(json.dumps(SUMMARY))
    proc = ctxrep_compare(root, *args)
    assert proc.returncode == 2 and message in proc.stderr, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_make_repro_ends_with_the_comparison_when_it_ran_heads_params(tmp_path, capsys):
    """`make repro` (ctxrep.repro) ends with `ctxrep compare HEAD`: a flipped verdict fails the
    run; a run of other params (another profile, SET overrides) is not compared, and says so."""
    from ctxrep.repro import compare_with_head

    root = committed_run(tmp_path)
    flipped = copy.deepcopy(SUMMARY)
    flipped["claims"][0].update(estimate=-0.0100, ci95=[-0.0150, -0.0050], verdict="contradicted")
    rerun(root, flipped)
    assert compare_with_head(root) == compare.FLIPPED_EXIT
    out = capsys.readouterr().out
    assert "NOT REPRODUCED" in out and "reproduced → contradicted" in out
    (root / "params.yaml").write_text("profile: tiny\n")
    assert compare_with_head(root) == 0
    assert "skipped, this run's params.yaml is not HEAD's" in capsys.readouterr().err


def test_another_checkouts_run_and_compute_settings_alone_are_the_same_experiment(tmp_path):
    """`--against DIR` reads another checkout's run (a GPU run beside a CPU one); params that
    differ only in how the float work ran (compute, launch) are the same experiment."""
    root = committed_run(tmp_path)
    other = tmp_path / "gpu-run"
    (other / "metrics").mkdir(parents=True)
    (other / "metrics/summary.json").write_text(json.dumps(SUMMARY))
    (other / "params.yaml").write_text("profile: tiny\ncompute: {isa: native, threads: 16}\n")
    proc = ctxrep_compare(root, "--against", str(other))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "not the same experiment" in proc.stdout  # another profile
    (other / "params.yaml").write_text("profile: default\ncompute: {isa: native, threads: 16}\n")
    (root / "params.yaml").write_text("profile: default\ncompute: {isa: avx2, threads: 2}\n")
    proc = ctxrep_compare(root, "--against", str(other))
    assert proc.returncode == 0 and "not the same experiment" not in proc.stdout
    proc = ctxrep_compare(root, "--against", str(tmp_path / "nowhere"))
    assert proc.returncode == 2 and "not a folder" in proc.stderr
