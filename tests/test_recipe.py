"""README "Adding a task", performed as written, in a scratch copy of the repo.

Five tasks the project has never seen, one of each kind, in published layouts: CoLA
(classification, published as one file per label with no split, as MR's rt-polarity is: the
reader assigns the split by a hash of the text), MRPC (pair classification, a TSV with a header
row behind a UTF-8 byte-order mark and CRLF line ends), a chunking task (tagging, one document a
file in a ``word/TAG`` format no reader handles yet, read through a glob of many files and split
by file name, so the test writes the reader), STS-B (regression, float scores), and TREC
(question classification, published as train/test only: it keeps its test file as ``test``, and
its labels are drawn apart from the text, 1 in 24 not the majority, so every classifier predicts
one class: the claim ``elmo`` − ``static`` on it compares two degenerate cells and its row must
say so). For each the test does what the README says a user does: put the files under the
mirror, add a registry entry (and the reader), ``ctxrep pin``, ``ctxrep fixture``, add the task
to ``tasks:`` and ``grid.tasks`` in ``conf/config.yaml``; then it runs the stages the new cells
need on the tiny profile (fetch, extract, baselines, transfer with one method and one seed,
report) and reads the report.

The word vectors are the session's tiny run's (``tiny_run``); the stages run
as `dvc exp run` runs them (``python stages/<stage>.py``), with the scratch copy's own package.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import (REPO, compose, copy_run, dvc, made_once, make_sentence, run_stage,
                            scratch_repo, src_env, tree_hash)

# outputs and DVC, not MLflow: stages run without MLflow runs (tests/conftest.py)
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("without_mlflow")]

NEW_TASKS = ("cola", "mrpc", "chunk", "stsb", "trec")
DEGENERATE_TASK = "trec"  # also the one published as train/test
REPO_TESTS = Path(__file__).resolve().parent

# Step 2 of the recipe: each task's module, src/ctxrep/data/tasks/<task>.py, as the README shows.
HEAD = '''from ctxrep.data import readers as R
from ctxrep.data import schemas as S
from ctxrep.data.registry import DatasetSpec, HubSource, one_file_per_split

SHA256 = {}  # `ctxrep pin <task>` writes the pins here
'''
MODULES = {
    "cola": HEAD + '''
import hashlib

from ctxrep.data.readers import read_lines
from ctxrep.text.segment import word_tokenize

LABELS = ["unacceptable", "acceptable"]


def held_out(text):
    """A fixed rule of the example itself (never a draw of the run): 1 in 4 to validation."""
    return hashlib.sha256(text.encode()).digest()[0] % 4 == 0


def one_file_per_label(paths, stats, opts):
    """``unacceptable.txt`` and ``acceptable.txt`` (the ``mirror`` order: label ids), one
    sentence a line, no split: each sentence goes to its split by a hash of its text."""
    def split(wanted):
        for label, path in enumerate(paths):
            for _, line in read_lines(path, stats):
                if line.strip() and held_out(line) == (wanted == "validation"):
                    yield {"text": " ".join(word_tokenize(line)), "label": label}
    return {"train": split("train"), "validation": split("validation")}


SPEC = DatasetSpec(
    name="cola", kind="classification", features=S.classification(LABELS),
    mirror=("tasks/cola/unacceptable.txt", "tasks/cola/acceptable.txt"),
    read_mirror=one_file_per_label,
    hub=HubSource("nyu-mll/glue", "cola", splits={"train": "train", "validation": "validation"},
                  columns={"text": "sentence", "label": "label"}),
    metrics=("matthews_correlation", "accuracy"), description="CoLA acceptability",
    sha256=SHA256)
''',
    "mrpc": HEAD + '''
SPEC = DatasetSpec(
    name="mrpc", kind="pair_classification",
    features=S.classification(["not_paraphrase", "paraphrase"], pair=True),
    mirror=("tasks/mrpc/msr_paraphrase_train.txt", "tasks/mrpc/msr_paraphrase_test.txt"),
    read_mirror=one_file_per_split({"train": 0, "validation": 1}, lambda p, s: R.tsv_pair(
        p, s, "#1 String", "#2 String", "Quality", ["0", "1"], tokenize=True)),
    metrics=("accuracy", "binary_f1"), description="MRPC paraphrase", sha256=SHA256)
''',
    # A format no shared reader handles: its reader lives in the task's own module.
    "chunk": HEAD + '''from ctxrep.data.readers import DataError, read_lines

TAGS = ["O", "B-NP", "I-NP", "B-VP", "I-VP"]


def slash_tagged(path, stats):
    """One sentence a line, ``word/TAG`` tokens separated by spaces."""
    for n, line in read_lines(path, stats):
        if not line.strip():
            continue
        tokens, ids = [], []
        for item in line.split():
            word, slash, tag = item.rpartition("/")
            if not slash or tag not in TAGS:
                raise DataError(path, f"{item!r} is not WORD/TAG with a TAG in {TAGS}", n)
            tokens.append(word)
            ids.append(TAGS.index(tag))
        yield {"tokens": tokens, "tags": ids}


def by_file_name(paths, stats, opts):
    """One document a file, ``wsj_NNNN.txt`` (the glob's matches, sorted by path): the files
    numbered 0 mod 4 are the validation split, the others train."""
    def split(wanted):
        for path in paths:
            if (int(path.stem.rpartition("_")[2]) % 4 == 0) == (wanted == "validation"):
                yield from slash_tagged(path, stats)
    return {"train": split("train"), "validation": split("validation")}


SPEC = DatasetSpec(
    name="chunk", kind="tagging", features=S.tagging(TAGS),
    mirror=("tasks/chunk/wsj_*.txt",),
    read_mirror=by_file_name,
    metrics=("seqeval_f1", "token_accuracy"), description="NP/VP chunking", sha256=SHA256)
''',
    "stsb": HEAD + '''
SPEC = DatasetSpec(
    name="stsb", kind="regression", features=S.regression(),
    mirror=("tasks/stsb/train.tsv", "tasks/stsb/dev.tsv"),
    read_mirror=one_file_per_split({"train": 0, "validation": 1}, lambda p, s: R.tsv_pair_score(
        p, s, "sentence1", "sentence2", "score", tokenize=True)),
    metrics=("pearson_spearman",), description="STS-B similarity", sha256=SHA256)
''',
    # Published as train/test only (TREC's train_5500.label, TREC_10.label): test stays `test`.
    "trec": HEAD + '''from ctxrep.data.readers import DataError, read_lines
from ctxrep.text.segment import word_tokenize

COARSE = ["ABBR", "DESC", "ENTY", "HUM", "LOC", "NUM"]


def coarse_fine_labelled(path, stats):
    """One question a line: ``COARSE:fine question words``."""
    for n, line in read_lines(path, stats):
        label, _, text = line.partition(" ")
        coarse = label.split(":")[0]
        if coarse not in COARSE:
            raise DataError(path, f"{label!r}: the coarse label is not one of {COARSE}", n)
        yield {"text": " ".join(word_tokenize(text)), "label": COARSE.index(coarse)}


SPEC = DatasetSpec(
    name="trec", kind="classification", features=S.classification(COARSE),
    mirror=("tasks/trec/train_5500.label", "tasks/trec/TREC_10.label"),
    read_mirror=one_file_per_split({"train": 0, "test": 1}, coarse_fine_labelled),
    metrics=("accuracy", "macro_f1"), description="TREC question type (evaluated on its test set)",
    sha256=SHA256)
''',
}


def add_modules(repo: Path, names=NEW_TASKS) -> None:
    """Step 2: one module per task (the only file of the package a new task adds)."""
    for name in names:
        (repo / f"src/ctxrep/data/tasks/{name}.py").write_text(
            f'"""Task ``{name}``."""\n\n' + MODULES[name])


def publish(mirror, seed: int = 0) -> None:
    """Step 1: the four tasks' files in their published layouts, under the mirror."""
    rng = random.Random(seed)

    def write(rel, text, bom=False, crlf=False):
        path = mirror / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        data = text.replace("\n", "\r\n") if crlf else text
        path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + data.encode())

    per_label = {0: [], 1: []}
    chunk_docs = []
    for name, n in (("train", 48), ("dev", 24)):
        sentences = [make_sentence(rng) for _ in range(n)]
        for s in sentences:
            per_label[int(s.endswith("."))].append(s)
        write(f"tasks/stsb/{name}.tsv", "index\tgenre\tfilename\tyear\told_index\tsource1\t"
              "source2\tsentence1\tsentence2\tscore\n" + "".join(
                  f"{i}\tmain-captions\tMSRvid\t2012test\t{i}\tnone\tnone\t{a}\t{b}\t"
                  f"{5.0 * len(set(a.split()) & set(b.split())) / len(set(a.split())):.3f}\n"
                  for i, (a, b) in enumerate(zip(sentences, sentences[1:] + sentences[:1]))))
        chunks = []
        for s in sentences:
            words = s.rstrip(".!").split()
            tags = ["B-NP", "I-NP", "I-NP", "B-VP", "B-NP", "I-NP"] + ["O", "B-NP", "I-NP", "I-NP"]
            chunks.append(" ".join(f"{w}/{t}" for w, t in zip(words, tags)))
        chunk_docs += chunks
        seconds = [b if rng.random() < 0.5 else a
                   for a, b in zip(sentences, sentences[1:] + sentences[:1])]
        mrpc = "".join(f"{int(a == b)}\t{i}\t{i + 1}\t{a}\t{b}\n"
                       for i, (a, b) in enumerate(zip(sentences, seconds)))
        write(f"tasks/mrpc/msr_paraphrase_{'train' if name == 'train' else 'test'}.txt",
              "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n" + mrpc, bom=True, crlf=True)
        labels = ["HUM:ind" if i % 24 == 5 else "DESC:manner" for i in range(n)]
        write(f"tasks/trec/{'train_5500' if name == 'train' else 'TREC_10'}.label", "".join(
            f"{label} {s}\n" for label, s in zip(labels, sentences)))
    for label, name in enumerate(("unacceptable", "acceptable")):  # one file per label
        write(f"tasks/cola/{name}.txt", "".join(f"{s}\n" for s in per_label[label]))
    for i in range(0, len(chunk_docs), 3):  # a glob of many files: three sentences a document
        write(f"tasks/chunk/wsj_{i // 3:04d}.txt", "\n".join(chunk_docs[i:i + 3]) + "\n")


