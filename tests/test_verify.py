"""A byte flipped in an output after its stage wrote it (mtime kept, so `dvc status` is fooled)
is caught: by `ctxrep verify`, and by the downstream stage before it reads the file. A corrupt
DVC cache object (which `dvc checkout`, `dvc pull` and `dvc checkout --relink` all pass over) is
mended by `ctxrep verify --repair`, shown on a toy DVC repo of one stage (seconds, no models)."""

import hashlib
import os
import shutil
import subprocess
import sys

import pytest

from tests.conftest import copy_run


def run(repo, *cmd, env):
    full = {**os.environ, "PATH": f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}",
            "MLFLOW_TRACKING_URI": f"sqlite:///{repo / 'mlflow.db'}", **env}
    return subprocess.run(list(cmd), cwd=repo, env=full, capture_output=True, text=True,
                          timeout=900)


def flip_a_byte_keeping_mtime(path):
    stat = path.stat()
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


@pytest.mark.slow
def test_tampered_output_is_refused(tiny_run, tmp_path):
    repo = copy_run(tiny_run.repo, tmp_path / "repo")
    env = tiny_run.env
    # DVC records each file's size and mtime when it hashes it (its state): let it see them
    # here, as it would have when the stage wrote them
    assert run(repo, "dvc", "status", env=env).returncode == 0
    ok = run(repo, "ctxrep", "verify", env=env)
    assert ok.returncode == 0 and "every output matches" in ok.stdout

    victim = sorted((repo / "data/tokenized").rglob("*.arrow"))[0]
    flip_a_byte_keeping_mtime(victim)
    status = run(repo, "dvc", "status", "tokenize", env=env)
    assert "changed outs" not in status.stdout  # DVC trusts the size and mtime it saw
    bad = run(repo, "ctxrep", "verify", env=env)
    rel = victim.relative_to(repo).as_posix()
    assert bad.returncode == 1 and f"{rel}: md5" in bad.stdout

    # the next stage that reads it (forced: DVC's status is fooled, so it would run nothing)
    proc = run(repo, "dvc", "repro", "--force", "--single-item", "pretrain_bilm", env=env)
    assert proc.returncode != 0
    log = proc.stdout + proc.stderr
    assert f"{rel}: md5" in log and "differ from what dvc.lock records" in log
    assert "Traceback" not in log
    assert not (repo / "data/models/bilm").exists()


# --- a toy DVC repo: one stage writing a file and a folder; a local-folder remote -------------

MAKE = """\
from pathlib import Path
Path("out.txt").write_text("hello world\\n" * 10)
Path("outdir").mkdir(exist_ok=True)
Path("outdir/a.txt").write_text("alpha\\n")
Path("outdir/b.txt").write_text("beta\\n" * 5)
"""
GOOD = {"out.txt": "hello world\n" * 10, "outdir/a.txt": "alpha\n", "outdir/b.txt": "beta\n" * 5}


def sh(repo, *cmd, check=True):
    bin_dir = os.path.dirname(sys.executable)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "DVC_NO_ANALYTICS": "1",
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    proc = subprocess.run(list(cmd), cwd=repo, env=env, capture_output=True, text=True,
                          timeout=120)
    assert not check or proc.returncode == 0, f"{cmd} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc


@pytest.fixture(scope="module")
def toy_template(tmp_path_factory):
    root = tmp_path_factory.mktemp("toy")
    repo = root / "repo"
    repo.mkdir()
    sh(repo, "git", "init", "-q")
    sh(repo, "dvc", "init", "-q")
    sh(repo, "dvc", "config", "core.analytics", "false")
    sh(repo, "dvc", "remote", "add", "-d", "storage", "../remote")  # the folder beside repo/
    (repo / "make.py").write_text(MAKE)
    (repo / "dvc.yaml").write_text("stages:\n  make:\n    cmd: python make.py\n"
                                   "    deps: [make.py]\n    outs: [out.txt, outdir]\n")
    sh(repo, "dvc", "repro", "-q")
    sh(repo, "dvc", "push", "-q")
    return root


@pytest.fixture
def toy(toy_template, tmp_path):
    shutil.copytree(toy_template, tmp_path / "toy", symlinks=True)
    return tmp_path / "toy" / "repo"


def obj(repo, md5):
    return repo / ".dvc/cache/files/md5" / md5[:2] / md5[2:]


def md5_of(text):
    return hashlib.md5(text.encode()).hexdigest()


