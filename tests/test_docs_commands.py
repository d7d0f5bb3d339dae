"""Every command of the README and the docs pages, checked without running a pipeline.

Every fenced shell block (```bash, ```sh, ```shell, ```console) of README.md and of the pages of
docs/ (not docs/notebook/, whose dated notes are kept as written) is read command by command,
and each command is checked for what can be known without running it:

- ``make <target>``: the target is one of the Makefile's; ``PROFILE=`` names a profile and
  ``SET='k=v …'`` composes with it to valid params;
- ``dvc exp run -S k=v …``: the overrides compose with their profile (``-S profile=<p>``, else
  ``default``) to valid params, and a stage named as a target is one of dvc.yaml's;
- the params are checked by the project's own validation, as ``ctxrep check-params`` does
  (:func:`ctxrep.config.composition.compose`, :func:`ctxrep.config.params.read_params`,
  :func:`ctxrep.preflight.preflight`), called in this process: with this machine's limits lifted
  (a GPU, 64 cores), since a page may describe another machine;
- ``ctxrep <subcommand> …``: the subcommand exists and its own argparse parser accepts the
  arguments (every ``--flag`` exists, required ones are given);
- every repository path a command names (a relative path under a top-level entry of the repo)
  exists in git, or is an output that dvc.yaml declares, or is made earlier in the same block
  (``mkdir``, the destination of an import);
- ``git add params.yaml`` after a run of another profile than ``default``: the committed
  ``params.yaml`` is the default profile's (``tests/test_config.py``).

A block that is deliberately illustrative (placeholders, another machine's paths) carries
``<!-- illustrative -->`` on the line right before its fence, and is skipped and counted.
At the last count: 23 blocks checked, 0 illustrative (:data:`EXPECTED_BLOCKS`).
"""

from __future__ import annotations

import argparse
import re
import shlex
import subprocess
import tempfile
from functools import lru_cache
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO

ILLUSTRATIVE = "<!-- illustrative -->"
SHELL_LANGS = ("bash", "sh", "shell", "console")
# The fenced shell blocks of README.md and docs/*.md: checked, and marked illustrative. A block
# added or removed changes these; update them with the page.
EXPECTED_BLOCKS = {"checked": 23, "illustrative": 0}
# DVC's commands that take a subcommand (`dvc metrics show`: neither word is a path).
DVC_GROUPS = {"exp", "metrics", "plots", "params", "remote", "cache", "queue", "config", "stage",
              "data", "experiments"}
# Tokens that end one simple command and start the next.
SEPARATORS = {"&&", "||", ";", "|", "&"}


def doc_pages() -> list[Path]:
    """README.md and every page of docs/ (the dated notes of docs/notebook/ aside)."""
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def shell_blocks() -> list[tuple[str, str, bool]]:
    """(``page:line``, code, illustrative) of every fenced shell block of :func:`doc_pages`."""
    blocks = []
    for page in doc_pages():
        lines = page.read_text().splitlines()
        i = 0
        while i < len(lines):
            fence = re.match(r"^\s*(```+|~~~+)\s*([\w-]*)", lines[i])
            if not fence:
                i += 1
                continue
            end = i + 1
            while end < len(lines) and not lines[end].strip().startswith(fence.group(1)):
                end += 1
            if fence.group(2) in SHELL_LANGS:
                code = "\n".join(lines[i + 1:end])
                if fence.group(2) == "console":  # the commands only, without their output
                    code = "\n".join(line.lstrip()[2:] for line in lines[i + 1:end]
                                     if line.lstrip().startswith("$ "))
                marked = i > 0 and lines[i - 1].strip() == ILLUSTRATIVE
                blocks.append((f"{page.relative_to(REPO)}:{i + 1}", code, marked))
            i = end + 1
    return blocks


def commands(code: str) -> list[list[str]]:
    """The simple commands of a shell block, as argument lists: continuation lines joined,
    comments dropped, ``&&`` / ``;`` / ``|`` split, ``NAME=value`` prefixes dropped (and
    remembered, as a ``NAME=value`` line is), ``$NAME`` expanded from them and from a ``for``
    loop's first value, ``do`` / ``done`` dropped."""
    env: dict[str, str] = {}
    out = []
    for line in code.replace("\\\n", " ").splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        current: list[str] = []
        for token in [*lexer, ";"]:
            if token not in SEPARATORS:
                current.append(token)
                continue
            if current and current[0] == "for" and len(current) >= 4 and current[2] == "in":
                env[current[1]] = current[3]
                current = []
            while current and current[0] in ("do", "done", "then", "fi"):
                current = current[1:]
            assignments = 0
            while assignments < len(current) and re.match(r"^[A-Za-z_]\w*=", current[assignments]):
                name, _, value = current[assignments].partition("=")
                env[name] = value
                assignments += 1
            words = [re.sub(r"\$\{?(\w+)\}?", lambda m: env.get(m.group(1), m.group(0)), w)
                     for w in current[assignments:]]
            if words:
                out.append(words)
            current = []
    return out


