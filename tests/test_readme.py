"""The README and the docs pages: their DVC and MLflow snippets, run as written, and their links.

Every fenced block that follows a ``<!-- readme-test -->`` line in README.md or in a page of
docs/ (not docs/notebook/, whose dated notes are kept as written) is run, line by line for bash
and whole for Python, in a copy of the session's finished tiny pipeline run (its git repo, DVC
cache, outputs and MLflow store). The snippets name the default grid's cells
(``transfer@ud_pos-elmo``, ``ud_pos.*``); the tiny grid holds them too, and a test checks that
the default one does, so a snippet can never name a cell the default profile does not run.

The README stays short (a newcomer reads it in five minutes) and every relative link of the
README and the docs pages resolves: to a file of the repo and, with ``#anchor``, to a heading
of that file.
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


README_MAX_LINES = 250
# The README section names that code, configs and docstrings cite (README "Published weights",
# …): the README's Documentation list keeps a link with each name.
CITED_SECTIONS = ("Adding a task", "Published weights", "Profiles", "Experiments and tracking",
                  "Testing", "Results", "Known gaps", "Pipeline", "Share your results",
                  "BERT on a published checkpoint", "The biLM's pretraining recipe",
                  "BERT at 4,000 steps", "Where the CI width comes from", "The default profile")


def doc_pages() -> list[Path]:
    """README.md and every page of docs/ (the dated notes of docs/notebook/ aside)."""
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def marked_blocks(readme: Path | None = None) -> list[tuple[str, str]]:
    """(language, code) of each fenced block right after a :data:`MARKER` line: of ``readme``
    alone when given, else of every page of :func:`doc_pages`, in that order."""
    pages = [readme] if readme is not None else doc_pages()
    found = []
    for page in pages:
        found += re.findall(rf"^{re.escape(MARKER)}\n```(\w+)\n(.*?)^```", page.read_text(),
                            flags=re.M | re.S)
    return [(lang, code) for lang, code in found]


def _prose(text: str) -> str:
    """``text`` without its fenced blocks and inline code spans (links there are not links)."""
    text = re.sub(r"^(```|~~~).*?^\1[^\n]*$", "", text, flags=re.M | re.S)
    return re.sub(r"`[^`\n]*`", "", text)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation other than '-' and '_' dropped,
    spaces to '-'."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip())  # a link: its text
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every heading anchor of a Markdown page, repeated headings numbered as GitHub does."""
    seen: dict[str, int] = {}
    out = set()
    text = re.sub(r"^(```|~~~).*?^\1[^\n]*$", "", page.read_text(), flags=re.M | re.S)
    for heading in re.findall(r"^#{1,6}[ \t]+(.+?)[ \t#]*$", text, flags=re.M):
        base = slug(heading)
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def relative_links(page: Path) -> list[str]:
    """The targets of a page's ``[text](target)`` links and images, web and mail links aside."""
    link = r"\[[^\]\n]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)"  # [text](target "title")
    targets = re.findall(link, _prose(page.read_text()))
    return [t for t in targets if not re.match(r"[a-z][a-z0-9+.-]*:", t, flags=re.I)]


def test_the_readme_is_short():
    lines = (REPO / "README.md").read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines: move some to docs/"


def test_every_relative_link_of_the_readme_and_the_docs_resolves():
    broken = []
    for page in doc_pages():
        for target in relative_links(page):
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page.resolve()
            where = f"{page.relative_to(REPO)}: ({target})"
            if not dest.exists() or REPO.resolve() not in (dest, *dest.parents):
                broken.append(f"{where}: no such file in the repo")
            elif anchor and (not dest.is_file() or anchor not in anchors(dest)):
                broken.append(f"{where}: no heading with that anchor in {dest.name}")
    assert not broken, "\n".join(broken)


def test_the_anchor_rule_is_githubs():
    assert slug("The biLM's pretraining recipe: held-out perplexity per CPU-second") == (
        "the-bilms-pretraining-recipe-held-out-perplexity-per-cpu-second")
    assert slug("BERT at 4,000 steps: still on the plateau") == (
        "bert-at-4000-steps-still-on-the-plateau")
    assert slug("Compare runs (MLflow)") == "compare-runs-mlflow"
    assert slug("ctxrep — contextual word_representations") == (
        "ctxrep--contextual-word_representations")


def test_every_docs_page_has_a_title_and_a_way_back_to_the_readme():
    for page in doc_pages()[1:]:
        first, _, rest = page.read_text().partition("\n")
        assert first.startswith("# "), f"{page.name}: the first line is not a title"
        assert "](../README.md)" in rest.strip().split("\n\n")[0], (
            f"{page.name}: no link back to the README under its title")


def test_the_readme_links_every_docs_page_and_every_cited_section_name():
    readme = (REPO / "README.md").read_text()
    linked = {target.partition("#")[0] for target in relative_links(REPO / "README.md")}
    for page in doc_pages()[1:]:
        assert f"docs/{page.name}" in linked, f"README.md does not link docs/{page.name}"
    texts = re.findall(r"\[([^\]\n]*)\]\(", _prose(readme))
    for name in CITED_SECTIONS:
        assert any(t.startswith(name) for t in texts), f"no README link named {name!r}"


def test_the_readme_marks_its_dvc_and_mlflow_snippets():
    langs = [lang for lang, _ in marked_blocks()]
    assert langs.count("bash") >= 1 and langs.count("python") >= 1, langs


def test_the_snippets_name_cells_of_the_default_grid(tmp_path):
    code = "\n".join(c for _, c in marked_blocks())
    from ctxrep.config import composition

    grid = composition.compose("default", root=REPO, out=tmp_path / "params.yaml")["grid"]
    for task, method in re.findall(r"transfer@([a-z0-9_]+)-([a-z0-9-]+)", code):
        assert task in grid["tasks"] and method in grid["feature_based"], (task, method)
    for task, method in re.findall(r"finetune@([a-z0-9_]+)-([a-z0-9-]+)", code):
        assert task in grid["tasks"] and method in grid["fine_tuned"], (task, method)
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
