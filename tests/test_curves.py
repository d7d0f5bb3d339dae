"""Training curves through DVCLive and MLflow (ctxrep.training.curves): the folder DVC plots,
the points MLflow gets, and a resumed run's folder byte-identical to an uninterrupted one's."""

import pytest

from ctxrep.training.curves import Curves, is_point, train_point
from ctxrep.training import loop
from ctxrep.report.inputs import read_curve, read_eval_curve
from test_loop import ToyObjective, cfg


class FakeRun:
    """What the loop calls on a :class:`ctxrep.tracking.StageRun`: ``log_metrics``."""

    def __init__(self):
        self.points = []

    def log_metrics(self, metrics, step=None):
        self.points.append((step, dict(metrics)))

    def history(self, key):
        return [(step, m[key]) for step, m in self.points if key in m]


def folder_bytes(root):
    return {p.relative_to(root).as_posix(): p.read_bytes()
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_points_after_step_one_every_log_every_and_at_the_end():
    assert [s for s in range(1, 26) if is_point(s, 10, 25)] == [1, 11, 21, 25]
    rows = [[1, 4.0, 0.1], [2, 2.0, 0.2], [3, 3.0, 0.3]]
    assert train_point(rows, 1, 3) == {"train/loss": 2.5, "train/lr": 0.3}


def test_dvclive_layout_read_back_by_the_report(tmp_path):
    run = FakeRun()
    curves = Curves(tmp_path / "live", run)
    curves.log(1, {"train/loss": 3.0, "train/lr": 0.01}, {"tokens_per_s": 1234.5})
    curves.log(5, {"train/loss": 2.0, "train/lr": 0.02})
    curves.log(5, {"val/ppl": 90.0, "val/ppl_forward": 95.5}, {"train_s": 3.2})
    curves.close()
    metrics = tmp_path / "live" / "plots" / "metrics"
    assert (metrics / "train" / "loss.tsv").read_text() == "step\tloss\n1\t3.0\n5\t2.0\n"
    assert (metrics / "val" / "ppl.tsv").read_text() == "step\tppl\n5\t90.0\n"
    assert read_curve(tmp_path / "live").train_loss == [3.0, 2.0]
    held = read_eval_curve(tmp_path / "live")
    assert held.steps == [5] and held.metrics == {"val_ppl": [90.0], "val_ppl_forward": [95.5]}
    # MLflow gets the same points under its names, and what varies run to run besides.
    assert run.history("train_loss") == [(1, 3.0), (5, 2.0)]
    assert run.history("val_ppl") == [(5, 90.0)] and run.history("lr") == [(1, 0.01), (5, 0.02)]
    assert run.history("tokens_per_s") == [(1, 1234.5)]
    written = b"".join(folder_bytes(tmp_path / "live").values())
    assert b"tokens_per_s" not in written and b"train_s" not in written and b"timestamp" not in written


def test_a_fresh_folder_replaces_an_old_runs(tmp_path):
    old = Curves(tmp_path / "live")
    old.log(1, {"val/old_metric": 1.0})
    old.close()
    Curves(tmp_path / "live").close()
    assert not (tmp_path / "live" / "plots" / "metrics" / "val").exists()


def test_loop_curves_are_window_means_and_every_evaluation(tmp_path):
    run = FakeRun()
    result = loop.train(ToyObjective(), cfg(eval_every=10, log_every=10), tmp_path / "ckpt", run,
                        live_dir=tmp_path / "live")
    curve = read_curve(tmp_path / "live")
    assert curve.steps == [1, 11, 21, 25]
    losses = [row[1] for row in result.curve]
    assert curve.train_loss == pytest.approx([losses[0], sum(losses[1:11]) / 10,
                                              sum(losses[11:21]) / 10, sum(losses[21:]) / 4])
    held = read_eval_curve(tmp_path / "live")
    assert held.steps == [10, 20, 25]
    assert held.metrics["val_mse"] == [m["mse"] for _, m in result.evals]
    assert [s for s, _ in run.history("val_mse")] == [10, 20, 25]
    steps = [s for s, _ in run.points]
    assert steps == sorted(steps), "an MLflow history goes back in steps"


def test_a_resumed_run_writes_the_same_folder_as_an_uninterrupted_one(tmp_path):
    settings = cfg(eval_every=5, log_every=4)
    loop.train(ToyObjective(), settings, tmp_path / "a", live_dir=tmp_path / "live-a")
    with pytest.raises(KeyboardInterrupt):
        loop.train(ToyObjective(crash_at=17), settings, tmp_path / "b",
                   live_dir=tmp_path / "live-b")
    run = FakeRun()
    resumed = loop.train(ToyObjective(), settings, tmp_path / "b", run,
                         live_dir=tmp_path / "live-b")
    assert resumed.resumed_from == 15
    assert folder_bytes(tmp_path / "live-a") == folder_bytes(tmp_path / "live-b")
    # The resumed MLflow run has the whole history too, replayed in step order.
    assert [s for s, _ in run.history("train_loss")] == [1, 5, 9, 13, 17, 21, 25]
    assert [s for s, _ in run.history("val_mse")] == [5, 10, 15, 20, 25]


def test_resume_equivalence_is_not_vacuous(tmp_path):
    """Guard for the test above: another seed writes another folder."""
    loop.train(ToyObjective(), cfg(log_every=4), tmp_path / "a", live_dir=tmp_path / "live-a")
    loop.train(ToyObjective(), cfg(log_every=4, seed=4), tmp_path / "b",
               live_dir=tmp_path / "live-b")
    assert folder_bytes(tmp_path / "live-a") != folder_bytes(tmp_path / "live-b")
