"""The README's DVC and MLflow snippets, run as written.

Every fenced block that follows a ``<!-- readme-test -->`` line in README.md is run, line by
line for bash and whole for Python, in a copy of the session's finished tiny pipeline run (its
git repo, DVC cache, outputs and MLflow store). The snippets name the default grid's cells
(``transfer@ud_pos-elmo``, ``ud_pos.*``); the tiny grid holds them too, and a test checks that
the default one does, so a snippet can never name a cell the default profile does not run.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, copy_run

MARKER = "<!-- readme-test -->"


def marked_blocks(readme: Path = REPO / "README.md") -> list[tuple[str, str]]:
    """(language, code) of each fenced block right after a :data:`MARKER` line."""
    found = re.findall(rf"^{re.escape(MARKER)}\n```(\w+)\n(.*?)^```", readme.read_text(),
                       flags=re.M | re.S)
    return [(lang, code) for lang, code in found]


def test_the_readme_marks_its_dvc_and_mlflow_snippets():
    langs = [lang for lang, _ in marked_blocks()]
    assert langs.count("bash") >= 1 and langs.count("python") >= 1, langs


def test_the_snippets_name_cells_of_the_default_grid(tmp_path):
    code = "\n".join(c for _, c in marked_blocks())
    from ctxrep import config

    grid = config.compose("default", root=REPO, out=tmp_path / "params.yaml")["grid"]
    for task, method in re.findall(r"transfer@([a-z0-9_]+)-([a-z0-9-]+)", code):
        assert task in grid["tasks"] and method in grid["methods"], (task, method)
    for task in re.findall(r"\b(sst2|ud_pos|conll2003|wic|sick|squad)\\?\.", code):
        assert task in grid["tasks"], task


@pytest.mark.slow
def test_the_readme_snippets_run_as_written_on_a_finished_run(tiny_run, tmp_path):
    repo = copy_run(tiny_run.repo, tmp_path / "repo")
    # `make <target>` as a user runs it, with this venv as the project's (never reinstalled)
    (repo / "Makefile").write_text((REPO / "Makefile").read_text())
    (repo / ".venv").symlink_to(Path(sys.prefix))
    bin_dir = os.path.dirname(sys.executable)
    env = {**os.environ, **tiny_run.env, "PATH": f"{bin_dir}:{os.environ['PATH']}",
           "MLFLOW_TRACKING_URI": f"sqlite:///{repo / 'mlflow.db'}", "PAGER": "cat"}
    for lang, code in marked_blocks():
        if lang == "python":
            proc = subprocess.run([sys.executable, "-c", code], cwd=repo, env=env,
                                  capture_output=True, text=True, timeout=300)
            assert proc.returncode == 0, f"{code}\n{proc.stdout}\n{proc.stderr}"
            assert proc.stdout.strip(), f"the snippet printed nothing:\n{code}"
            continue
        assert lang == "bash", lang
        for line in code.splitlines():
            command = line.split("  #")[0].strip()
            if not command:
                continue
            if command.startswith("make "):
                command = command.replace("make ", "make -o .venv/.installed ", 1)
            proc = subprocess.run(["bash", "-c", command], cwd=repo, env=env,
                                  capture_output=True, text=True, timeout=300)
            assert proc.returncode == 0, f"{command}\n{proc.stdout}\n{proc.stderr}"
