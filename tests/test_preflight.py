"""`ctxrep check-params` (and so `make repro`, before DVC deletes any output) refuses what each
stage would refuse only late, or never (issue 61 E): each case below once passed the check and
then failed half-way through a run, or ran to the end doing something else than asked."""

import subprocess
import sys
from pathlib import Path

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


def _add_to_the_default_grid(conf: Path, task: str) -> None:
    """Step 5 of docs/adding-a-task.md: ``task`` in conf/config.yaml's ``tasks:`` and
    ``grid.tasks`` (a block list each)."""
    config = conf / "config.yaml"
    text = config.read_text()
    text = text.replace("\ntasks:\n", f"\ntasks:\n- {task}\n", 1)
    text = text.replace("\ngrid:\n  tasks:\n", f"\ngrid:\n  tasks:\n  - {task}\n", 1)
    assert text.count(f"- {task}\n") == 2
    config.write_text(text)


def test_check_params_names_every_profile_a_task_added_to_the_default_grid_needs(tmp_path):
    """Issue 62 (6): the command, not a list in the docs, names the profiles whose own `tasks:`
    must fetch a task added to conf/config.yaml's grid."""
    import shutil

    shutil.copytree(REPO / "conf", tmp_path / "conf")
    _add_to_the_default_grid(tmp_path / "conf", "stsb")
    proc = subprocess.run([sys.executable, "-m", "ctxrep", "check-params", "default"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert lines[0] == ("ctxrep: conf/profile/default.yaml: add stsb to its own `tasks:` "
                        "(stsb: read by grid.tasks)")
    assert [line for line in lines if "add stsb" in line] == lines[:1]  # no other profile
    assert lines[-1].startswith("ctxrep: bad params: param 'grid.tasks' = 'stsb'")


def test_check_params_says_when_no_profile_needs_a_task_and_which_keep_their_own_grid():
    from ctxrep.preflight import survey_lines, survey_profiles

    survey = survey_profiles(REPO)
    assert survey.missing == {} and survey.broken == {}
    assert survey.follow_grid == ["default"]  # its own `tasks:`, conf/config.yaml's grid
    # own-bert sets its own `tasks:` and its own grid: it need not fetch a new task
    assert {"claims", "own-bert", "table1", "tiny", "tiny-full"} <= set(survey.own_grid)
    assert not set(survey.own_grid) & set(survey.follow_grid)
    lines = survey_lines(survey)
    assert lines[0].startswith("no profile needs a task added")
    assert lines[1].endswith("must also be added to the own `tasks:` of: default")


def test_check_params_estimate_counts_the_words_each_extract_stage_featurizes(
        default, mirror_env, tmp_path, monkeypatch):
    """Issue 62 (8): the cost before the run: the words of each fetched grid task that every
    extract@<features> stage featurizes (the training draw and the evaluated split), and what
    caps the evaluated split."""
    import datasets

    from ctxrep.data import sources, tasks
    from ctxrep.preflight import estimate_lines, extract_words

    monkeypatch.chdir(tmp_path)
    out = tmp_path / "data/raw/tasks/ud_pos"
    sources.fetch(tasks.dataset("ud_pos"), "mirror", {}, out, verify_sha256=False)
    fetched = datasets.load_from_disk(str(out / "dataset"))
    whole = {split: sum(map(len, fetched[split]["tokens"])) for split in ("train", "validation")}
    counts = extract_words(default)
    assert counts["ud_pos"] == whole  # fewer rows than either cap: every word
    assert counts["conll2003"].startswith("not fetched yet")
    lines = estimate_lines(default, counts)
    assert lines[0] == (f"extract: each of its 4 stages (bilm, bert, bilm-random, bert-random) "
                        f"featurizes {sum(whole.values()):,} words of the grid's tasks counted so far")
    assert "evaluated split: whole, transfer.common.max_eval_examples=0" in lines[-1]

    common = {**default["transfer"]["common"], "max_eval_examples": 3}
    capped = {**default, "transfer": {**default["transfer"], "common": common}}
    counts = extract_words(capped)
    assert counts["ud_pos"]["train"] == whole["train"]
    assert 0 < counts["ud_pos"]["validation"] < whole["validation"]
    assert "at most 3 examples" in estimate_lines(capped, counts)[-1]
    # a profile's left-to-right families and Hugging Face checkpoints are extracted too
    more = {**default, "left_to_right": ["gpt"], "hf": {"roberta": {"path": "x"}}}
    assert estimate_lines(more, counts)[0].startswith(
        "extract: each of its 6 stages (bilm, bert, bilm-random, bert-random, gpt, hf-roberta) ")
