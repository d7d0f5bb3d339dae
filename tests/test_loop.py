"""The shared training loop: exact resume, gradient accumulation, non-finite stops, schedule."""

import pytest
import torch
from torch import nn

from ctxrep.training import checkpoints, loop, optim


class ToyObjective:
    """Regression with dropout, so resume must also replay the random draws."""

    def __init__(self, crash_at=None, nan_at=None, batch_size=4):
        torch.manual_seed(0)
        self.model = nn.Sequential(nn.Linear(3, 8), nn.Dropout(0.3), nn.Linear(8, 1))
        g = torch.Generator().manual_seed(1)
        self.x = torch.randn(40, 3, generator=g)
        self.y = self.x.sum(1, keepdim=True)
        self.crash_at, self.nan_at, self.batch_size = crash_at, nan_at, batch_size

    def plan(self, epoch):
        order = torch.randperm(40, generator=torch.Generator().manual_seed(epoch)).tolist()
        return [order[i:i + self.batch_size] for i in range(0, 40, self.batch_size)]

    def batch(self, indices, step):
        if step == self.crash_at:
            raise KeyboardInterrupt("simulated kill")
        return {"x": self.x[indices], "y": self.y[indices], "step": step}

    def loss(self, batch, model):
        loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
        if batch["step"] == self.nan_at:
            loss = loss * float("nan")
        return loss, {"loss": loss.item()}, len(batch["x"])

    def evaluate(self):
        return {"mse": float(((self.model(self.x) - self.y) ** 2).mean())}


def cfg(**kw):
    """A toy run's loop, every key spelled out (LoopConfig has no defaults)."""
    return loop.LoopConfig(**{"steps": 25, "lr": 0.01, "optimizer": "adamw", "weight_decay": 0.01,
                              "warmup_fraction": 0.02, "schedule": "linear", "grad_clip": 1.0,
                              "grad_accum": 1, "eval_every": 0, "checkpoint_every": 5,
                              "log_every": 10, "seed": 3, "compile": False, "precision": "fp32",
                              **kw})


def weights(model):
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def test_interrupted_run_resumes_to_identical_weights(tmp_path):
    reference = ToyObjective()
    ref = loop.train(reference, cfg(), tmp_path / "a")

    crashed = ToyObjective(crash_at=17)
    with pytest.raises(KeyboardInterrupt):
        loop.train(crashed, cfg(), tmp_path / "b")
    assert checkpoints.Checkpoints(tmp_path / "b").latest().name == "step-00000015"
    resumed_obj = ToyObjective()  # a fresh process: new model, same params
    resumed = loop.train(resumed_obj, cfg(), tmp_path / "b")
    assert resumed.resumed_from == 15
    assert torch.equal(weights(reference.model), weights(resumed_obj.model))
    assert resumed.curve == ref.curve and resumed.final_eval == ref.final_eval


def test_held_out_curve_is_timed_and_survives_a_resume(tmp_path):
    """Every evaluation carries the training seconds before it (the time-to-perplexity axis),
    also the ones made before a resume."""
    crashed = ToyObjective(crash_at=17)
    with pytest.raises(KeyboardInterrupt):
        loop.train(crashed, cfg(eval_every=5), tmp_path)
    result = loop.train(ToyObjective(), cfg(eval_every=5), tmp_path)
    curve = loop.heldout_curve(result)
    assert [p["step"] for p in curve] == [5, 10, 15, 20, 25]
    assert all(p["mse"] == metrics["mse"] for p, (_, metrics) in zip(curve, result.evals))
    seconds = [p["train_s"] for p in curve]
    assert seconds == sorted(seconds) and seconds[-1] == round(result.train_seconds, 1)


def test_resume_is_not_a_no_op_check(tmp_path):
    """Guard for the test above: a different seed really gives different weights."""
    a, b = ToyObjective(), ToyObjective()
    loop.train(a, cfg(), tmp_path / "a")
    loop.train(b, cfg(seed=4), tmp_path / "b")
    assert not torch.equal(weights(a.model), weights(b.model))