# -- what the repository has -----------------------------------------------------------------

@lru_cache(maxsize=1)
def make_targets() -> set[str]:
    text = (REPO / "Makefile").read_text()
    return set(re.findall(r"^([A-Za-z0-9_.-]+)\s*:(?!=)", text, flags=re.M))


@lru_cache(maxsize=1)
def dvc_yaml() -> dict:
    return yaml.safe_load((REPO / "dvc.yaml").read_text())


def _outputs(node) -> list[str]:
    """Every path under an ``outs``, ``metrics`` or ``plots`` key anywhere in ``node``."""
    found = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("outs", "metrics", "plots") and isinstance(value, list):
                found += [o if isinstance(o, str) else next(iter(o)) for o in value]
            else:
                found += _outputs(value)
    elif isinstance(node, list):
        for value in node:
            found += _outputs(value)
    return found


@lru_cache(maxsize=1)
def dvc_outputs() -> list[list[re.Pattern]]:
    """dvc.yaml's declared outputs, each a list of one pattern per path component (a ``${…}``
    of a foreach/matrix stands for any text within its component)."""
    return [[re.compile(".*".join(re.escape(p) for p in re.split(r"\$\{[^}]*\}", part)))
             for part in out.rstrip("/").split("/")] for out in _outputs(dvc_yaml()["stages"])]


@lru_cache(maxsize=1)
def git_files() -> tuple[frozenset[str], frozenset[str]]:
    """The files git tracks, and their folders."""
    listing = subprocess.run(["git", "ls-files"],
                             cwd=REPO, capture_output=True, text=True, check=True).stdout
    files = frozenset(listing.splitlines())
    folders = frozenset(str(p) for f in files for p in Path(f).parents if str(p) != ".")
    return files, folders


@lru_cache(maxsize=1)
def top_level() -> frozenset[str]:
    """The first component of every repository path and every declared output."""
    files, _ = git_files()
    names = {f.split("/")[0] for f in files}
    names |= {out[0].pattern for out in dvc_outputs()}
    return frozenset(names)


def repo_path(word: str) -> str | None:
    """``word`` as a repository path, or None when it names none (an option, a URL, a path
    outside the repo, a ``key=value``, a placeholder)."""
    word = word.split("=", 1)[1] if word.startswith("--") and "=" in word else word
    if (not word or word.startswith(("-", "/", "~", "..", "$", "<")) or "://" in word
            or "=" in word or any(c in word for c in "*?[]{}<>")):
        return None
    word = word.removeprefix("./").rstrip("/")
    return word if word.split("/")[0] in top_level() else None


def path_problem(path: str, made: set[str]) -> str | None:
    files, folders = git_files()
    if path in files or path in folders:
        return None
    if any(path == m or path.startswith(m + "/") for m in made):
        return None
    parts = path.split("/")
    for out in dvc_outputs():  # the output, a file inside it, or a folder that holds it
        n = min(len(parts), len(out))
        if all(p.fullmatch(part) for p, part in zip(out[:n], parts[:n])):
            return None
    return f"{path}: not in the repository, not an output of dvc.yaml, not made by the block"


# -- params, through the project's own validation ----------------------------------------------

