"""`make repro`'s driver (ctxrep.repro): one run per checkout, HEAD never left detached.

DVC is replaced by small scripts, so these tests exercise the driver and not the pipeline."""

import os
import stat
import subprocess
import sys
import time

from tests.conftest import REPO, gone, launched_env, scratch_repo


def fake_dvc(tmp_path, body: str):
    script = tmp_path / "fake-dvc"
    script.write_text("#!/usr/bin/env bash\n" + body + "\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


def repro(repo, dvc, **kw):
    env = {**os.environ, "DVC": dvc}
    return subprocess.Popen([sys.executable, "-m", "ctxrep", "repro", "tiny"], cwd=repo, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def git(repo, *args):
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True).stdout.strip()


def test_a_second_make_repro_fails_cleanly_naming_the_first(tmp_path):
    (tmp_path / "repo").mkdir()
    repo = scratch_repo(tmp_path / "repo")
    marker = tmp_path / "started"
    first = repro(repo, fake_dvc(tmp_path, f"touch {marker}; sleep 30"))
    deadline = time.time() + 60
    while not marker.exists() and time.time() < deadline:
        time.sleep(0.1)
    try:
        second = repro(repo, fake_dvc(tmp_path, "exit 0"))
        out, err = second.communicate(timeout=60)
        assert second.returncode == 3, err
        assert f"PID {first.pid}" in err and "Traceback" not in err
        assert "dvc exp run --queue" in err
    finally:
        first.kill()
        first.wait()


def test_head_detached_by_a_killed_run_is_reattached_by_the_next(tmp_path):
    (tmp_path / "repo").mkdir()
    repo = scratch_repo(tmp_path / "repo")
    branch = git(repo, "symbolic-ref", "--short", "HEAD")
    # `dvc exp run` detaches HEAD while it works; kill -9 the driver mid-run (no cleanup runs)
    killer = fake_dvc(tmp_path, "git checkout -q --detach; kill -9 $PPID; sleep 5")
    proc = repro(repo, killer)
    proc.communicate(timeout=60)
    assert proc.returncode == -9
    assert git(repo, "symbolic-ref", "-q", "HEAD") == "", "the fake run did not detach HEAD"
    nxt = repro(repo, fake_dvc(tmp_path, "exit 0"))
    _, err = nxt.communicate(timeout=60)
    assert nxt.returncode == 0, err
    assert f"re-attached HEAD to {branch}" in err
    assert git(repo, "symbolic-ref", "--short", "HEAD") == branch


def test_each_make_repro_gives_its_stages_a_fresh_pipeline_run_id(tmp_path):
    (tmp_path / "repo").mkdir()
    repo = scratch_repo(tmp_path / "repo")
    seen = tmp_path / "ids"
    record = fake_dvc(tmp_path, f'echo "$CTXREP_PIPELINE_RUN" >> {seen}')
    for _ in range(2):
        proc = repro(repo, record)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
    ids = seen.read_text().split()
    assert len(ids) == 2 and len(set(ids)) == 2 and all(len(i) == 32 for i in ids)


def test_a_successful_run_drops_lock_entries_of_stages_no_longer_defined(tmp_path):
    """DVC keeps the lock entry of a stage that left the pipeline (another profile's cell)
    forever; make repro drops it after a successful run and keeps every other entry as is."""
    import yaml

    (tmp_path / "repo").mkdir()
    repo = scratch_repo(tmp_path / "repo", "tiny")
    lock = yaml.safe_load((REPO / "dvc.lock").read_text())
    # no outputs: the fake DVC writes none, and make repro rehashes every output at the end
    kept = {"locate_data": {**lock["stages"]["locate_data"], "outs": []}}
    gone = dict(kept["locate_data"], cmd="python stages/transfer.py gone method")
    (repo / "dvc.lock").write_text(yaml.safe_dump(
        {"schema": lock["schema"], "stages": {**kept, "transfer@gone-method": gone}},
        sort_keys=False))
    proc = repro(repo, fake_dvc(tmp_path, "exit 0"))
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert "dropped 1 entries" in err and "transfer@gone-method" in err
    assert yaml.safe_load((repo / "dvc.lock").read_text())["stages"] == kept
    # a run that fails leaves the lock alone
    (repo / "dvc.lock").write_text((repo / "dvc.lock").read_text().replace(
        "stages:\n", "stages:\n  transfer@gone-method:\n    cmd: x\n", 1))
    proc = repro(repo, fake_dvc(tmp_path, "exit 1"))
    proc.communicate(timeout=120)
    assert "transfer@gone-method" in (repo / "dvc.lock").read_text()


def test_overrides_are_checked_before_dvc_and_a_rejected_one_leaves_params_alone(tmp_path):
    """`make repro SET='pretrain_bilm.steps=-5'`: exit 2 naming the key; DVC never starts and
    params.yaml keeps its bytes. Accepted overrides reach `dvc exp run` as `-S` arguments, a
    list value unglobbed."""
    (tmp_path / "repo").mkdir()
    repo = scratch_repo(tmp_path / "repo")
    before = (repo / "params.yaml").read_bytes() if (repo / "params.yaml").exists() else None
    args = tmp_path / "args"
    dvc = fake_dvc(tmp_path, f'printf "%s\\n" "$@" > {args}')
    env = {**os.environ, "DVC": dvc, "SET": "pretrain_bilm.steps=-5"}
    bad = subprocess.run([sys.executable, "-m", "ctxrep", "repro", "tiny"], cwd=repo, env=env,
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "pretrain_bilm.steps" in bad.stderr, bad.stderr
    assert not args.exists(), "DVC ran with a rejected override"
    after = (repo / "params.yaml").read_bytes() if (repo / "params.yaml").exists() else None
    assert after == before
    env["SET"] = "pretrain_bilm.steps=7 'grid.tasks=[ud_pos]'"
    good = subprocess.run([sys.executable, "-m", "ctxrep", "repro", "tiny"], cwd=repo, env=env,
                          capture_output=True, text=True, timeout=120)
    assert good.returncode == 0, good.stderr
    assert args.read_text().split("\n")[:7] == [
        "exp", "run", "-S", "profile=tiny", "-S", "pretrain_bilm.steps=7", "-S"]
    assert args.read_text().split("\n")[7] == "grid.tasks=[ud_pos]"


def test_a_run_ends_by_rehashing_every_output_and_names_a_corrupt_one(tmp_path):
    """DVC trusts what it restores from its cache; make repro rehashes the outputs dvc.lock
    records once the run has succeeded, and fails naming a file whose bytes differ."""
    import hashlib

    import yaml

    (tmp_path / "repo").mkdir()
    repo = scratch_repo(tmp_path / "repo", "tiny")
    out = repo / "data" / "sources.json"
    out.parent.mkdir(parents=True)
    out.write_text("{}\n")
    md5 = hashlib.md5(b"{}\n").hexdigest()
    (repo / "dvc.lock").write_text(yaml.safe_dump({"schema": "2.0", "stages": {"locate_data": {
        "cmd": "python stages/locate_data.py",
        "outs": [{"path": "data/sources.json", "hash": "md5", "md5": md5, "size": 3}]}}}))
    proc = repro(repo, fake_dvc(tmp_path, "exit 0"))
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0 and "every output matches dvc.lock" in err, err
    out.write_text("{\"x\": 1}\n")  # what a corrupt, trusted cache object would put there
    proc = repro(repo, fake_dvc(tmp_path, "exit 0"))
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1 and "data/sources.json: md5" in err and "--repair" in err, err


def test_a_stale_git_index_lock_stops_the_run_before_dvc_and_changes_nothing(tmp_path):
    """A stale .git/index.lock made `dvc exp run` fail half-way with the run's params.yaml and
    dvc.lock moved into `git stash`, silently. Refused before DVC starts, naming the lock."""
    (tmp_path / "repo").mkdir()
    repo = scratch_repo(tmp_path / "repo")
    (repo / "params.yaml").write_text((repo / "params.yaml").read_text() + "\n")  # a change of the user's
    before = (repo / "params.yaml").read_text()
    (repo / ".git" / "index.lock").write_text("")
    ran = tmp_path / "dvc-ran"
    proc = repro(repo, fake_dvc(tmp_path, f"touch {ran}"))
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and "git's index is locked" in err and "index.lock" in err
    assert not ran.exists() and (repo / "params.yaml").read_text() == before
    assert git(repo, "stash", "list") == ""


def test_changes_dvc_leaves_in_the_stash_are_named(tmp_path):
    (tmp_path / "repo").mkdir()
    repo = scratch_repo(tmp_path / "repo")
    (repo / "params.yaml").write_text((repo / "params.yaml").read_text() + "\n")
    proc = repro(repo, fake_dvc(tmp_path, "git stash -q; exit 2"))
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and "`git stash pop` puts them back" in err


def test_an_unbalanced_quote_in_set_is_one_line_not_a_traceback(tmp_path):
    (tmp_path / "repo").mkdir()
    repo = scratch_repo(tmp_path / "repo")
    env = {**os.environ, "DVC": fake_dvc(tmp_path, "exit 0"), "SET": "pretrain_bert.steps='5"}
    proc = subprocess.run([sys.executable, "-m", "ctxrep", "repro", "tiny"], cwd=repo, env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "No closing quotation" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_stage_started_in_the_background_stops_on_sigint_and_sigterm(tmp_path):
    """A shell starts background jobs with SIGINT ignored, and `kill -INT` did nothing; both
    signals now stop a stage as Ctrl-C does: one line, exit 130 (SIGINT) or 143 (SIGTERM)."""
    import signal

    (tmp_path / "repo").mkdir()
    repo = scratch_repo(tmp_path / "repo")
    script = ("import time\nfrom ctxrep.stage import stage\n"
              "with stage('signal_probe', None, track=False):\n"
              "    print('working', flush=True)\n    time.sleep(60)\n")
    for signum, code in ((signal.SIGINT, 130), (signal.SIGTERM, 143)):
        proc = subprocess.Popen(
            [sys.executable, "-c", script], cwd=repo, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, env=launched_env(repo),
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))  # as `cmd &` does
        assert proc.stdout.readline().strip() == "working"
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == code, err
        assert "signal_probe: stopped by" in err and "Traceback" not in err


def test_a_bad_value_already_in_params_yaml_gets_a_hint_for_the_profile_that_ran(tmp_path):
    """After a plain `dvc exp run -S pretrain_bert.steps=-5` on profile tiny, the stage that
    refuses the value says how to rewrite params.yaml for tiny, not only how to restore the
    committed (default) file."""
    import yaml

    (tmp_path / "repo").mkdir()
    repo = scratch_repo(tmp_path / "repo")
    subprocess.run([sys.executable, "-m", "ctxrep", "check-params", "tiny", "--write"], cwd=repo,
                   check=True, capture_output=True)
    params = yaml.safe_load((repo / "params.yaml").read_text())
    params["pretrain_bert"]["steps"] = -5
    (repo / "params.yaml").write_text(yaml.safe_dump(params))
    script = "from ctxrep.stage import stage\nwith stage('probe', 'pretrain_bert', track=False):\n    pass\n"
    proc = subprocess.run([sys.executable, "-c", script], cwd=repo, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 2 and "pretrain_bert.steps" in proc.stderr
    assert "ctxrep check-params tiny --write" in proc.stderr and "Traceback" not in proc.stderr


def test_dvcs_warning_for_each_output_not_made_yet_is_said_once(capsys):
    """`dvc exp run` warns once per output of a stage new to the grid (40-50 lines when a task
    is added); through ctxrep.dvc_cli it is one line, and other warnings pass."""
    import logging
    from pathlib import Path

    import dvc_data

    from ctxrep import dvc_cli

    # the loggers and the message are dvc-data's own (a DVC upgrade that changes them fails here)
    root = Path(dvc_data.__file__).parent
    for name in dvc_cli.CHECKOUT_LOGGERS:
        source = (root / name.removeprefix("dvc_data.").replace(".", "/")).with_suffix(".py")
        assert dvc_cli.MISSING in source.read_text(), source
    quiet = dvc_cli.install()
    try:
        caught = []
        handler = logging.Handler()
        handler.emit = caught.append
        for name in dvc_cli.CHECKOUT_LOGGERS:
            logger = logging.getLogger(name)
            logger.addHandler(handler)
            for path in ("dvclive/transfer/wic/elmo", "metrics/transfer/wic/elmo.json"):
                logger.warning("No file hash info found for '%s'. It won't be created.", path)
            logger.warning("something else")
            logger.removeHandler(handler)
    finally:
        for name in dvc_cli.CHECKOUT_LOGGERS:
            logging.getLogger(name).removeFilter(quiet)
    assert quiet.count == 4 and [r.getMessage() for r in caught] == ["something else"] * 2
    assert capsys.readouterr().err.count("have nothing to check out") == 1


def test_repro_runs_the_venvs_dvc_through_the_quiet_wrapper(monkeypatch, tmp_path):
    from pathlib import Path

    from ctxrep.repro import dvc_command

    own = Path(sys.executable).parent / "dvc"
    monkeypatch.setenv("DVC", str(own))
    assert dvc_command() == [sys.executable, "-m", "ctxrep.dvc_cli"]
    monkeypatch.delenv("DVC")
    assert dvc_command() == [sys.executable, "-m", "ctxrep.dvc_cli"]
    monkeypatch.setenv("DVC", str(tmp_path / "fake-dvc"))
    assert dvc_command() == [str(tmp_path / "fake-dvc")]


STAGE_THAT_SLEEPS = """
import os, sys, time
from pathlib import Path
from ctxrep.stage import stage

with stage("locate_data", None, track=False):  # a stage dvc.yaml defines (DVC_STAGE names it)
    Path(sys.argv[1]).write_text(str(os.getpid()))
    time.sleep(120)
    Path(sys.argv[1] + ".finished").write_text("")
"""


def wait_for(path, seconds=60):
    deadline = time.time() + seconds
    while not path.exists() and time.time() < deadline:
        time.sleep(0.05)
    assert path.exists(), f"{path} never appeared"
    time.sleep(0.3)  # the pid is written whole
    return int(path.read_text())


def test_a_signal_to_make_repro_stops_the_running_stage_before_it_exits(tmp_path):
    """Issue 61 D1-D2: `kill -TERM` on `ctxrep repro` killed DVC alone and the stage went on
    writing outputs after make had exited; `kill -INT` reached DVC alone, which ignores it while
    a stage runs. Both now reach the stage, and `ctxrep repro` returns only once it is gone."""
    import signal

    (tmp_path / "repo").mkdir()
    repo = scratch_repo(tmp_path / "repo")
    (repo / "probe.py").write_text(STAGE_THAT_SLEEPS)
    for signum in (signal.SIGTERM, signal.SIGINT):
        pid_file = tmp_path / f"stage-{signum}.pid"
        # DVC runs a stage as a child and waits for it: the fake does the same, through the
        # launcher as dvc.yaml does
        dvc = fake_dvc(tmp_path, f"{sys.executable} -m ctxrep.launch probe.py {pid_file}")
        proc = repro(repo, dvc)
        stage_pid = wait_for(pid_file)
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=90)
        assert gone(stage_pid, seconds=1), f"the stage outlived `ctxrep repro` ({signum}): {err}"
        assert "locate_data: stopped by" in err and "Traceback" not in err
        assert not (tmp_path / f"stage-{signum}.pid.finished").exists()


def test_a_stage_dies_with_the_dvc_process_that_started_it(tmp_path):
    """Issue 61 D: DVC killed with -9 (or by a signal it does not pass on) left its stage
    running; a stage started by the launcher now gets SIGTERM when its parent dies."""
    import signal

    (tmp_path / "repo").mkdir()
    repo = scratch_repo(tmp_path / "repo")
    (repo / "probe.py").write_text(STAGE_THAT_SLEEPS)
    pid_file = tmp_path / "stage.pid"
    dvc = subprocess.Popen([sys.executable, "-c", (  # as DVC runs a stage: DVC_STAGE set
        "import subprocess, sys; subprocess.run([sys.executable, '-m', 'ctxrep.launch', "
        f"'probe.py', {str(pid_file)!r}])")], cwd=repo, stderr=subprocess.PIPE, text=True,
        env={**launched_env(repo), "DVC_STAGE": "locate_data"})
    stage_pid = wait_for(pid_file)
    dvc.send_signal(signal.SIGKILL)
    dvc.wait()
    assert gone(stage_pid), "the stage outlived the DVC process that started it"
    assert not (tmp_path / "stage.pid.finished").exists()


RANK_THAT_SLEEPS = """
import os, sys, time
from pathlib import Path
from ctxrep.stage import stage

with stage("rank_probe", None, track=False):
    Path(sys.argv[1] + os.environ["RANK"]).write_text(str(os.getpid()))
    time.sleep(120)
"""


def test_torchrun_ranks_die_with_their_agent(tmp_path):
    """Issue 61 D3: `kill -9` of the torchrun agent left both ranks running, and rank 0 wrote
    outputs after make had exited. A rank now dies with its agent (its parent)."""
    import shutil
    import signal

    (tmp_path / "repo").mkdir()
    repo = scratch_repo(tmp_path / "repo")
    (repo / "probe.py").write_text(RANK_THAT_SLEEPS)
    torchrun = shutil.which("torchrun", path=os.path.dirname(sys.executable))
    pid_file = tmp_path / "rank"
    agent = subprocess.Popen([torchrun, "--standalone", "--nproc-per-node=2", "probe.py",
                              str(pid_file)], cwd=repo, env=launched_env(repo),
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        ranks = [wait_for(tmp_path / f"rank{r}", seconds=120) for r in (0, 1)]
        agent.send_signal(signal.SIGKILL)
        agent.wait()
        assert all(gone(pid) for pid in ranks), "a rank outlived its torchrun agent"
    finally:
        if agent.poll() is None:
            agent.kill()


def test_the_lock_is_left_in_dvc_yaml_order_whatever_order_dvc_wrote(tmp_path):
    """A stage dropped by one run (an empty grid) and defined again by the next comes back at
    the end of dvc.lock: the same results must still give the same dvc.lock bytes."""
    from ctxrep.repro import prune_lock

    (tmp_path / "dvc.yaml").write_text(
        "stages:\n" + "".join(f"  {name}:\n    cmd: echo {name} > {name}.txt\n"
                              f"    outs: [{name}.txt]\n" for name in "abc"))
    for cmd in (["git", "init", "-q"], [sys.executable, "-m", "dvc", "init", "-q"],
                [sys.executable, "-m", "dvc", "repro", "-q"]):
        subprocess.run(cmd, cwd=tmp_path, check=True, capture_output=True)
    lock = tmp_path / "dvc.lock"
    canonical = lock.read_bytes()
    assert prune_lock(tmp_path) == [] and lock.read_bytes() == canonical  # in order: untouched

    import yaml
    data = yaml.safe_load(canonical)
    stages = data["stages"]
    data["stages"] = {"b": stages["b"], "c": stages["c"], "gone": stages["a"], "a": stages["a"]}
    lock.write_text(yaml.safe_dump(data, sort_keys=False))
    assert prune_lock(tmp_path) == ["gone"]
    assert lock.read_bytes() == canonical


WARM_PROBE = """import os, sys
from pathlib import Path
Path(sys.argv[1]).write_text(
    f"{'torch' in sys.modules} {os.getppid()} {os.environ.get('CTXREP_WARM_DIR', '')}")
"""


def test_make_repro_forks_its_stages_from_warm_processes_of_its_own_which_end_with_it(tmp_path):
    """`ctxrep repro` runs DVC with CTXREP_WARM=1 and a socket folder of its own: a stage is
    forked from a process that has torch loaded, and after the run neither that process nor
    its folder is left. CTXREP_WARM=0 starts each stage afresh."""
    (tmp_path / "repo").mkdir()
    repo = scratch_repo(tmp_path / "repo")
    (repo / "probe.py").write_text(WARM_PROBE)
    base = {k: v for k, v in os.environ.items() if not k.startswith("CTXREP_WARM")}
    for switch, forked in ((None, True), ("0", False)):
        seen = tmp_path / f"seen-{switch}"
        dvc = fake_dvc(tmp_path, f"{sys.executable} -m ctxrep.launch probe.py {seen}; exit 3")
        env = {**base, "DVC": dvc, **({"CTXREP_WARM": switch} if switch else {})}
        proc = subprocess.run([sys.executable, "-m", "ctxrep", "repro", "tiny"], cwd=repo,
                              env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 3, proc.stderr  # DVC's status, passed on
        loaded, parent, folder = (seen.read_text().split(" ") + [""])[:3]
        assert loaded == str(forked), seen.read_text()
        if forked:
            assert folder and not os.path.exists(folder), "the run's warm folder was left"
            assert gone(int(parent), seconds=10), "the run's warm process was left"
