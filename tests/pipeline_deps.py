"""What each DVC stage really depends on, derived from the code: its transitive ``ctxrep``
imports, and the C++ source a reached module compiles. The tests in ``test_dvc_record.py``
compare this with ``dvc.yaml``."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import yaml

PACKAGE = "ctxrep"
# Packages whose modules are loaded by file path, not imported (evaluate metric modules):
# importing the package means running any file below it.
PATH_LOADED = ("metrics",)
# The task registry imports each task's module by name (ctxrep.data.tasks.get): a stage that
# reaches it runs the module of every task it reads. A per-task stage (foreach over the task
# lists, or a matrix over ``task``) reads its own; any other stage, every one.
TASKS_PACKAGE = f"src/{PACKAGE}/data/tasks"
PER_TASK_ITEM = {"${tasks}": "${item}", "${grid.tasks}": "${item}"}


def module_file(src: Path, module: str) -> Path | None:
    """``ctxrep.models.bilm`` → ``src/ctxrep/models/bilm.py`` (or the package ``__init__``)."""
    base = src.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.exists():
            return candidate
    return None


def from_base(node: ast.ImportFrom, package: str) -> str:
    """The absolute module a ``from ... import`` names, its relative dots resolved against
    ``package`` (the importing module's package)."""
    base = node.module or ""
    if node.level:
        parts = package.split(".")
        parts = parts[: len(parts) - node.level + 1]
        base = ".".join(parts + ([base] if base else []))
    return base


def _imported_modules(path: Path, src: Path) -> set[str]:
    """Every ctxrep module a file imports, at module level or inside a function."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    here = ".".join(path.relative_to(src).with_suffix("").parts) if path.is_relative_to(src) else ""
    package = here.rsplit(".", 1)[0] if not path.name == "__init__.py" else here.removesuffix(".__init__")
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = from_base(node, package)
            found.add(base)
            found |= {f"{base}.{a.name}" for a in node.names}  # `from pkg import module`
    return {m for m in found if m == PACKAGE or m.startswith(PACKAGE + ".")}


def transitive_files(entry: Path, src: Path) -> set[Path]:
    """``entry`` and every ctxrep source file it reaches by imports (packages' ``__init__``
    included, as Python runs them)."""
    seen: set[Path] = set()
    todo = [entry]
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        for module in _imported_modules(path, src):
            parts = module.split(".")
            for i in range(1, len(parts) + 1):  # importing a.b.c runs a/__init__, a/b/__init__
                f = module_file(src, ".".join(parts[:i]))
                if f is not None and f not in seen:
                    todo.append(f)
    for name in PATH_LOADED:
        folder = src / PACKAGE / name
        if folder / "__init__.py" in seen:
            seen |= {p for p in folder.rglob("*.py")}
    # A module that compiles a native kernel keeps its source beside it (``x.py`` builds ``x.cpp``).
    seen |= {p.with_suffix(".cpp") for p in seen if p.with_suffix(".cpp").exists()}
    return seen


def entry_points(cmd: str, root: Path) -> list[Path]:
    """The Python files a stage command starts: ``python stages/x.py``, ``python -m ctxrep.x``
    (with the stage script it starts: ``python -m ctxrep.launch stages/x.py``) or ``ctxrep <sub>``."""
    scripts = [root / m for m in re.findall(r"(?:^|\s)(stages/\S+\.py)", cmd)]
    scripts += [module_file(root / "src", m) for m in re.findall(rf"\bpython\s+-m\s+({PACKAGE}\.\S+)", cmd)]
    if re.search(r"(^|\s)ctxrep\s", cmd):
        scripts.append(root / "src" / PACKAGE / "cli.py")
    return scripts


def task_item(stage: dict) -> str | None:
    """``${item}`` / ``${item.task}`` when the stage runs once per task, else None."""
    if isinstance(stage.get("foreach"), str):
        return PER_TASK_ITEM.get(stage["foreach"])
    if "task" in (stage.get("matrix") or {}):
        return "${item.task}"
    return None


def task_modules(needed: set[str], stage: dict, root: Path) -> set[str]:
    """The task modules (and what they import) a stage that reaches the task registry runs."""
    if f"{TASKS_PACKAGE}/__init__.py" not in needed:
        return set()
    src = root / "src"
    modules = sorted(p for p in (root / TASKS_PACKAGE).glob("*.py") if p.name != "__init__.py")
    imported = {str(f.relative_to(root)) for m in modules for f in transitive_files(m, src)}
    item = task_item(stage)
    if item is None:
        return imported
    return {f for f in imported if not f.startswith(TASKS_PACKAGE + "/")
            or f.endswith("/__init__.py")} | {f"{TASKS_PACKAGE}/{item}.py"}


def code_deps(root: Path) -> dict[str, dict[str, set[str]]]:
    """stage → {"needed": source files its code runs, "declared": code paths in dvc.yaml}.

    Paths are repo-relative strings; ``declared`` keeps only entries under ``stages/`` and
    ``src/``. A declared folder covers every file below it."""
    dvc = yaml.safe_load((root / "dvc.yaml").read_text())
    src = root / "src"
    out = {}
    for name, stage in dvc["stages"].items():
        body = stage.get("do", stage)
        cmd = body["cmd"] if isinstance(body["cmd"], str) else " ".join(body["cmd"])
        needed = set()
        for entry in entry_points(cmd.replace("${item}", "x"), root):
            needed |= {str(p.relative_to(root)) for p in transitive_files(entry, src)}
        needed |= task_modules(needed, stage, root)
        declared = {d for d in body.get("deps", []) if isinstance(d, str)
                    and d.startswith(("stages/", "src/"))}
        out[name] = {"needed": needed, "declared": declared}
    return out


def covered(path: str, declared: set[str]) -> bool:
    return any(path == d or path.startswith(d.rstrip("/") + "/") for d in declared)


def code_dep_problems(root: Path) -> list[str]:
    """Missing code deps (a file the stage runs that dvc.yaml does not list) and stale ones
    (a listed path the stage never runs), one line each."""
    problems = []
    for name, deps in code_deps(root).items():
        for path in sorted(deps["needed"]):
            if not covered(path, deps["declared"]):
                problems.append(f"{name}: runs {path}, which its deps do not list")
        for d in sorted(deps["declared"]):
            if not any(covered(p, {d}) for p in deps["needed"]):
                problems.append(f"{name}: lists {d}, which its code never imports")
    return problems


def minimal_cover(needed: set[str], root: Path) -> list[str]:
    """The shortest list of paths covering ``needed``: a folder when every source file in it
    is needed, else the files. What to paste into a stage's deps (``python -m
    tests.pipeline_deps``)."""
    files = {p for p in needed if "${" not in p}
    out = sorted(needed - files)  # a per-task module, as its stage's template names it
    for folder in sorted({str(Path(p).parent) for p in files}, key=lambda s: s.count("/")):
        if not any(f.startswith(folder + "/") for f in files) or folder in ("src", "stages"):
            continue
        if folder == "src/ctxrep":
            continue
        every = {str(p.relative_to(root)) for p in (root / folder).rglob("*.py")}
        if every and every <= files:
            out.append(folder)
            files -= every
    return sorted(out + sorted(files))


def write_code_deps(root: Path) -> None:
    """Rewrite the code entries (``stages/``, ``src/``) of every stage's deps in dvc.yaml from
    the imports, keeping comments, order and every other entry (ruamel round trip)."""
    from ruamel.yaml import YAML

    yaml_rt = YAML()
    yaml_rt.preserve_quotes = True
    yaml_rt.width = 100
    yaml_rt.indent(mapping=2, sequence=4, offset=2)
    path = root / "dvc.yaml"
    doc = yaml_rt.load(path.read_text())
    for name, deps in code_deps(root).items():
        body = doc["stages"][name].get("do", doc["stages"][name])
        others = [d for d in body["deps"]
                  if not (isinstance(d, str) and d.startswith(("stages/", "src/")))]
        body["deps"].clear()
        body["deps"].extend(minimal_cover(deps["needed"], root) + others)
    with open(path, "w") as f:
        yaml_rt.dump(doc, f)


if __name__ == "__main__":  # python -m tests.pipeline_deps [--write]
    import sys

    here = Path.cwd()
    if sys.argv[1:] == ["--write"]:
        write_code_deps(here)
        print("dvc.yaml: code deps rewritten from the imports")
    for line in code_dep_problems(here):
        print(line)