@lru_cache(maxsize=None)
def params_problem(profile: str, overrides: tuple[str, ...],
                   made: frozenset[str] = frozenset()) -> str | None:
    """Why ``profile`` with ``overrides`` does not compose to valid params, or None: what
    ``ctxrep check-params`` checks, called in this process. Published weights the block itself
    provides first (``made``) are not refused as missing (the checks after that one are then
    not reached)."""
    from ctxrep.config import ParamError
    from ctxrep.config.composition import compose
    from ctxrep.config.params import read_params
    from ctxrep.preflight import preflight

    try:
        with tempfile.TemporaryDirectory() as tmp:
            composed = compose(profile, list(overrides), root=REPO, out=Path(tmp) / "params.yaml")
            read_params(tmp)
        # this machine's limits lifted: a page may describe a GPU or a larger machine
        preflight(composed, env={}, cores=64, gpu=True)
    except ParamError as err:
        if err.key.endswith(".path") and str(err.value).rstrip("/") in made:
            return None
        return f"profile {profile!r} with {list(overrides)}: {str(err).splitlines()[0]}"
    except Exception as err:  # noqa: BLE001 — ParamError, or Hydra's refusal of a key
        return f"profile {profile!r} with {list(overrides)}: {str(err).splitlines()[0]}"
    return None


def overrides_problem(profile: str | None, overrides: list[str],
                      made: set[str] = frozenset()) -> str | None:
    rest = [o for o in overrides if not o.startswith("profile=")]
    named = [o.split("=", 1)[1] for o in overrides if o.startswith("profile=")]
    return params_problem(named[-1] if named else profile or "default", tuple(rest),
                          frozenset(made))


# -- one command -------------------------------------------------------------------------------

def check_make(words: list[str], made: set[str] = frozenset()) -> list[str]:
    problems, targets, variables = [], [], {}
    for word in words[1:]:
        if re.match(r"^[A-Za-z_]\w*=", word):
            name, _, value = word.partition("=")
            variables[name] = value
        elif not word.startswith("-"):
            targets.append(word)
    problems += [f"make {t}: no such target in the Makefile" for t in targets
                 if t not in make_targets()]
    if "PROFILE" in variables or "SET" in variables or "repro" in targets:
        problem = overrides_problem(variables.get("PROFILE", "default"),
                                    shlex.split(variables.get("SET", "")), made)
        problems += [problem] if problem else []
    return problems


def check_dvc(words: list[str], made: set[str] = frozenset()) -> list[str]:
    if words[1:3] != ["exp", "run"] and words[1:2] not in (["repro"], ["dag"]):
        return []
    args = words[3:] if words[1] == "exp" else words[2:]
    overrides, targets, i = [], [], 0
    with_value = {"-n", "--name", "-j", "--jobs", "--message", "-m", "--temp-dir"}
    while i < len(args):
        if args[i] in ("-S", "--set-param"):
            if i + 1 == len(args):
                return [f"{' '.join(words)}: {args[i]} without a value"]
            overrides.append(args[i + 1])
            i += 2
            continue
        if args[i] in with_value:
            i += 2
            continue
        if not args[i].startswith("-"):
            targets.append(args[i])
        i += 1
    stages = set(dvc_yaml()["stages"])
    problems = [f"dvc {words[1]} {t}: no stage {t.split('@')[0]!r} in dvc.yaml"
                for t in targets if t.split("@")[0] not in stages]
    if overrides:
        problem = overrides_problem(None, overrides, made)
        problems += [problem] if problem else []
    return problems


class _Refused(Exception):
    pass


def check_ctxrep(words: list[str]) -> list[str]:
    from ctxrep import cli

    if len(words) < 2 or words[1] not in cli.COMMANDS:
        return [f"ctxrep {words[1] if len(words) > 1 else ''}: no such subcommand "
                f"(ctxrep has {', '.join(cli.COMMANDS)})"]
    add_arguments, _ = cli._functions(words[1])
    parser = argparse.ArgumentParser(prog=f"ctxrep {words[1]}", add_help=True,
                                     allow_abbrev=False)
    add_arguments(parser)

    def refuse(message):
        raise _Refused(message)

    parser.error = refuse
    try:
        parser.parse_args(words[2:])
    except _Refused as err:
        return [f"{' '.join(words[:2])}: {err}"]
    except SystemExit:  # --help (or --version): printed, and valid
        pass
    return []


def check_paths(words: list[str], made: set[str]) -> list[str]:
    problems = []
    creates = (words[0] == "mkdir" or words[:2] == ["dvc", "import-url"]
               or words[:2] in (["ctxrep", "import-bert"], ["ctxrep", "import-elmo"],
                                ["ctxrep", "export-elmo"]))
    positional = [w for w in words if not w.startswith("-")]
    skip = 1 if words[0] in ("git", "dvc", "make", "ctxrep") else 0  # the subcommand
    if words[0] == "dvc" and len(words) > 2 and words[1] in DVC_GROUPS:
        skip = 2
    for word in words[1 + skip:]:
        if creates and not word.startswith("-") and (words[0] == "mkdir" or word == positional[-1]):
            made.add(word.removeprefix("./").rstrip("/"))
            continue
        path = repo_path(word)
        if path is None:
            continue
        problem = path_problem(path, made)
        problems += [problem] if problem else []
    if "/" in words[0] and repo_path(words[0]):  # a script of the repo run by its path
        problem = path_problem(repo_path(words[0]), made)
        problems += [problem] if problem else []
    return problems