class CountingObjective(ToyObjective):
    """Counts the epoch plans asked for, and records each step's batch."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.plans, self.seen = [], []

    def plan(self, epoch):
        self.plans.append(epoch)
        return super().plan(epoch)

    def batch(self, indices, step):
        self.seen.append(list(indices))
        return super().batch(indices, step)


def test_each_epoch_is_planned_once_and_steps_walk_the_plans_in_order(tmp_path):
    """A long run asks for each epoch's plan once (re-planning every earlier epoch at every
    step made a 40-epoch task model spend a fifth of its time shuffling), and its steps take
    the plans' batches in order, across epoch boundaries and with gradient accumulation."""
    objective = CountingObjective()
    loop.train(objective, cfg(steps=60, grad_accum=2, checkpoint_every=0), tmp_path)
    assert objective.plans == list(range(12))  # 60 steps x 2 micro-batches / 10 per epoch
    expected = [b for epoch in range(12) for b in ToyObjective().plan(epoch)]
    assert objective.seen == expected


def test_epoch_sizes_stay_in_epoch_order_whatever_is_asked_first():
    """``_Plans.size(e)`` is epoch e's size even when a later epoch is asked for first, or an
    epoch's plan was cached before its size was recorded."""

    class Growing:  # epoch e has e + 1 batches
        def plan(self, epoch):
            return [[epoch]] * (epoch + 1)

    plans = loop._Plans(Growing())
    plans[2]
    assert plans.size(3) == 4 and plans.sizes == [1, 2, 3, 4]
    assert [plans.size(e) for e in range(5)] == [1, 2, 3, 4, 5]
    assert loop._locate(3, plans, 1) == [[2]]  # steps 0 | 1 2 | 3 4 5: step 3 is epoch 2's


def test_gradient_accumulation_matches_a_large_batch(tmp_path):
    big, small = ToyObjective(batch_size=8), ToyObjective(batch_size=4)
    for m in (big.model, small.model):
        m[1].p = 0.0  # dropout draws differ between the layouts; compare the math only
    loop.train(big, cfg(steps=5, checkpoint_every=0), tmp_path / "a")
    loop.train(small, cfg(steps=5, grad_accum=2, checkpoint_every=0), tmp_path / "b")
    assert torch.allclose(weights(big.model), weights(small.model), atol=1e-6)


def test_non_finite_loss_stops_and_keeps_last_checkpoint(tmp_path):
    obj = ToyObjective(nan_at=12)
    with pytest.raises(loop.NonFiniteLoss, match=r"at step 12 .*example indices"):
        loop.train(obj, cfg(), tmp_path / "c")
    latest = checkpoints.Checkpoints(tmp_path / "c").latest()
    assert latest.name == "step-00000010"
    state = checkpoints.Checkpoints(tmp_path / "c").load(latest)
    assert all(torch.isfinite(t).all() for t in state["model"].values())


def test_half_written_checkpoint_is_ignored(tmp_path):
    ckpts = checkpoints.Checkpoints(tmp_path)
    ckpts.save(5, {"step": 5})
    (tmp_path / ".tmp-step-00000010-999").mkdir()  # a kill during the next write
    (tmp_path / ".tmp-step-00000010-999" / "state.pt").write_bytes(b"\x00" * 10)
    assert ckpts.latest().name == "step-00000005"


def test_linear_warmup_then_decay():
    factors = [optim.lr_factor(s, 100, 0.1, "linear") for s in range(100)]
    assert factors[0] == pytest.approx(0.1) and factors[9] == pytest.approx(1.0)
    assert factors[10] > factors[50] > factors[99] > 0
    assert all(a <= b for a, b in zip(factors[:10], factors[1:10]))


def test_weight_decay_skips_biases_and_norms():
    model = nn.Sequential(nn.Linear(3, 3), nn.LayerNorm(3))
    opt = optim.make_optimizer(model, "adamw", 1.0, 0.1)
    decayed = {id(p) for g in opt.param_groups if g["weight_decay"] > 0 for p in g["params"]}
    assert decayed == {id(model[0].weight)}