def add_to_config(repo, names=NEW_TASKS, grids=()) -> None:
    """Step 5: each task in ``tasks:`` (fetched) and ``grid.tasks`` (transferred) of
    conf/config.yaml, in the ``tasks:`` of every profile that sets its own, and in the
    ``grid.tasks`` of the profiles ``grids`` (those that set their own grid and should run it)."""
    conf = repo / "conf/config.yaml"
    text = conf.read_text()
    text = text.replace("\ntasks:\n", "\ntasks:\n" + "".join(f"- {t}\n" for t in names), 1)
    text = text.replace("\ngrid:\n  tasks:\n",
                        "\ngrid:\n  tasks:\n" + "".join(f"  - {t}\n" for t in names), 1)
    conf.write_text(text)
    for profile in sorted((repo / "conf/profile").glob("*.yaml")):  # `grep -l '^tasks:'`
        text = profile.read_text()
        if re.search(r"^tasks: \[", text, re.M):
            text = re.sub(r"^tasks: \[", "tasks: [" + ", ".join(names) + ", ", text, count=1,
                          flags=re.M)
        if profile.stem in grids:
            text = re.sub(r"^grid:\n  tasks: \[", "grid:\n  tasks: [" + ", ".join(names) + ", ",
                          text, count=1, flags=re.M)
        profile.write_text(text)