def composed_profile(words: list[str]) -> str | None:
    """The profile whose params.yaml a command leaves in the workspace, or None."""
    if words[:2] == ["make", "repro"]:
        named = [w.split("=", 1)[1] for w in words if w.startswith("PROFILE=")]
        return named[-1] if named else "default"
    if words[:3] == ["dvc", "exp", "run"] and "--queue" not in words:
        named = [words[i + 1].split("=", 1)[1] for i, w in enumerate(words[:-1])
                 if w in ("-S", "--set-param") and words[i + 1].startswith("profile=")]
        return named[-1] if named else "default"
    return None


def block_problems(code: str) -> list[str]:
    problems: list[str] = []
    made: set[str] = set()
    profile = None
    for words in commands(code):
        profile = composed_profile(words) or profile
        if words[:2] in (["git", "add"], ["git", "commit"]) and "params.yaml" in words and (
                profile not in (None, "default")):
            problems.append(f"{' '.join(words)}: commits the {profile} profile's params.yaml; "
                            f"the committed one is the default profile's "
                            f"(tests/test_config.py checks it)")
        if words[0] == "make":
            problems += check_make(words, made)
        elif words[0] == "dvc":
            problems += check_dvc(words, made)
        elif words[0] == "ctxrep":
            problems += check_ctxrep(words)
        problems += check_paths(words, made)
    return problems


BLOCKS = shell_blocks()


@pytest.mark.parametrize("code", [pytest.param(code, id=where)
                                  for where, code, marked in BLOCKS if not marked])
def test_every_command_of_a_docs_shell_block_would_run(code):
    problems = block_problems(code)
    assert not problems, "\n".join(problems)


def test_the_blocks_checked_and_those_marked_illustrative_are_counted():
    checked = sum(not marked for _, _, marked in BLOCKS)
    illustrative = [where for where, _, marked in BLOCKS if marked]
    assert {"checked": checked, "illustrative": len(illustrative)} == EXPECTED_BLOCKS, (
        f"{checked} shell blocks checked, {len(illustrative)} illustrative ({illustrative}): "
        f"update EXPECTED_BLOCKS (and the docstring) with the page that changed them")


# -- the checker itself ------------------------------------------------------------------------

def test_the_checker_finds_what_a_copied_command_would_meet():
    assert check_make(["make", "no-such-target"])
    assert not check_make(["make", "test-fast"])
    assert check_make(["make", "repro", "SET=grid.methods=[static]"])
    assert check_make(["make", "repro", "PROFILE=nope"])
    assert not check_make(["make", "repro", "PROFILE=tiny", "SET=pretrain_bilm.steps=40"])
    assert check_dvc(["dvc", "exp", "run", "-S", "transfer.bert-finetune.epochs=3"])
    assert check_dvc(["dvc", "exp", "run", "no_such_stage"])
    assert check_ctxrep(["ctxrep", "sweep", "--no-such-flag"])
    assert check_ctxrep(["ctxrep", "no-such-command"])
    assert not check_ctxrep(["ctxrep", "compare", "HEAD~1", "--out", "/tmp/compare.md"])
    assert check_paths(["cat", "conf/no-such-file.yaml"], set())
    assert not check_paths(["cat", "metrics/transfer/ud_pos/elmo.json"], set())
    assert not check_paths(["git", "add", "metrics", "dvc.lock"], set())
    assert not check_paths(["ls", "data/features"], set())
    assert commands("for s in 1 2; do\n  dvc exp run -S a.b=$s -n x-$s\ndone") == [
        ["dvc", "exp", "run", "-S", "a.b=1", "-n", "x-1"]]
    assert block_problems("make repro PROFILE=tiny\ngit add dvc.lock params.yaml")
    assert not block_problems("make repro\ngit add dvc.lock params.yaml metrics")
    assert commands("A=1 ctxrep x && make y  # z") == [["ctxrep", "x"], ["make", "y"]]