def test_a_log_file_gets_one_line_per_evaluation_and_no_redraws(tmp_path, caplog, capfd):
    """Not on a terminal (pytest captures stderr), no progress bar is drawn: the log has one
    line per held-out evaluation, with its step and metrics."""
    import logging

    with caplog.at_level(logging.INFO, logger=loop.log.name):
        loop.train(ToyObjective(), cfg(eval_every=10), tmp_path, desc="toy")
    lines = [r.getMessage() for r in caplog.records if "toy: step" in r.getMessage()]
    assert [line.split(" (")[0] for line in lines] == ["toy: step 10/25", "toy: step 20/25",
                                                       "toy: step 25/25"]
    assert all("mse " in line for line in lines)
    assert "\r" not in capfd.readouterr().err


def test_checkpoint_keys_change_with_the_code(monkeypatch):
    """A resume after a code change would mix two programs in one run: the key moves."""
    key = checkpoints.run_key({"lr": 0.1}, {"data": "x"})
    assert checkpoints.run_key({"lr": 0.1}, {"data": "x"}) == key
    monkeypatch.setattr(checkpoints, "code_fingerprint", lambda: "other code")
    assert checkpoints.run_key({"lr": 0.1}, {"data": "x"}) != key


def test_the_code_fingerprint_covers_the_cpp_kernel(tmp_path, monkeypatch):
    """The biLM's C++ LSTM kernel is part of the program: editing it must move the key too."""
    import shutil

    package = tmp_path / "ctxrep"
    (package / "training").mkdir(parents=True)
    (package / "models").mkdir()
    shutil.copy2(checkpoints.__file__, package / "training" / "checkpoints.py")
    kernel = package / "models" / "lstmp_cpu.cpp"
    kernel.write_text("// one kernel\n")
    monkeypatch.setattr(checkpoints, "__file__", str(package / "training" / "checkpoints.py"))
    checkpoints.code_fingerprint.cache_clear()
    try:
        before = checkpoints.code_fingerprint()
        kernel.write_text("// another kernel\n")
        checkpoints.code_fingerprint.cache_clear()
        assert checkpoints.code_fingerprint() != before
    finally:
        checkpoints.code_fingerprint.cache_clear()


def test_library_progress_bars_never_reach_a_stage_log(tmp_path):
    """datasets' "Saving the dataset" and transformers' bars were carriage-return redraws in
    `make repro`'s log: a stage turns them off, also when the library was imported first."""
    import subprocess
    import sys

    code = ("import datasets, transformers\n"
            "from ctxrep.stage import setup_logging\n"
            "setup_logging()\n"
            f"datasets.Dataset.from_dict({{'a': list(range(3000))}}).save_to_disk({str(tmp_path / 'ds')!r})\n"
            "assert not transformers.utils.logging.is_progress_bar_enabled()\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "\r" not in proc.stderr and "Saving the dataset" not in proc.stderr


def test_keep_freed_memory_serves_large_blocks_from_the_heap():
    """A step frees and allocates the same large blocks (the default biLM's softmax gradient is
    10 MB). glibc maps such a block fresh and unmaps it on free, so every page faults in again at
    the next allocation; after keep_freed_memory it is served from the heap, which keeps what is
    freed. Asked of glibc itself (mallinfo2: bytes in mapped blocks) in two fresh processes, one
    with it (it is process-wide), about a 31 MB block alive."""
    import subprocess
    import sys

    code = ("import ctypes, sys, torch\n"
            "from ctxrep.training.host_memory import keep_freed_memory\n"
            "class Mallinfo2(ctypes.Structure):\n"
            "    _fields_ = [(name, ctypes.c_size_t) for name in ('arena', 'ordblks', 'smblks', 'hblks',\n"
            "               'hblkhd', 'usmblks', 'fsmblks', 'uordblks', 'fordblks', 'keepcost')]\n"
            "libc = ctypes.CDLL('libc.so.6')\n"
            "libc.mallinfo2.restype = Mallinfo2\n"
            "if sys.argv[1] == 'keep':\n"
            "    assert keep_freed_memory(), 'not glibc?'\n"
            "before = libc.mallinfo2().hblkhd\n"
            "block = torch.empty(31 * 2**20 // 4)\n"
            "print(libc.mallinfo2().hblkhd - before)\n")
    mapped = {}
    for mode in ("plain", "keep"):
        proc = subprocess.run([sys.executable, "-c", code, mode], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        mapped[mode] = int(proc.stdout)
    assert mapped["plain"] >= 31 * 2**20  # a mapping of its own
    assert mapped["keep"] == 0  # from the heap