def ctxrep(repo, commands: list[list[str]], env) -> str:
    """``ctxrep <args>`` for each of ``commands``, in one process (one start-up, not eight)."""
    driver = ("import sys\nfrom ctxrep.cli import main\n"
              f"for args in {commands!r}:\n"
              "    try:\n        main(args)\n    except SystemExit as e:\n"
              "        if e.code:\n            sys.exit(f'ctxrep {args}: exit {e.code}')\n")
    proc = subprocess.run([sys.executable, "-c", driver], cwd=repo, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def follow_recipe(root: Path, tiny_mirror: Path, tiny_run) -> None:
    """Steps 1 to 6 in a scratch copy at ``root/repo``, with the mirror at ``root/mirror``;
    the default profile's grid after step 5 goes to ``root/default_grid.json``."""
    mirror = root / "mirror"
    shutil.copytree(tiny_mirror, mirror)
    publish(mirror)
    (root / "repo").mkdir()
    repo = scratch_repo(root / "repo", "tiny", copy_src=True)
    add_modules(repo)
    env = recipe_env(root)
    out = ctxrep(repo, [[step, task] for task in NEW_TASKS for step in ("pin", "fixture")],
                 env={**os.environ, **env})                   # steps 3 and 4
    # a pin module per task; a fixture file per published file (the glob's 24 included)
    published = sum(1 for task in NEW_TASKS for p in (mirror / "tasks" / task).rglob("*")
                    if p.is_file())
    assert out.count("ctxrep pin: wrote") == len(NEW_TASKS)
    assert out.count("ctxrep fixture: wrote") == published, out
    add_to_config(repo)
    (root / "default_grid.json").write_text(json.dumps(compose(repo, "default")["grid"]["tasks"]))
    # The default profile's params are valid with the new tasks (it sets its own `tasks:`):
    # checked by the copy's own code, as `make repro` would before DVC starts.
    check = subprocess.run([sys.executable, "-m", "ctxrep", "check-params", "default"], cwd=repo,
                           env={**os.environ, **env}, capture_output=True, text=True, timeout=300)
    assert check.returncode == 0, check.stderr
    # Step 6, on the tiny profile; the cost kept down with -S: only the new cells, `static`
    # everywhere and `elmo` on the degenerate task (a claim to judge there), two seeds, and the
    # pins checked (scratch repos turn the check off).
    compose(repo, "tiny", [f"grid.tasks=[{','.join(NEW_TASKS)}]", "grid.feature_based=[static,elmo]",
                           "grid.fine_tuned=[]",
                           "learning_curve.tasks=[]",  # its elmo curve needs extracted features
                           "transfer.common.seeds=[0,1]", "data.verify_sha256=true"])
    # `static` reads the word vectors (x_k), `elmo` the biLM's features beside them
    for model in ("static", "bilm"):
        shutil.copytree(tiny_run.repo / f"data/models/{model}", repo / f"data/models/{model}")
    run_stage(repo, "locate_data.py", env=env)
    for task in NEW_TASKS:
        run_stage(repo, "fetch_task.py", task, env=env)
    run_stage(repo, "extract.py", "bilm", env=env)
    for task in NEW_TASKS:
        run_stage(repo, "baseline.py", task, env=env)
        run_stage(repo, "transfer.py", task, "static", env=env)
    run_stage(repo, "transfer.py", DEGENERATE_TASK, "elmo", env=env)
    run_stage(repo, "report.py", env=env)


def recipe_env(root: Path) -> dict:
    """What the scratch copy's commands run with: its own package, the recipe's mirror."""
    return {**src_env(root / "repo"), "CTXREP_DATA_MIRROR": str(root / "mirror")}


@pytest.fixture(scope="module")
def recipe(tmp_path_factory, tiny_mirror, tiny_run):
    """The recipe followed once per session (made_once: one xdist worker follows it, another
    that needs it waits), read back for each test."""
    root = made_once(tmp_path_factory, "recipe",
                     lambda root: follow_recipe(root, tiny_mirror, tiny_run))
    repo = root / "repo"
    return {"repo": repo, "env": {**os.environ, **recipe_env(root)},
            "default_grid": json.loads((root / "default_grid.json").read_text()),
            "report": (repo / "reports/report.md").read_text()}


def own_session(env: dict) -> dict:
    """``env`` for a pytest session of its own (not taken for one of this session's workers)."""
    return {k: v for k, v in env.items() if not k.startswith("PYTEST_XDIST")}


def section(markdown: str, title: str) -> str:
    rest = markdown[markdown.index(title + "\n"):]
    end = re.search(r"\n#{1,3} ", rest[len(title):])
    return rest[:len(title) + end.start()] if end else rest


def test_conf_edit_puts_the_new_tasks_in_the_default_grid(recipe):
    assert set(NEW_TASKS) <= set(recipe["default_grid"])


@pytest.mark.parametrize("task, primary, others", [
    ("cola", "matthews_correlation", ["accuracy"]), ("mrpc", "accuracy", ["binary_f1"]),
    ("chunk", "f1", ["token_accuracy"]), ("stsb", "pearson", ["spearman"]),
    ("trec", "accuracy", ["macro_f1"])])
def test_the_report_shows_each_new_task_with_its_metrics_and_baselines(recipe, task, primary,
                                                                       others):
    table = section(recipe["report"], f"### {task} ({primary})")
    static = next(line for line in table.splitlines() if line.startswith("| static |"))
    assert re.search(r"\| static \| -?[\d.]+ ± [\d.]+ \| 2 \| \[-?[\d.]+, -?[\d.]+\] \|", static)
    assert all(f"{name} " in static for name in others), static
    assert "| baseline: majority |" in table or "| baseline: mean |" in table
    assert "| baseline: tfidf-lr |" in table or "| baseline: lookup |" in table \
        or "| baseline: tfidf-ridge |" in table


@pytest.mark.parametrize("task", NEW_TASKS)
def test_the_new_tasks_come_out_tokenized_and_the_static_vectors_know_their_words(recipe, task):
    """Step 2's rule: readers yield tokenized text. The published sentences are raw (``noun.``),
    so the readers tokenize them (``tokenize=True``); a reader that did not would leave the
    `static` cell without vectors for every sentence-final word."""
    import datasets

    from ctxrep.text.segment import word_tokenize

    repo = recipe["repo"]
    train = datasets.load_from_disk(str(repo / f"data/raw/tasks/{task}/dataset"))["train"]
    for field in ("text", "text_pair"):
        if field in train.column_names:
            assert all(t == " ".join(word_tokenize(t)) for t in train[field]), field
    record = json.loads((repo / f"metrics/transfer/{task}/static.json").read_text())
    assert record["word_vector_oov_rate"] < 0.05, record["word_vector_oov_rate"]


def test_each_published_layout_is_read_as_its_reader_says(recipe):
    """Issue 62: the two layouts a shared reader does not handle, read by the readers the test
    wrote. CoLA, one file per label and no split: every line of both files is read once, with
    its file's label, in the split its hash gives (so both labels in both splits). Chunking,
    a glob of 24 files: all 24 read (sorted), the files numbered 0 mod 4 as validation."""
    import hashlib

    import datasets

    from ctxrep.text.segment import word_tokenize

    def held_out(text):  # the CoLA reader's rule, above
        return hashlib.sha256(text.encode()).digest()[0] % 4 == 0

    repo, mirror = recipe["repo"], Path(recipe["env"]["CTXREP_DATA_MIRROR"])
    cola = datasets.load_from_disk(str(repo / "data/raw/tasks/cola/dataset"))
    lines = {label: [line for line in (mirror / f"tasks/cola/{name}.txt").read_text().splitlines()
                     if line.strip()]
             for label, name in enumerate(("unacceptable", "acceptable"))}
    for split in ("train", "validation"):
        want = sorted((label, " ".join(word_tokenize(line))) for label, rows in lines.items()
                      for line in rows if held_out(line) == (split == "validation"))
        assert sorted(zip(cola[split]["label"], cola[split]["text"])) == want, split
        assert set(cola[split]["label"]) == {0, 1}, split
    files = sorted((mirror / "tasks/chunk").glob("wsj_*.txt"))
    manifest = json.loads((repo / "data/raw/tasks/chunk/MANIFEST.json").read_text())
    assert len(files) == 24 and sorted(manifest["files"]) == [
        f"tasks/chunk/{f.name}" for f in files]
    chunk = datasets.load_from_disk(str(repo / "data/raw/tasks/chunk/dataset"))
    for split in ("train", "validation"):
        want = [line.split() for f in files if (int(f.stem[-4:]) % 4 == 0) == (split == "validation")
                for line in f.read_text().splitlines() if line.strip()]
        assert chunk[split]["tokens"] == [[item.rpartition("/")[0] for item in line]
                                          for line in want], split


def test_a_task_published_as_train_test_is_evaluated_on_its_test_split(recipe):
    """Issue 48: no renaming. TREC's test file stays `test`; with `eval_split` at its default
    (`validation`), a task that has no validation split is evaluated on its test split, and
    its records and the report say which."""
    repo = recipe["repo"]
    for path in (f"metrics/transfer/{DEGENERATE_TASK}/static.json",
                 f"metrics/baselines/{DEGENERATE_TASK}.json"):
        assert json.loads((repo / path).read_text())["eval_split"] == "test", path
    assert json.loads((repo / "metrics/transfer/cola/static.json").read_text())[
        "eval_split"] == "validation"
    table = section(recipe["report"], f"### {DEGENERATE_TASK} (accuracy)")
    assert "Evaluated on the task's `test` split." in table
    assert "Evaluated on" not in section(recipe["report"], "### cola (matthews_correlation)")


def test_a_claim_over_degenerate_cells_says_so_in_its_row(recipe):
    """Issue 48: every seed of both cells predicts one class, so whatever the CI says the claim
    compares two trivial predictors; its row in the claims table must say so."""
    table = section(recipe["report"], f"### {DEGENERATE_TASK} (accuracy)")
    for method in ("static", "elmo"):
        row = next(line for line in table.splitlines() if line.startswith(f"| {method} |"))
        assert "⚠ degenerate" in row, row
    claims = section(recipe["report"], "## The papers' claims, judged")
    row = next(line for line in claims.splitlines()
               if f"| {DEGENERATE_TASK} | elmo − static |" in line)
    assert "both cells degenerate (every seed): it compares trivial predictors" in row, row


def test_the_data_section_shows_the_new_tasks_pinned_and_checked(recipe):
    data = section(recipe["report"], "## Data and models")
    for task in NEW_TASKS:
        assert re.search(rf"\| {task} \| available \| mirror \| .* \| pinned, checked \|", data)


def test_the_fixtures_cut_by_ctxrep_fixture_serve_the_fixture_mirror_test(recipe):
    """`test_every_task_reads_from_fixture_mirror`, run in the scratch copy: every task, the
    new ones included, reads from the fixture mirror that conftest builds."""
    repo = recipe["repo"]
    shutil.copytree(REPO_TESTS, repo / "tests", ignore=shutil.ignore_patterns("__pycache__"),
                    dirs_exist_ok=True)
    assert (repo / "tests/fixtures/mirror/tasks/mrpc/msr_paraphrase_train.txt").exists()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "tests/test_sources.py::test_every_task_reads_from_fixture_mirror"],
                          cwd=repo, env=own_session(recipe["env"]), capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr



