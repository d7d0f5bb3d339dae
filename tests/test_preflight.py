"""`ctxrep check-params` (and so `make repro`, before DVC deletes any output) refuses what each
stage would refuse only late, or never (issue 61 E): each case below once passed the check and
then failed half-way through a run, or ran to the end doing something else than asked."""

import subprocess
import sys

import pytest

from ctxrep.config import ParamError
from ctxrep.preflight import preflight
from tests.conftest import REPO, compose


@pytest.fixture(scope="module")
def default(tmp_path_factory):
    return compose_with(tmp_path_factory.mktemp("params"), [])


def compose_with(folder, overrides):
    import shutil

    if not (folder / "conf").exists():
        shutil.copytree(REPO / "conf", folder / "conf")
    return compose(folder, "default", overrides)


@pytest.mark.parametrize("override, key, says", [
    # once an exit 2 in pretrain_bert, after DVC had deleted its outputs
    ("pretrain_bert.compile=true", "pretrain_bert.compile", "compute.isa=native"),
    ("transfer.bert-finetune.compile=true", "transfer.bert-finetune.compile", "not portable"),
    # once a FileExistsError traceback in extract@bilm
    ("grid.tasks=[ud_pos,ud_pos]", "grid.tasks", "ud_pos twice"),
    ("tasks=[ud_pos,wic,conll2003,wic]", "tasks", "wic twice"),
    # once DVC's "No such file … data/raw/tasks/wic" at probe@bilm
    ("tasks=[sst2,ud_pos,conll2003]", "tasks", "wic missing"),
    # once exit 0, the method "not run" everywhere and its claims gone from the report
    ("transfer.bert-finetune.tasks=[ud-pos]", "transfer.bert-finetune.tasks", "runs it nowhere"),
])
def test_a_run_that_would_fail_late_or_do_nothing_is_refused_first(tmp_path, override, key, says):
    params = compose_with(tmp_path, [override, "compute.isa=compatible"])
    with pytest.raises(ParamError, match=key.replace(".", r"\.")) as err:
        preflight(params, env={}, cores=2, gpu=False)
    assert says in str(err.value)


def test_the_machine_limits_are_this_machines(default):
    threads = {**default, "compute": {**default["compute"], "threads": 1024}}
    with pytest.raises(ParamError, match="at most 16 on this machine of 2 cores"):
        preflight(threads, env={}, cores=2, gpu=False)
    preflight(threads, env={}, cores=128, gpu=False)  # a big machine holds them
    procs = {**default, "launch": {"nproc_per_node": 1024, "nnodes": 1}}
    with pytest.raises(ParamError, match="launch.nproc_per_node"):
        preflight(procs, env={}, cores=2, gpu=False)
    two = {**default, "launch": {"nproc_per_node": 1, "nnodes": 2}}
    with pytest.raises(ParamError, match="CTXREP_RDZV_ENDPOINT"):  # once exit 1 in pretrain_bilm
        preflight(two, env={}, cores=2, gpu=False)
    preflight(two, env={"CTXREP_RDZV_ENDPOINT": "10.0.0.1:29500", "CTXREP_NODE_RANK": "0"},
              cores=2, gpu=False)


def test_compile_passes_where_it_runs(default):
    compiled = {**default, "pretrain_bert": {**default["pretrain_bert"], "compile": True}}
    native = {**compiled, "compute": {**default["compute"], "isa": "native"}}
    preflight(native, env={}, cores=2, gpu=False)
    preflight({**compiled, "compute": {**default["compute"], "isa": "compatible"}}, env={},
              cores=2, gpu=True)  # on CUDA the CPU's kernels do not matter


def test_the_default_passes_and_the_command_refuses_in_one_line(default):
    preflight(default, env={}, cores=2, gpu=False)
    proc = subprocess.run([sys.executable, "-m", "ctxrep", "check-params", "default",
                           "grid.tasks=[ud_pos,ud_pos]"], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith("ctxrep: bad params: param 'grid.tasks'")


@pytest.mark.parametrize("profile", sorted(p.stem for p in (REPO / "conf/profile").glob("*.yaml")))
def test_every_profile_passes(tmp_path, profile):
    import shutil

    shutil.copytree(REPO / "conf", tmp_path / "conf")
    preflight(compose(tmp_path, profile), env={}, cores=2, gpu=False)