def flip_a_byte(path):
    """Silent corruption (bit rot, a stray write): the mode is kept. DVC rehashes a cache object
    only when it is writable; the read-only ones it made it trusts."""
    mode = path.stat().st_mode
    os.chmod(path, 0o644)
    data = bytearray(path.read_bytes())
    data[3] ^= 0x01
    path.write_bytes(bytes(data))
    os.chmod(path, mode)


def corrupt_cache_and_check_out(repo):
    """The fault: cache objects of out.txt and outdir/b.txt corrupted, then checked out (DVC
    never rehashes its cache, so the workspace gets the corrupt bytes, exit 0)."""
    bad = [obj(repo, md5_of(GOOD["out.txt"])), obj(repo, md5_of(GOOD["outdir/b.txt"]))]
    for path in bad:
        flip_a_byte(path)
    shutil.rmtree(repo / "outdir")
    (repo / "out.txt").unlink()
    sh(repo, "dvc", "checkout")
    assert (repo / "out.txt").read_text() != GOOD["out.txt"]
    return bad


def assert_all_good(repo):
    for rel, text in GOOD.items():
        assert (repo / rel).read_text() == text, rel
    for path in (repo / ".dvc/cache/files/md5").rglob("*"):
        if path.is_file():
            name = path.parent.name + path.name
            assert hashlib.md5(path.read_bytes()).hexdigest() == name.removesuffix(".dir"), path
    ok = sh(repo, "ctxrep", "verify")
    assert "every output matches dvc.lock" in ok.stdout


@pytest.mark.slow  # a toy `dvc repro` (seconds); `make test-fast` skips pipelines
def test_a_corrupt_cache_object_passes_dvc_and_verify_names_the_repair(toy):
    corrupt_cache_and_check_out(toy)
    pulled = sh(toy, "dvc", "pull")  # DVC sees the objects present: nothing to do
    assert (toy / "out.txt").read_text() != GOOD["out.txt"]
    sh(toy, "dvc", "checkout", "--relink")  # re-links the corrupt objects
    assert (toy / "outdir/b.txt").read_text() != GOOD["outdir/b.txt"], pulled.stdout
    bad = sh(toy, "ctxrep", "verify", check=False)
    assert bad.returncode == 1
    assert f"out.txt: md5 {md5_of((toy / 'out.txt').read_text())}" in bad.stdout
    assert "outdir/b.txt: md5" in bad.stdout and "outdir/a.txt" not in bad.stdout
    assert "`ctxrep verify --repair`" in bad.stdout


@pytest.mark.slow
def test_repair_restores_corrupt_cache_objects_and_the_workspace_from_the_remote(toy):
    bad = corrupt_cache_and_check_out(toy)
    proc = sh(toy, "ctxrep", "verify", "--repair", check=False)
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    for path in bad:
        assert f"removed {path.relative_to(toy)}" in out
    assert "dvc pull out.txt outdir (remote 'storage'" in out
    assert "out.txt: restored from remote 'storage'" in out
    assert "outdir: restored from remote 'storage'" in out
    assert_all_good(toy)
    assert "up to date" in sh(toy, "dvc", "status").stdout


@pytest.mark.slow
@pytest.mark.parametrize("victim", [".git", "mlflow.db", "notes.txt"])
def test_repair_never_removes_what_dvc_yaml_does_not_declare(toy, victim):
    """A dvc.lock edited to name the repository, MLflow's store or a user's file as an output
    with a wrong md5: repair leaves it alone and says why (it used to delete it, .git too)."""
    import yaml

    if victim != ".git":
        (toy / victim).write_text("keep me")
    before = sorted(p.relative_to(toy) for p in (toy / victim).rglob("*")) \
        if (toy / victim).is_dir() else (toy / victim).read_text()
    lock = yaml.safe_load((toy / "dvc.lock").read_text())
    stage = next(iter(lock["stages"].values()))
    stage["outs"].append({"path": victim, "md5": "0" * 32, "size": 1})
    (toy / "dvc.lock").write_text(yaml.safe_dump(lock))
    proc = sh(toy, "ctxrep", "verify", "--repair", check=False)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"dvc.lock names {victim}:" in proc.stdout and "left alone" in proc.stdout
    assert "Traceback" not in proc.stderr
    after = sorted(p.relative_to(toy) for p in (toy / victim).rglob("*")) \
        if (toy / victim).is_dir() else (toy / victim).read_text()
    assert after == before