def add_family(repo: Path, name: str, like: str = "gpt") -> None:
    """A left-to-right family as docs/models.md says a user adds one: a module of
    ctxrep.families and its conf keys, ``like``'s with the name changed."""
    module = (repo / f"src/ctxrep/families/{like}.py").read_text()
    (repo / f"src/ctxrep/families/{name}.py").write_text(module.replace(f'"{like}"', f'"{name}"'))
    conf = repo / "conf/config.yaml"
    text = conf.read_text()
    for block in (re.search(rf"^pretrain_{like}:\n(?:  .*\n)+", text, re.M).group(0),
                  re.search(rf"^  {like}-feature: .*\n", text, re.M).group(0),
                  re.search(rf"^  {like}-finetune: .*\n(?:    .*\n)+", text, re.M).group(0)):
        copy = re.sub(rf"(?<![a-z]){like}(?=[-:])|(?<=pretrain_){like}\b", name, block)
        text = text.replace(block, block + copy, 1)
    conf.write_text(text)


def test_adding_a_task_to_a_finished_run_reruns_only_what_reads_it(tiny_run, tiny_mirror,
                                                                   tmp_path):
    """Issue 29: steps 1, 2 and 5 of the recipe for one task (CoLA) in a copy of the finished
    tiny run. DVC then finds stale only the new task's stages and the ones that read every
    grid task (extract, probe, report; locate_data runs every time): no other fetch, no
    pretraining, no other task's baseline or cell. Extract, rerun for one feature set, writes
    the other tasks' features to the same bytes, so their cells stay up to date.

    Issue 59, first: a left-to-right family added the same way (its module and conf keys, not
    listed in ``left_to_right``) leaves every stage up to date but ``code``, which finds every
    manifest unchanged."""
    repo = copy_run(tiny_run.repo, tmp_path / "run")
    (repo / "src/ctxrep").unlink()  # the package as a copy of the same bytes, to add a module to
    shutil.copytree(REPO / "src/ctxrep", repo / "src/ctxrep",
                    ignore=shutil.ignore_patterns("__pycache__"))
    manifests = {p.name: p.read_bytes() for p in (repo / "data/code").iterdir()}
    add_family(repo, "gpt2")
    with_family = compose(repo, "tiny")                                # as `dvc exp run` would
    assert with_family["pretrain_gpt2"] == with_family["pretrain_gpt"]
    assert with_family["transfer"]["gpt2-finetune"]["bert"] == "pretrain_gpt2"
    stale = set(json.loads(dvc(repo, "status", "--json", env=src_env(repo))))
    assert stale == {"code", "locate_data"}, sorted(stale)
    mirror = tmp_path / "mirror"
    shutil.copytree(tiny_mirror, mirror)
    publish(mirror)                                                    # step 1
    add_modules(repo, ["cola"])                                        # step 2
    add_to_config(repo, ["cola"], grids=["tiny"])                      # step 5
    params = compose(repo, "tiny")                                     # as `dvc exp run` would
    assert "cola" in params["grid"]["tasks"]
    env = {**src_env(repo), "CTXREP_DATA_MIRROR": str(mirror)}

    # What DVC would rerun: the new task's stages (those whose inputs do not exist yet it lists
    # once they do) and the ones that read every grid task; nothing else (`code` reads the new
    # module and finds every stage script's manifest unchanged).
    reads_it = {"code", "locate_data", "fetch_tasks@cola", "baseline@cola", "report",
                *(f"extract@{f}" for f in ("bilm", "bert", "bilm-random", "bert-random")),
                *(f"probe@{m}" for m in ("bilm", "bert")),
                *(f"transfer@cola-{m}" for m in params["grid"]["feature_based"]),
                *(f"finetune@cola-{m}" for m in params["grid"]["fine_tuned"])}
    stale = set(json.loads(dvc(repo, "status", "--json", env=env)))
    assert {"locate_data", "fetch_tasks@cola", "extract@bilm", "report"} <= stale <= reads_it, \
        sorted(stale)

    features = repo / "data/features/bilm-random"
    before = {task: tree_hash(features / task) for task in ("sst2", "ud_pos")}
    ran = dvc(repo, "repro", "extract@bilm-random", env=env)
    assert re.findall(r"Running stage '([^']+)'", ran) == [
        "code", "locate_data", "fetch_tasks@cola", "extract@bilm-random"], ran
    assert {task: tree_hash(features / task) for task in before} == before
    assert {p.name: p.read_bytes() for p in (repo / "data/code").iterdir()} == manifests
    assert (features / "cola/meta.json").exists()
    stale_after = set(json.loads(dvc(repo, "status", "--json", env=env)))
    assert "baseline@cola" in stale_after  # its input exists now
    assert stale_after <= reads_it - {"fetch_tasks@cola", "extract@bilm-random"}, \
        sorted(stale_after)
