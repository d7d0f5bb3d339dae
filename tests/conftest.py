"""Shared fixtures: a tiny data mirror in the published formats, scratch copies of the repo, and
one finished run of the whole tiny pipeline for every test that needs one.

The suite runs on pytest-xdist workers (`make test`: three). What is made once per session (the
mirror, the tiny run) lives in the folder the workers share, built under a file lock by
whichever worker asks first. The tiny run starts in the background as soon as the session
holds a test that needs it, and the tests that do not need it run first, beside it."""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import random
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FIXTURE_MIRROR = REPO / "tests" / "fixtures" / "mirror"  # written by `ctxrep fixture <task>`

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# One compute thread per process, here and in every stage a test starts: the suite runs two
# workers beside the background tiny run (and their stages) on two cores, and torch's default
# of a thread per core then oversubscribes them; OpenMP threads that spin-wait for a core turn a
# 1 s test into 40 s. Before torch is imported: it reads these once.
for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

_NOUNS = ["river", "bank", "money", "music", "game", "player", "city", "history", "war", "king",
          "science", "theory", "field", "language", "word", "film", "team", "school", "church"]
_VERBS = ["plays", "holds", "describes", "builds", "follows", "opens", "leads", "takes", "runs"]
_ADJS = ["old", "new", "large", "small", "early", "famous", "local", "national", "modern"]


def cell_data(kind: str, metric, splits: dict, train_idx: list[int], dev_idx: list[int],
              patience: int = 0, method: str = "", eval_split: str = "validation"):
    """What a cell's seeds train on (:class:`ctxrep.transfer.data.CellData`), for a fixture."""
    from ctxrep.transfer.data import CellData

    return CellData("fixture", method, kind, metric, splits, eval_split, train_idx, dev_idx,
                    patience)


def make_sentence(rng: random.Random) -> str:
    words = ["The", rng.choice(_ADJS), rng.choice(_NOUNS), rng.choice(_VERBS), "a",
             rng.choice(_NOUNS)]
    if rng.random() < 0.5:
        words += ["near", "the", rng.choice(_ADJS), rng.choice(_NOUNS)]
    return " ".join(words) + rng.choice([".", ".", "!"])


def write_wiki_shard(path: Path, docs: list[tuple[str, str, list[str]]]) -> None:
    lines = []
    for doc_id, title, paragraphs in docs:
        lines.append(f'<doc id="{doc_id}" url="http://x/?curid={doc_id}" title="{title}">')
        lines += [title, ""] + paragraphs + ["</doc>"]
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


