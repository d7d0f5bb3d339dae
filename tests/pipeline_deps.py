"""What each DVC stage's code dependencies must be, and what they cover.

A stage lists its script's code manifest (``data/code/<script>.json``, written by the stage
``code``: :mod:`ctxrep.codedeps`) and the task modules it runs: its own task's
(``src/ctxrep/data/tasks/${item}.py``) when it runs once per task, the whole folder when it
reads every task; and a stage that loads its left-to-right family's module, that module. The
tests in ``test_dvc_record.py`` compare this with ``dvc.yaml`` (and with the modules a real
run's stages loaded); ``python -m tests.pipeline_deps --write`` rewrites those entries from the
code."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from ctxrep import codedeps

CODE_STAGE = "code"  # the stage that writes the manifests: it depends on the code as folders
CODE_ENTRY = ("stages/", "src/", "data/code/")  # dvc.yaml entries this module owns
PER_TASK_ITEM = {"${tasks}": "${item}", "${grid.tasks}": "${item}"}


def entry_scripts(cmd: str, root: Path) -> list[Path]:
    """The stage scripts a command starts (``python -m ctxrep.launch stages/x.py …``)."""
    return [root / m for m in re.findall(r"(?:^|\s)(stages/\S+\.py)", cmd)]


def task_item(stage: dict) -> str | None:
    """``${item}`` / ``${item.task}`` when the stage runs once per task, else None."""
    if isinstance(stage.get("foreach"), str):
        return PER_TASK_ITEM.get(stage["foreach"])
    if "task" in (stage.get("matrix") or {}):
        return "${item.task}"
    return None


def _body(stage: dict) -> dict:
    return stage.get("do", stage)


def expected_entries(stage: dict, root: Path) -> list[str]:
    """The code entries a stage's deps must hold: its scripts' manifests, then its tasks."""
    body = _body(stage)
    scripts = entry_scripts(body["cmd"], root)
    entries = [codedeps.manifest_path(s.name) for s in scripts]
    if any(codedeps.reaches_tasks(codedeps.script_files(s, root)) for s in scripts):
        item = task_item(stage)
        entries.append(f"{codedeps.TASKS_PACKAGE}/{item}.py" if item else codedeps.TASKS_PACKAGE)
    if any(s.name in codedeps.FAMILY_LOADERS for s in scripts):
        entries.append(f"{codedeps.FAMILIES_PACKAGE}/${{item}}.py")
    return entries


def code_deps(root: Path) -> dict[str, dict[str, set[str]]]:
    """stage → {"needed": source files its code runs (a per-task stage's own task module
    written with its template), "declared": the files its code entries in dvc.yaml cover (a
    manifest covers what its script runs; a folder every file below it)}."""
    stages = yaml.safe_load((root / "dvc.yaml").read_text())["stages"]
    out = {}
    for name, stage in stages.items():
        if name == CODE_STAGE:
            continue
        body = _body(stage)
        needed = set()
        for script in entry_scripts(body["cmd"], root):
            needed |= codedeps.script_files(script, root)
        needed |= {e for e in expected_entries(stage, root) if e.startswith("src/")}
        declared = set()
        for entry in (d for d in body.get("deps", []) if isinstance(d, str)):
            if entry.startswith("data/code/"):
                script = root / "stages" / (Path(entry).stem + ".py")
                declared |= codedeps.script_files(script, root) if script.exists() else set()
            elif entry.startswith(("stages/", "src/")):
                declared.add(entry)
        out[name] = {"needed": needed, "declared": declared}
    return out


def covered(path: str, declared: set[str]) -> bool:
    return any(path == d or path.startswith(d.rstrip("/") + "/") for d in declared)


def code_dep_problems(root: Path) -> list[str]:
    """Each stage's code entries in dvc.yaml against :func:`expected_entries`, one line per
    missing or extra entry; and the stage ``code`` depending on the code folders."""
    stages = yaml.safe_load((root / "dvc.yaml").read_text())["stages"]
    problems = []
    code = stages.get(CODE_STAGE, {})
    if sorted(code.get("deps", [])) != ["src/ctxrep", "stages"] \
            or code.get("outs") != [codedeps.CODE_DIR.as_posix()]:
        problems.append(f"{CODE_STAGE}: must depend on src/ctxrep and stages, and write data/code")
    for name, stage in stages.items():
        if name == CODE_STAGE:
            continue
        listed = [d for d in _body(stage).get("deps", []) if isinstance(d, str)
                  and d.startswith(CODE_ENTRY)]
        wanted = expected_entries(stage, root)
        problems += [f"{name}: does not list {e}" for e in wanted if e not in listed]
        problems += [f"{name}: lists {e}, which its code does not need" for e in listed
                     if e not in wanted]
    return problems


def write_code_deps(root: Path) -> None:
    """Rewrite the code entries of every stage's deps in dvc.yaml (first, in the order of
    :func:`expected_entries`), keeping comments, order and every other entry (ruamel)."""
    from ruamel.yaml import YAML

    yaml_rt = YAML()
    yaml_rt.preserve_quotes = True
    yaml_rt.width = 100
    yaml_rt.indent(mapping=2, sequence=4, offset=2)
    path = root / "dvc.yaml"
    doc = yaml_rt.load(path.read_text())
    for name, stage in doc["stages"].items():
        if name == CODE_STAGE:
            continue
        body = _body(stage)
        others = [d for d in body["deps"] if not (isinstance(d, str) and d.startswith(CODE_ENTRY))]
        body["deps"].clear()
        body["deps"].extend(expected_entries(stage, root) + others)
    with open(path, "w") as f:
        yaml_rt.dump(doc, f)


if __name__ == "__main__":  # python -m tests.pipeline_deps [--write]
    import sys

    here = Path.cwd()
    if sys.argv[1:] == ["--write"]:
        write_code_deps(here)
        print("dvc.yaml: code deps rewritten from the code")
    for line in code_dep_problems(here):
        print(line)
