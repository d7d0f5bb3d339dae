"""Sharing a run (README, "Share your results"): user A runs the pipeline, commits, pushes the
git history to a team git remote and the DVC outputs to a DVC remote; user B clones, pulls, and
`dvc repro` executes nothing that computes, while `dvc metrics` and `dvc exp show` give A's
numbers. Once against a local-folder remote, once against a real S3 endpoint on localhost
(moto's server, a separate process), and once for an experiment (`dvc exp push` / `pull`).

A's run is a copy of the session's run of the whole tiny pipeline (``tiny_run``).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import copy_run, dvc

pytestmark = pytest.mark.slow
GIT_ENV = {"GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@a", "GIT_COMMITTER_NAME": "a",
           "GIT_COMMITTER_EMAIL": "a@a"}
S3_KEYS = {"access_key_id": "testing", "secret_access_key": "testing"}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, env={**os.environ, **GIT_ENV}, check=True,
                          capture_output=True, text=True).stdout.strip()


def ran(dvc_output: str) -> list[str]:
    return [line for line in dvc_output.splitlines() if line.startswith("Running stage")]


def use_remote(repo: Path, settings: dict) -> None:
    """Point this clone's default remote ``storage`` (committed in .dvc/config) elsewhere in the
    git-ignored .dvc/config.local: what `dvc remote modify --local storage <option> <value>`
    writes (the README's way), written directly to spare a DVC start-up per option."""
    lines = ['[\'remote "storage"\']'] + [f"    {k} = {v}" for k, v in settings.items()]
    (repo / ".dvc/config.local").write_text("\n".join(lines) + "\n")


def metric_values(shown: dict) -> dict:
    """{path: metrics} of the one revision in a `dvc metrics show --json` answer (metrics files
    of stages that did not run are left out)."""
    (rev,) = shown.values()
    return {path: entry["data"] for path, entry in rev["data"].items() if "data" in entry}


def flat(d: dict, prefix: str = "") -> dict:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1}``, as `dvc metrics diff --json` names nested keys."""
    out = {}
    for k, v in d.items():
        out.update(flat(v, f"{prefix}{k}.") if isinstance(v, dict) else {f"{prefix}{k}": v})
    return out


def experiments(shown: list) -> dict:
    """{name: data} of every experiment in a `dvc exp show --json` answer."""
    return {exp["name"]: exp["revs"][0]["data"]
            for row in shown for exp in row.get("experiments") or []}


@pytest.fixture(scope="module")
def team(tiny_run, tmp_path_factory, tiny_mirror):
    """A's run committed and pushed to a bare git repo (the team's git remote); returns A's
    repo, the bare repo's path, the branch and the environment stages run in."""
    a = copy_run(tiny_run.repo, tmp_path_factory.mktemp("a") / "repo")
    git(a, "add", "-A")
    git(a, "commit", "-qm", "A: the tiny pipeline")
    bare = tmp_path_factory.mktemp("git-remote") / "ctxrep.git"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
    branch = git(a, "symbolic-ref", "--short", "HEAD")
    git(a, "remote", "add", "origin", str(bare))
    git(a, "push", "-q", "origin", branch)
    return a, bare, branch, {"CTXREP_DATA_MIRROR": str(tiny_mirror)}


def clone(team, dest: Path) -> Path:
    _, bare, branch, _ = team
    subprocess.run(["git", "clone", "-q", "-b", branch, str(bare), str(dest)], check=True)
    return dest


