"""The same bytes on another machine (``compute.isa: avx2`` on Intel CPUs, ``compatible`` on
every x86-64 CPU; src/ctxrep/compute.py), and a stage that refuses a mode its CPU's MKL ignores.

The other machine is this one made to look like a 1-core AVX2 CPU: MKL restricted to AVX2
(``MKL_ENABLE_INSTRUCTIONS``), ATen and oneDNN dispatching AVX2 at most, one core
(``taskset``). The pretraining stages (MKL GEMMs, ATen kernels, the char-CNN's convolutions, the
compiled LSTM kernel, AdamW) train on both from the same tiny data with two compute threads:
in portable mode they write the same weights byte for byte; in native mode they do not, on a
CPU with AVX-512, so the first check is not vacuous. `.ci/run` does the same for the whole
tiny pipeline and compares ``dvc.lock``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ctxrep import compute
from ctxrep.compute import environment, is_portable, mismatches
from tests.conftest import LAUNCH, copy_run, tree_hash

INTEL = compute.cpu_vendor().startswith(compute.INTEL)
# The portable modes this CPU's MKL honours: compatible everywhere, avx2 on Intel's alone.
HONOURED = ["compatible", *(["avx2"] if INTEL else [])]

# The stages run in copies of the session's tiny run, without MLflow runs.
SLOW, NO_MLFLOW = pytest.mark.slow, pytest.mark.usefixtures("without_mlflow")

AVX2_MACHINE = {"MKL_ENABLE_INSTRUCTIONS": "AVX2", "ATEN_CPU_CAPABILITY": "avx2",
                "ONEDNN_MAX_CPU_ISA": "AVX2"}
STAGES = {"pretrain_bilm.py": "data/models/bilm", "pretrain_bert.py": "data/models/bert"}


def has_avx512() -> bool:
    env = {k: v for k, v in os.environ.items() if k != "ATEN_CPU_CAPABILITY"}
    out = subprocess.run([sys.executable, "-c", "import torch; print(torch.backends.cpu.get_cpu_capability())"],
                         capture_output=True, text=True, env=env)
    return out.stdout.strip().startswith("AVX512")


def train(repo, isa: str, machine: dict | None, stages=tuple(STAGES)) -> dict[str, str]:
    """Run the pretraining ``stages`` (both by default) in ``repo`` with ``compute.isa=isa``, two
    threads and 10 steps, on this machine (``machine`` None) or the 1-core AVX2 one; the hash of
    each stage's weights."""
    params = yaml.safe_load((repo / "params.yaml").read_text())
    params["compute"] = {"isa": isa, "threads": 2}
    for section in ("pretrain_bilm", "pretrain_bert"):  # a third of the tiny run's steps:
        params[section].update(steps=10, eval_every=10, checkpoint_every=10)  # bytes differ by then
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    env = {k: v for k, v in os.environ.items() if k not in {*AVX2_MACHINE, "OMP_NUM_THREADS", "MKL_NUM_THREADS"}}
    prefix = []
    if machine is not None:
        env.update(machine)
        prefix = [shutil.which("taskset"), "-c", "0"]
    hashes = {}
    for script in stages:
        out = STAGES[script]
        proc = subprocess.run([*prefix, *LAUNCH, f"stages/{script}"], cwd=repo, env=env,
                              capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, f"{script} ({isa}, {machine}):\n{proc.stderr[-3000:]}"
        hashes[script] = tree_hash(repo / out)
    return hashes


@pytest.fixture
def repo(tiny_run, tmp_path):
    return copy_run(tiny_run.repo, tmp_path / "repo")


@SLOW
@NO_MLFLOW
@pytest.mark.parametrize("isa", HONOURED)
def test_portable_mode_writes_the_same_weights_on_another_cpu_and_core_count(repo, isa):
    assert train(repo, isa, None) == train(repo, isa, AVX2_MACHINE)


@SLOW
@NO_MLFLOW
def test_native_mode_does_not_on_a_cpu_with_avx512(repo):
    if not has_avx512():
        pytest.skip("this CPU has no AVX-512: native mode picks AVX2 here too, so the two "
                    "machines cannot differ")
    bilm = ("pretrain_bilm.py",)  # one stage that differs is enough
    native, avx2_machine = train(repo, "native", None, bilm), train(repo, "native", AVX2_MACHINE, bilm)
    assert native["pretrain_bilm.py"] != avx2_machine["pretrain_bilm.py"]


@SLOW
@NO_MLFLOW
def test_a_stage_started_under_other_settings_refuses_and_says_how_to_start_it(repo):
    params = yaml.safe_load((repo / "params.yaml").read_text())
    params["compute"]["isa"] = "compatible"
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    env = {**os.environ, "ATEN_CPU_CAPABILITY": "default"}  # a stage run by hand, not launched
    proc = subprocess.run([sys.executable, "stages/pretrain_bilm.py"], cwd=repo, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert "ATEN_CPU_CAPABILITY=default (wanted avx2)" in proc.stderr
    assert "python -m ctxrep.launch stages/<stage>.py" in proc.stderr


@SLOW
@NO_MLFLOW
def test_a_compiled_cpu_run_in_portable_mode_is_refused_naming_native(repo):
    from tests.conftest import run_stage, set_profile

    set_profile(repo, "tiny", ["pretrain_bilm.compile=true", "compute.isa=compatible"])
    proc = run_stage(repo, "pretrain_bilm.py", check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "compute.isa" in proc.stderr and "SET='compute.isa=native'" in proc.stderr


def test_the_environment_of_each_mode():
    threads = {"OMP_NUM_THREADS": "3", "MKL_NUM_THREADS": "3", "OPENBLAS_NUM_THREADS": "3"}
    pinned = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2",
              "OPENBLAS_CORETYPE": "Haswell"}
    assert environment("avx2", 3) == {**threads, **pinned, "MKL_CBWR": "AVX2"}
    assert environment("compatible", 3) == {**threads, **pinned, "MKL_CBWR": "COMPATIBLE"}
    assert environment("native", 3) == threads
    assert environment("auto", 3) == environment("avx2" if INTEL else "native", 3)
    # what check_compile reads: the mode this process was launched in
    assert is_portable(environment("avx2", 3)) and is_portable(environment("compatible", 3))
    assert not is_portable(environment("native", 3))
    assert mismatches("native", 1, {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "2",
                                    "OPENBLAS_NUM_THREADS": "1"}) == ["MKL_NUM_THREADS=2 (wanted 1)"]


MKL_PROBE = """
import torch
from ctxrep import compute
from ctxrep.stage import stage

with stage("mkl_probe", None, track=False):
    torch.mm(torch.ones(3, 3), torch.ones(3, 3))
    print("branch", compute.mkl_branch(), flush=True)
"""


@pytest.mark.parametrize("isa", ["avx2", "compatible", "native"])
def test_a_stage_runs_only_under_the_mkl_branch_its_mode_asks_for(tmp_path, isa):
    """MKL ignores MKL_CBWR=AVX2 on a CPU that is not Intel's (CNR:AUTO, seen on an AMD EPYC
    at c706614, where stages ran on and dvc.lock recorded avx2 over other bytes). A stage reads
    the branch MKL reports and runs only under the one its mode asks for; else it stops,
    naming the modes that can run here."""
    params = yaml.safe_load((Path(__file__).parents[1] / "params.yaml").read_text())
    params["compute"] = {"isa": isa, "threads": 1}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    (tmp_path / "probe.py").write_text(MKL_PROBE)
    proc = subprocess.run([*LAUNCH, "probe.py"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120, env={k: v for k, v in os.environ.items()
                                            if k not in compute.ENV_VARS})
    wanted = {"avx2": "AVX2", "compatible": "COMPATIBLE", "native": "OFF"}[isa]
    if isa == "avx2" and not INTEL:
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        assert "MKL runs CNR:AUTO" in proc.stderr and "compute.isa=compatible" in proc.stderr
        return
    assert proc.returncode == 0, proc.stderr
    assert f"branch {wanted}" in proc.stdout


def test_the_mkl_probe_reads_what_mkl_reports():
    """The probe is MKL's own verbose line, not the environment: a process asked for nothing
    reports OFF, one asked for COMPATIBLE reports it, on every vendor."""
    code = "from ctxrep import compute; import torch; print(compute.mkl_branch())"
    env = {k: v for k, v in os.environ.items() if k != "MKL_CBWR"}
    for cbwr, seen in ((None, "OFF"), ("COMPATIBLE", "COMPATIBLE"),
                       ("AVX2", "AVX2" if INTEL else "AUTO")):
        run_env = env if cbwr is None else {**env, "MKL_CBWR": cbwr}
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             env=run_env, timeout=120)
        assert out.stdout.strip() == seen, (cbwr, out.stdout, out.stderr)


def test_the_launcher_sets_the_modes_environment_and_passes_the_arguments(tmp_path):
    """What a stage started by dvc.yaml sees: compute's variables, the libraries' telemetry off
    unless the user set it, and its own arguments."""
    import json
    from pathlib import Path

    params = yaml.safe_load((Path(__file__).parents[1] / "params.yaml").read_text())
    params["compute"] = {"isa": "avx2", "threads": 3}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    (tmp_path / "show.py").write_text("import json, os, sys\nprint(json.dumps([sys.argv[1:], dict(os.environ)]))\n")
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_DISABLE_TELEMETRY", "DO_NOT_TRACK")}
    env["MLFLOW_DISABLE_TELEMETRY"] = "false"  # the user's choice is kept
    proc = subprocess.run([*LAUNCH, "show.py", "sst2", "elmo"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    args, seen = json.loads(proc.stdout)
    assert args == ["sst2", "elmo"]
    assert {k: seen.get(k) for k in environment("avx2", 3)} == environment("avx2", 3)
    assert seen["HF_HUB_DISABLE_TELEMETRY"] == "1" and seen["DO_NOT_TRACK"] == "1"
    assert seen["MLFLOW_DISABLE_TELEMETRY"] == "false"