def build_mirror(root: Path, n_docs: int = 80, seed: int = 0) -> Path:
    rng = random.Random(seed)
    wiki = root / "corpus/wikipedia-en"
    wiki.mkdir(parents=True)
    docs = []
    for d in range(n_docs):
        paragraphs = [" ".join(make_sentence(rng) for _ in range(rng.randint(2, 6)))
                      for _ in range(rng.randint(1, 4))]
        docs.append((str(100 + d), f"Article {d}", paragraphs))
    write_wiki_shard(wiki / "wiki_000.txt.gz", docs[: n_docs // 2])
    write_wiki_shard(wiki / "wiki_001.txt.gz", docs[n_docs // 2:])

    wt = root / "corpus/wikitext-2"
    wt.mkdir(parents=True)
    for split in ("train", "valid", "test"):
        (wt / f"wiki.{split}.tokens").write_text(
            " \n = Title One = \n \n The first article . \n = Title Two = \n Second one . \n")

    sst = root / "tasks/sst"
    sst.mkdir(parents=True)
    for kind, n_labels in (("binary", 2), ("fine", 5)):
        for split in ("train", "dev", "test"):
            (sst / f"stsa.{kind}.{split}").write_text("".join(
                f"{i % n_labels} {make_sentence(rng).lower()}\n" for i in range(12)))

    conll = root / "tasks/conll2003"
    conll.mkdir(parents=True)
    for split in ("train", "dev", "test"):
        # three copies: a tiny training split still spares a dev split for model selection
        (conll / f"{split}.txt").write_text("-DOCSTART- -X- -X- O\n\n" + 3 * (
            "EU NNP B-NP B-ORG\nrejects VBZ B-VP O\n"
            "German JJ B-NP B-MISC\n. . O O\n\nPeter NNP B-NP B-PER\nBlackburn NNP I-NP I-PER\n\n"))

    ud = root / "tasks/ud_ewt"
    ud.mkdir(parents=True)
    for split in ("train", "dev", "test"):
        (ud / f"en_ewt-ud-{split}.conllu").write_text("".join(  # several: room for a dev split
            f"# sent_id = {k}\n# text = I don't know.\n"
            "1\tI\tI\tPRON\tPRP\t_\t3\tnsubj\t_\t_\n"
            "2-3\tdon't\t_\t_\t_\t_\t_\t_\t_\t_\n"
            "2\tdo\tdo\tAUX\tVBP\t_\t4\taux\t_\t_\n"
            "3\tn't\tnot\tPART\tRB\t_\t4\tadvmod\t_\t_\n"
            "4\tknow\tknow\tVERB\tVB\t_\t0\troot\t_\t_\n"
            "5\t.\t.\tPUNCT\t.\t_\t4\tpunct\t_\t_\n\n" for k in range(1, 5)))

    for split in ("train", "dev", "test"):
        wic = root / "tasks/wic" / split
        wic.mkdir(parents=True)
        (wic / f"{split}.data.txt").write_text(
            "carry\tV\t2-1\tYou must carry your gear .\tSound carries well .\n"
            "bank\tN\t3-1\tWe sat on the bank .\tThe bank closed .\n")
        (wic / f"{split}.gold.txt").write_text("F\nT\n")

    sick = root / "tasks/sick"
    sick.mkdir(parents=True)
    header = "pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\n"
    body = "".join(f"{i}\tA man plays .\tA person plays .\t4.{i}\t{j}\n"
                   for i, j in enumerate(["ENTAILMENT", "NEUTRAL", "CONTRADICTION"]))
    for name in ("SICK_train.txt", "SICK_trial.txt", "SICK_test_annotated.txt"):
        (sick / name).write_text(header + body)

    squad = root / "tasks/squad"
    squad.mkdir(parents=True)
    articles = []
    for a in range(5):
        context = f"Article {a} says the river bank opened in {1900 + a}."
        articles.append({"title": f"T{a}", "paragraphs": [{"context": context, "qas": [
            {"id": f"q{a}", "question": "When did it open?",
             "answers": [{"text": str(1900 + a), "answer_start": context.index(str(1900 + a))}]}]}]})
    (squad / "dev-v1.1.json").write_text(json.dumps({"data": articles, "version": "1.1"}))
    # Fixtures of tasks added later, cut from their mirror files by `ctxrep fixture <task>`.
    if FIXTURE_MIRROR.is_dir():
        shutil.copytree(FIXTURE_MIRROR, root, dirs_exist_ok=True)
    return root


def session_folder(tmp_path_factory) -> Path:
    """The folder shared by every xdist worker of this session (the controller's basetemp),
    or this process's basetemp when pytest runs without workers."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def made_once(tmp_path_factory, name: str, make) -> Path:
    """``make(folder)`` run once per session whatever the number of workers: the first to ask
    makes ``<session folder>/<name>``, the others wait on the lock and reuse it."""
    from filelock import FileLock

    folder = session_folder(tmp_path_factory) / name
    done = folder.with_name(name + ".done")
    with FileLock(str(folder) + ".lock"):
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            make(folder)
            done.touch()
    return folder


@pytest.fixture(scope="session")
def tiny_mirror(tmp_path_factory) -> Path:
    """The fixture mirror, one path for the whole session: runs that compare data sources
    (``data/sources/`` records the mirror's location) agree across workers."""
    return made_once(tmp_path_factory, "mirror", build_mirror)


@pytest.fixture
def mirror_env(tiny_mirror, monkeypatch) -> Path:
    monkeypatch.setenv("CTXREP_DATA_MIRROR", str(tiny_mirror))
    return tiny_mirror


def tree_hash(root: Path) -> str:
    """sha256 over every file's relative path and bytes: equal trees, equal hashes."""
    import hashlib

    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(root)).encode())
            h.update(p.read_bytes())
    return h.hexdigest()


def scratch_repo(dest: Path, profile: str = "default", overrides: list[str] = (),
                 copy_src: bool = False) -> Path:
    """A git repo holding the project's pipeline files (not data), for running real stages,
    with params.yaml composed for ``profile`` (+ Hydra ``overrides``) as `dvc exp run` would.
    ``src/ctxrep`` links to the project's package, or is a copy to edit (``copy_src``: stages
    then need ``PYTHONPATH=<dest>/src``, see :func:`src_env`)."""
    for name in ("dvc.yaml", ".dvcignore", ".gitignore"):
        shutil.copy2(REPO / name, dest / name)
    for name in ("stages", "conf", ".dvc"):
        shutil.copytree(REPO / name, dest / name, ignore=shutil.ignore_patterns(
            "tmp", "cache", "__pycache__", "config.local"))
    conf = dest / "conf/config.yaml"  # the fixture mirror is not the published data
    conf.write_text(conf.read_text().replace("verify_sha256: true", "verify_sha256: false"))
    compose(dest, profile, overrides)
    # dvc.yaml's code deps point into src/: link the installed package source.
    (dest / "src").mkdir()
    if copy_src:
        shutil.copytree(REPO / "src" / "ctxrep", dest / "src" / "ctxrep",
                        ignore=shutil.ignore_patterns("__pycache__"))
    else:
        os.symlink(REPO / "src" / "ctxrep", dest / "src" / "ctxrep")
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "init"]):
        subprocess.run(cmd, cwd=dest, check=True, env=env)
    return dest


def link_published(dest: Path) -> None:
    """``dest/published``: hard links to what `make` unpacked from the package index (the
    folder the published-minilm profile imports), as a clone's own `make` would put there."""
    if not (REPO / "published").is_dir():
        raise RuntimeError(f"{REPO / 'published'} is missing: run the suite with `make test` "
                           f"(it installs and unpacks the published checkpoints)")
    shutil.copytree(REPO / "published", dest / "published", copy_function=os.link)


def src_env(repo: Path) -> dict:
    """Environment for running ``repo``'s own copy of the package (``scratch_repo(copy_src=True)``)."""
    return {"PYTHONPATH": str(repo / "src")}


def compose(repo: Path, profile: str, overrides: list[str] = ()) -> dict:
    """params.yaml of ``repo`` composed as ``dvc exp run -S profile=<p> -S <override>...``."""
    from ctxrep.config import composition

    return composition.compose(profile, list(overrides), root=repo)


# How dvc.yaml starts a stage: under its `compute` params' instruction set and threads.
LAUNCH = (sys.executable, "-m", "ctxrep.launch")


def params_for_this_process(dest: Path) -> Path:
    """The project's params.yaml at ``dest``, its ``compute`` what this test process runs with
    (one thread, the CPU's own kernels): for stage code run inside the test process, where
    torch is loaded already and no launcher set its environment."""
    import yaml

    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["compute"] = {"isa": "native", "threads": int(os.environ["OMP_NUM_THREADS"])}
    (dest / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    return dest / "params.yaml"


def launched_env(repo: Path) -> dict:
    """The environment `python -m ctxrep.launch` gives a stage of ``repo`` (its params.yaml's
    ``compute``), for a test that starts stage code some other way (``python -c``)."""
    import yaml

    from ctxrep.compute import environment

    c = yaml.safe_load((repo / "params.yaml").read_text())["compute"]
    return {**os.environ, **environment(c["isa"], c["threads"])}


def run_stage(repo: Path, script: str, *args: str, env: dict | None = None,
              check: bool = True) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{repo / 'mlflow.db'}",
                **(env or {})}
    proc = subprocess.run([*LAUNCH, f"stages/{script}", *args], cwd=repo, env=full_env,
                          capture_output=True, text=True, timeout=600)
    if check and proc.returncode != 0:
        raise AssertionError(f"{script} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def set_profile(repo: Path, profile: str, overrides: list[str] = ()) -> None:
    compose(repo, profile, overrides)


def gone(pid: int, seconds: float = 30) -> bool:
    """``pid`` has exited (or is a zombie no one has reaped yet) within ``seconds``."""
    import time

    import psutil

    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.1)
    return False


def kill_stage_when(repo: Path, script: str, args: list[str], condition, env: dict | None = None,
                    timeout: float = 300) -> bool:
    """Run ``stages/<script>``; SIGKILL it as soon as ``condition()`` holds. True if killed."""
    import signal
    import time

    # The stage itself, not a launcher whose warm fork (ctxrep.warm) would die a moment later:
    # what a test asserts is the state that a kill at that instant leaves.
    full_env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{repo / 'mlflow.db'}",
                "CTXREP_WARM": "0", **(env or {})}
    proc = subprocess.Popen([*LAUNCH, f"stages/{script}", *args], cwd=repo, env=full_env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + timeout
    while time.time() < deadline and proc.poll() is None:
        if condition():
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            return True
        time.sleep(0.005)
    proc.wait()
    return False


# The environment of a stage run without MLflow runs (``CTXREP_MLFLOW=0``): for tests whose
# assertions are about outputs, DVC and errors (MLflow's import and store cost 2.5 to 3 s of CPU
# in every stage process); tests/test_tracking.py checks the outputs are the same either way.
NO_MLFLOW = {"CTXREP_MLFLOW": "0"}


@pytest.fixture(scope="module")
def without_mlflow():
    """Stages run with ``CTXREP_MLFLOW=0`` in this module: no MLflow runs (a few seconds less
    per stage). For modules whose assertions are about outputs, DVC and errors; the tiny run and
    the MLflow tests keep it on (``tests/test_tracking.py`` checks that the outputs are the
    same either way)."""
    with pytest.MonkeyPatch.context() as mp:
        for key, value in NO_MLFLOW.items():
            mp.setenv(key, value)
        yield


def dvc(repo: Path, *args: str, env: dict | None = None, timeout: float = 900) -> str:
    """``dvc <args>`` in ``repo`` with this venv's tools on PATH and ``repo``'s own MLflow store;
    fails the test on a non-zero exit. Returns stdout."""
    bin_dir = os.path.dirname(sys.executable)
    full = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{repo / 'mlflow.db'}",
            "PATH": f"{bin_dir}:{os.environ['PATH']}", **(env or {})}
    proc = subprocess.run([os.path.join(bin_dir, "dvc"), *args], cwd=repo, env=full,
                          capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"dvc {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


TINY_RUN_TIMEOUT_S = 45 * 60
TINY_RUN_FOLDER = "tiny-run"  # in the session folder (made_once)


def build_tiny_run(folder: Path, mirror: Path) -> None:
    """Run the whole tiny pipeline in ``folder/repo`` as `make repro PROFILE=tiny` runs it
    (`dvc exp run -S profile=tiny`), each stage tracing what it read into ``folder/trace``;
    ``folder/status`` says ``ok`` or ``failed`` when it ends, ``folder/log`` has DVC's output.
    Started in the background by :func:`_tiny_run_in_background`."""
    (folder / "repo").mkdir()
    (folder / "trace").mkdir()
    status = "failed"
    try:
        repo = scratch_repo(folder / "repo", "tiny")
        env = {"CTXREP_DATA_MIRROR": str(mirror), "CTXREP_PARAMS_TRACE": str(folder / "trace"),
               "CTXREP_MLFLOW": "1",  # the MLflow tests read this run's store
               "PYTHONHASHSEED": "1"}  # test_static_vectors_… reruns a stage with another salt
        (folder / "log").write_text(dvc(repo, "exp", "run", "-S", "profile=tiny", env=env,
                                        timeout=TINY_RUN_TIMEOUT_S))
        status = "ok"
    except AssertionError as failed:  # dvc() puts DVC's output in the message
        (folder / "log").write_text(str(failed))
    finally:
        (folder / "status.tmp").write_text(status)
        (folder / "status.tmp").rename(folder / "status")


@pytest.fixture(scope="session", autouse=True)
def _tiny_run_in_background(request, tmp_path_factory, tiny_mirror) -> Path | None:
    """Start the tiny pipeline (:func:`build_tiny_run`) in a process of its own, once per
    session, if any test of the session needs it; the tests that do not need it run meanwhile
    (see :func:`pytest_collection_modifyitems`). Returns the run's folder, or None."""
    if not any("tiny_run" in item.fixturenames for item in request.session.items):
        return None
    folder = made_once(tmp_path_factory, TINY_RUN_FOLDER,
                       lambda folder: start_tiny_run(folder, tiny_mirror))
    # The run is the session's critical path (the tests that need it wait for it): the test
    # processes step back (a lower priority, which needs no privilege) and fill the idle CPU.
    os.nice(10)
    return folder


def start_tiny_run(folder: Path, mirror: Path) -> None:
    """:func:`build_tiny_run` into ``folder`` in a process of its own, its pid in ``folder/pid``."""
    code = ("import sys; from pathlib import Path; from tests.conftest import build_tiny_run;"
            " build_tiny_run(Path(sys.argv[1]), Path(sys.argv[2]))")
    with open(folder / "builder.log", "w") as out:
        proc = subprocess.Popen([sys.executable, "-c", code, str(folder), str(mirror)],
                                cwd=REPO, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)  # its own group: DVC and stages too
    (folder / "pid").write_text(str(proc.pid))


@pytest.hookimpl(trylast=True)  # after -m / -k have deselected
def pytest_collection_modifyitems(items):
    """The order that keeps both cores busy to the end (the suite is bound by CPU):

    1. the tests that do not need the tiny run, while it is being made, the slow ones (the
       pipeline runs) first;
    2. then, of those that need it, the first that needs the recipe (tests/test_recipe.py, made
       once from the tiny run: one worker follows it while the others go on), the other slow
       ones, the quick ones (reads of the finished run: they fill the end evenly), and last
       the other recipe tests, which by then find the recipe made. Sorted by file, the recipe
       came at the end: two workers waited on it for half a minute each while the third made
       it (docs/notebook/2026-12-07-hf-finetune.md)."""
    needs_recipe = [item for item in items if "recipe" in item.fixturenames]
    first_recipe = needs_recipe[0] if needs_recipe else None

    def order(item) -> tuple[bool, int]:
        slow = item.get_closest_marker("slow") is not None
        if "tiny_run" not in item.fixturenames:
            return False, 0 if slow else 1
        if item is first_recipe:
            return True, 0
        return True, 3 if "recipe" in item.fixturenames else 1 if slow else 2

    items.sort(key=order)  # stable: the order is kept within each group


def pytest_configure(config):
    """Stages forked from warm processes (ctxrep.warm; `make test` sets CTXREP_WARM=1): one
    folder of them for the session, its workers and the tiny run, made here by the controller
    (before it starts its workers, which inherit the environment) and ended with the session."""
    from ctxrep import warm

    if not hasattr(config, "workerinput"):
        config._ctxrep_warm_folder = warm.own_folder(os.environ)


def pytest_sessionfinish(session, exitstatus):
    """No tiny run outlives its session (-x, Ctrl-C, an internal error): when the session ends
    in the process that owns the shared folder (the xdist controller, or pytest without
    workers), a run still going is stopped, DVC and its stage included; so are the session's
    warm processes."""
    import signal

    if hasattr(session.config, "workerinput"):  # an xdist worker: another may still wait on it
        return
    folder = session.config._tmp_path_factory.getbasetemp() / TINY_RUN_FOLDER
    if (folder / "pid").exists() and not (folder / "status").exists():
        with contextlib.suppress(ProcessLookupError):
            os.killpg(int((folder / "pid").read_text()), signal.SIGKILL)
    from ctxrep import warm

    warm.close(getattr(session.config, "_ctxrep_warm_folder", None))


@dataclass(frozen=True)
class TinyRun:
    """A finished run of the whole tiny pipeline (see :func:`tiny_run`)."""
    repo: Path    # the scratch repo: git, DVC cache, every output, mlflow.db
    trace: Path   # per stage, the params keys (<stage>.json) and files (.files.json) it read
    env: dict     # what its stages ran with: the fixture mirror


@pytest.fixture(scope="session")
def tiny_run(_tiny_run_in_background, tiny_mirror) -> TinyRun:
    """The whole tiny pipeline, run once per session as `make repro PROFILE=tiny` runs it
    (`dvc exp run -S profile=tiny`) on the fixture mirror, each stage tracing what it read.

    Shared by every test that needs a finished run: those that only read it use ``repo`` as it
    is; any test that runs a command in it, kills or corrupts a stage, works on
    :func:`copy_run` of it, so every test sees the same pristine run whatever the order."""
    import time

    import psutil

    folder = _tiny_run_in_background
    status, pid = folder / "status", int((folder / "pid").read_text())

    def builder_alive() -> bool:
        try:
            return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False

    deadline = time.time() + TINY_RUN_TIMEOUT_S + 60
    while not status.exists():
        if not builder_alive() and not status.exists():
            pytest.fail("the process making the tiny run died:\n"
                        + (folder / "builder.log").read_text()[-5000:])
        if time.time() > deadline:
            pytest.fail(f"the tiny run in {folder} did not finish in time")
        time.sleep(1)
    if status.read_text() != "ok":
        log = folder / "log"
        pytest.fail(f"the tiny run failed; the end of {log}:\n" + log.read_text()[-5000:])
    return TinyRun(folder / "repo", folder / "trace", {"CTXREP_DATA_MIRROR": str(tiny_mirror)})


def copy_run(repo: Path, dest: Path) -> Path:
    """A private copy of a finished run (git, outputs, params, MLflow store; ``src/ctxrep`` stays
    a link), to run commands in. Outputs are real copies (a test may corrupt one); the DVC cache
    is hard-linked (DVC never rewrites a cache file, it only adds new ones). DVC's own temporary
    state (.dvc/tmp) is left out, as in a fresh checkout."""
    def ignore(folder, names):
        return ["tmp", "cache"] if Path(folder) == repo / ".dvc" else []

    shutil.copytree(repo, dest, symlinks=True, ignore=ignore)
    if (repo / ".dvc/cache").is_dir():
        subprocess.run(["cp", "-al", str(repo / ".dvc/cache"), str(dest / ".dvc/cache")],
                       check=True)
    if (dest / "mlflow.db").exists():
        _move_mlflow_store(dest / "mlflow.db", repo, dest)
    return dest


def _move_mlflow_store(db: Path, old: Path, new: Path) -> None:
    """The MLflow store names its artifact folders by absolute path (the experiment's artifact
    root, each run's, each model version's): point every one at the copy, so that a stage run
    in the copy logs its artifacts there and never into the original run."""
    import sqlite3

    with sqlite3.connect(db) as con:
        tables = [t for (t,) in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        for table in tables:
            for column in con.execute(f'PRAGMA table_info("{table}")').fetchall():
                name, kind = column[1], column[2].upper()
                if "CHAR" in kind or "TEXT" in kind:
                    con.execute(f'UPDATE "{table}" SET "{name}" = replace("{name}", ?, ?) '
                                f'WHERE instr("{name}", ?) > 0', (str(old), str(new), str(old)))