@pytest.fixture(scope="module")
def s3_endpoint(tmp_path_factory):
    """A real S3 endpoint on localhost: `moto_server` in its own process, one bucket."""
    import boto3  # a test dependency (requirements.lock), as moto is
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = open(tmp_path_factory.mktemp("moto") / "moto.log", "w")
    server = subprocess.Popen([os.path.join(os.path.dirname(sys.executable), "moto_server"),
                               "-H", "127.0.0.1", "-p", str(port)], stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.time() > deadline or server.poll() is not None:
                    raise RuntimeError(f"moto_server did not start: {log.name}")
                time.sleep(0.2)
        boto3.client("s3", endpoint_url=url, region_name="us-east-1",
                     aws_access_key_id=S3_KEYS["access_key_id"],
                     aws_secret_access_key=S3_KEYS["secret_access_key"]
                     ).create_bucket(Bucket="ctxrep")
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()


@pytest.fixture(params=["local", "s3"])
def remote(request, tmp_path) -> dict:
    """The remote's settings: a local folder, or a bucket on the moto S3 endpoint."""
    if request.param == "local":
        return {"url": str(tmp_path / "dvc-remote")}
    endpoint = request.getfixturevalue("s3_endpoint")
    return {"url": f"s3://ctxrep/{tmp_path.name}", "endpointurl": endpoint,
            "region": "us-east-1", **S3_KEYS}


def test_b_pulls_a_run_and_reproduces_nothing(team, remote, tmp_path):
    a, _, _, env = team
    use_remote(a, remote)
    dvc(a, "push", "--run-cache")

    b = clone(team, tmp_path / "b")
    assert not (b / "data").exists()
    use_remote(b, remote)
    dvc(b, "pull")
    out = dvc(b, "repro", env=env)
    assert ran(out) == ["Running stage 'locate_data':"], out  # it always looks; nothing computes
    assert git(b, "status", "--porcelain") == "", f"B's repro changed tracked files:\n{git(b, 'diff')}"

    ours = metric_values(json.loads(dvc(b, "metrics", "show", "--json")))
    assert ours == metric_values(json.loads(dvc(a, "metrics", "show", "--json")))
    assert {"metrics/headline.json", "metrics/claims.json"} == set(ours)
    theirs = json.loads((a / "metrics/headline.json").read_text())
    new = json.loads(dvc(b, "metrics", "diff", "HEAD~1", "HEAD", "--json"))  # before A's run
    assert {k: v["new"] for k, v in new["metrics/headline.json"].items()} == flat(theirs)
    row = next(r for r in json.loads(dvc(b, "exp", "show", "--json")) if r["rev"] == "workspace")
    assert row["data"]["metrics"]["metrics/headline.json"]["data"] == theirs


def test_b_pulls_an_experiment_of_a(team, tmp_path):
    """A runs an experiment (tokenize with a larger held-out share) and pushes it (git refs to
    the git remote, outputs to the DVC remote); B pulls it and sees it, with A's params and
    metrics, in `dvc exp show`."""
    a, _, _, env = team
    remote = {"url": str(tmp_path / "dvc-remote")}
    use_remote(a, remote)
    exp_env = {**env, "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'exp-mlflow.db'}"}
    dvc(a, "exp", "run", "--temp", "-n", "a-heldout", "-S", "profile=tiny",
        "-S", "tokenize.heldout_fraction=0.3", "tokenize", env=exp_env)
    dvc(a, "exp", "push", "origin", "a-heldout")

    b = clone(team, tmp_path / "b")
    use_remote(b, remote)
    dvc(b, "exp", "pull", "origin", "a-heldout")
    exps = experiments(json.loads(dvc(b, "exp", "show", "--json")))
    assert "a-heldout" in exps, exps
    data = exps["a-heldout"]
    assert data["params"]["params.yaml"]["data"]["tokenize"]["heldout_fraction"] == 0.3
    # Its outputs come with it: applied and pulled, B has A's statistics (a plain output).
    baseline = json.loads((a / "metrics/tokenize.json").read_text())
    dvc(b, "exp", "apply", "a-heldout")
    dvc(b, "pull", "tokenize")
    shown = json.loads((b / "metrics/tokenize.json").read_text())
    assert shown["train_docs"] < baseline["train_docs"]  # a larger held-out share: A's numbers