@pytest.mark.slow
def test_repair_of_a_workspace_only_change_restores_it_from_the_cache(toy):
    """A byte flipped in the workspace (mtime kept), the cache intact: no remote needed."""
    sh(toy, "dvc", "remote", "remove", "storage")
    victim = toy / "outdir/a.txt"
    stat = victim.stat()
    flip_a_byte(victim)
    os.utime(victim, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    proc = sh(toy, "ctxrep", "verify", "--repair", check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "outdir: restored from the DVC cache" in proc.stdout
    assert "dvc pull" not in proc.stdout
    assert_all_good(toy)


@pytest.mark.slow
@pytest.mark.parametrize("remote", ["none configured", "lacks the objects"])
def test_repair_that_cannot_restore_names_what_is_lost_and_the_stage_to_rerun(toy, remote):
    if remote == "none configured":
        sh(toy, "dvc", "remote", "remove", "storage")
    else:
        shutil.rmtree(toy.parent / "remote")
    corrupt_cache_and_check_out(toy)
    proc = sh(toy, "ctxrep", "verify", "--repair", check=False)
    out = proc.stdout
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    why = ("no default DVC remote is configured" if remote == "none configured" else
           "remote 'storage' (")
    for rel, output in (("out.txt", "out.txt"), ("outdir/b.txt", "outdir")):
        line = next(ln for ln in out.splitlines() if ln.startswith(f"{output}: LOST"))
        assert f"{rel} (md5 {md5_of(GOOD[rel])})" in line and why in line
        assert "`dvc repro make` recomputes it" in line
    assert "recompute them with `dvc repro make`" in out
    # the corrupt objects are gone, so DVC now sees the outputs missing and reruns the stage
    assert not obj(toy, md5_of(GOOD["out.txt"])).exists()
    sh(toy, "dvc", "repro", "make")
    assert_all_good(toy)


@pytest.mark.parametrize("lock", ["stages: [unclosed\n", "- a\n- b\n",
                                  "stages:\n  make:\n    outs: notalist\n",
                                  "stages:\n  make:\n    outs:\n    - md5: abc\n"])
def test_a_garbage_dvc_lock_is_a_one_line_error_naming_it(tmp_path, lock):
    (tmp_path / "dvc.lock").write_text(lock)
    for args in ((), ("--repair",)):
        proc = sh(tmp_path, "ctxrep", "verify", *args, check=False)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"ctxrep verify: {tmp_path / 'dvc.lock'}: ")
        assert "restore it with `git checkout dvc.lock`" in lines[0]


def test_a_stage_that_reads_part_of_a_folder_output_checks_that_part(toy, monkeypatch):
    """A dependency inside another stage's folder output (a transfer cell's task folder in
    data/features/<set>/, a fetch's data/sources/<task>.json) is checked against the folder's
    dvc.lock listing, and only that part: damage elsewhere in the folder is not its concern."""
    from ctxrep.errors import InputError
    from ctxrep.lockfile import verify_stage_inputs

    with open(toy / "dvc.yaml", "a") as f:
        f.write("  read:\n    cmd: cat outdir/a.txt\n    deps: [outdir/a.txt]\n")
    monkeypatch.setenv("DVC_STAGE", "read")
    assert verify_stage_inputs("read", toy) == 1
    for rel in ("outdir/b.txt", "outdir/a.txt"):
        os.chmod(toy / rel, 0o644)
        (toy / rel).write_text("tampered\n")
        if rel == "outdir/b.txt":
            assert verify_stage_inputs("read", toy) == 1  # not an input of this stage
    with pytest.raises(InputError, match=r"outdir/a\.txt: md5"):
        verify_stage_inputs("read", toy)


@pytest.mark.parametrize("lock", ["missing", "empty"])
def test_verify_without_a_recorded_run_fails_in_a_pipeline_checkout(tmp_path, lock, capsys):
    """A checkout with a dvc.yaml and no (or an empty) dvc.lock has no run to check: exit 1,
    not a reassuring 0; a folder with no pipeline has nothing to check."""
    from ctxrep.verify import run_verify

    (tmp_path / "dvc.yaml").write_text("stages: {}\n")
    if lock == "empty":
        (tmp_path / "dvc.lock").write_text("")
    assert run_verify(tmp_path, no_run_fails=True) == 1
    assert "no run to check" in capsys.readouterr().out
    (tmp_path / "dvc.yaml").unlink()
    assert run_verify(tmp_path, no_run_fails=True) == 0
