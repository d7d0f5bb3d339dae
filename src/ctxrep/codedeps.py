"""The code each stage script runs, as DVC dependencies: one small manifest per script.

A stage depends on every source file its code runs, so that DVC reruns it when one changes and
on nothing else, so that editing one stage's code leaves the others up to date. Listing those
files in ``dvc.yaml`` gave every stage ~40 code entries (~800 lines of ``dvc.yaml``, ~1,400
entries of ``dvc.lock``, which DVC reads and rewrites whole after every stage). Instead the
first stage, ``code``, depends on ``src/ctxrep`` and ``stages`` as folders and writes
``data/code/<script>.json``: for each ``stages/<script>.py``, the sha256 of every file it runs.
Each stage depends on its script's manifest, which changes exactly when one of those files
does: DVC reruns the same stages as before, from one dependency entry each.

What a script runs, read from the source (:func:`script_files`): the script, the launcher every
stage starts through (:mod:`ctxrep.launch`), and every ``ctxrep`` module they import,
transitively, at module level or inside a function; packages whose modules are loaded by path
(:data:`PATH_LOADED`) whole; the C++ source beside a module that compiles it; and, when the
code reaches the task registry, what the task modules import. The task modules themselves are
not in a manifest: a stage that runs once per task lists its own task's module in ``dvc.yaml``
(``src/ctxrep/data/tasks/${item}.py``), any other stage that reads tasks the whole folder, so a
task added to the run reruns only what reads it. A left-to-right family's module
(:mod:`ctxrep.families`, found by file name and imported by ``family(name)``) is the same: in no
manifest (what it imports is), listed in dvc.yaml by the stages that load it
(:data:`FAMILY_LOADERS`, their own family's), so a family added reruns nothing else.

The stage is ``stages/code.py``; ``python -m ctxrep.codedeps OUT`` writes the same manifests
anywhere, outside the pipeline.
"""

from __future__ import annotations

import ast
import functools
import json
import sys
from pathlib import Path

from ctxrep.families import is_left_to_right_module
from ctxrep.io import sha256_file

PACKAGE = "ctxrep"
LAUNCHER = f"src/{PACKAGE}/launch.py"  # every stage starts through it (dvc.yaml's cmd)
# Packages whose modules are loaded by file path, not imported (evaluate metric modules):
# importing the package means running any file below it.
PATH_LOADED = ("metrics",)
# The task registry imports each task's module by name (ctxrep.data.tasks.get).
TASKS_PACKAGE = f"src/{PACKAGE}/data/tasks"
CODE_DIR = Path("data/code")  # the stage `code`'s output: <script>.json per stage script
# The left-to-right families' modules (ctxrep.families), and the stage scripts that load their
# own family's (``families.family(name)``): each lists ``src/ctxrep/families/${item}.py``. The
# tests check it against the modules a real run's stages loaded (config.write_trace).
FAMILIES_PACKAGE = f"src/{PACKAGE}/families"
FAMILY_LOADERS = ("pretrain_ltr.py",)


def module_file(src: Path, module: str) -> Path | None:
    """``ctxrep.models.bilm`` → ``src/ctxrep/models/bilm.py`` (or the package ``__init__``)."""
    base = src.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.exists():
            return candidate
    return None


def absolute_module(node: ast.ImportFrom, package: str) -> str:
    """The module a ``from ... import`` names, its leading dots resolved against ``package``."""
    base = node.module or ""
    if node.level:
        parts = package.split(".")
        parts = parts[: len(parts) - node.level + 1]
        base = ".".join(parts + ([base] if base else []))
    return base


def imported_modules(path: Path, src: Path) -> set[str]:
    """Every ``ctxrep`` module a file imports, at module level or inside a function."""
    stat = path.stat()
    return set(_imported_modules(path, src, stat.st_mtime_ns, stat.st_size))


@functools.lru_cache(maxsize=None)  # each file parsed once per version (its mtime and size)
def _imported_modules(path: Path, src: Path, _mtime_ns: int, _size: int) -> frozenset[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    here = ".".join(path.relative_to(src).with_suffix("").parts) if path.is_relative_to(src) else ""
    package = here.removesuffix(".__init__") if path.name == "__init__.py" else here.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = absolute_module(node, package)
            found.add(base)
            found |= {f"{base}.{a.name}" for a in node.names}  # `from pkg import module`
    return frozenset(m for m in found if m == PACKAGE or m.startswith(PACKAGE + "."))


def transitive_files(entry: Path, src: Path) -> set[Path]:
    """``entry`` and every ctxrep source file it reaches by imports (packages' ``__init__``
    included, as Python runs them), path-loaded packages whole, and the C++ source a reached
    module compiles (``x.py`` builds ``x.cpp`` beside it)."""
    seen: set[Path] = set()
    todo = [entry]
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        for module in imported_modules(path, src):
            parts = module.split(".")
            for i in range(1, len(parts) + 1):  # importing a.b.c runs a/__init__, a/b/__init__
                f = module_file(src, ".".join(parts[:i]))
                if f is not None and f not in seen:
                    todo.append(f)
    for name in PATH_LOADED:
        folder = src / PACKAGE / name
        if folder / "__init__.py" in seen:
            seen |= set(sources(folder, recursive=True))
    seen |= {p.with_suffix(".cpp") for p in seen if p.with_suffix(".cpp").exists()}
    return seen


def sources(folder: Path, recursive: bool = False) -> list[Path]:
    """The ``.py`` files of ``folder`` (and below it), sorted, but hidden ones: an editor's lock
    link (``.#x.py``) or backup is not code a stage runs."""
    found = folder.rglob("*.py") if recursive else folder.glob("*.py")
    return sorted(p for p in found if not any(part.startswith(".")
                                               for part in p.relative_to(folder).parts))


def is_task_module(path: str) -> bool:
    """A task's own module (listed per stage in dvc.yaml, never in a manifest)."""
    return path.startswith(TASKS_PACKAGE + "/") and not path.endswith("/__init__.py")


def is_family_module(path: str) -> bool:
    """A left-to-right family's own module (listed by the stages that load it, never in a
    manifest); the package's other modules (the core families, the records) are imported by its
    ``__init__`` like any module."""
    module = path.removeprefix("src/").removesuffix(".py").replace("/", ".")
    return path.startswith(FAMILIES_PACKAGE + "/") and is_left_to_right_module(module)


def reaches_tasks(files: set[str]) -> bool:
    """Whether code running ``files`` reaches the task registry (and so runs task modules)."""
    return f"{TASKS_PACKAGE}/__init__.py" in files


def script_files(script: Path, root: Path) -> set[str]:
    """Repo-relative paths of every source file ``stages/<script>.py`` runs, started through
    the launcher, but the task modules (see the module docstring)."""
    src = root / "src"
    files = transitive_files(script, src) | transitive_files(root / LAUNCHER, src)
    paths = {str(p.relative_to(root)) for p in files}
    for package in (TASKS_PACKAGE, FAMILIES_PACKAGE):  # what the modules found by name import
        if f"{package}/__init__.py" in paths:
            for module in sources(root / package):
                paths |= {str(p.relative_to(root)) for p in transitive_files(module, src)}
    return {p for p in paths if not is_task_module(p) and not is_family_module(p)}


def manifest(script: Path, root: Path) -> dict[str, str]:
    """``{path: sha256}`` of the files :func:`script_files` names, sorted by path."""
    return {path: sha256_file(root / path) for path in sorted(script_files(script, root))}


def manifest_path(script: str) -> str:
    """Where the ``code`` stage writes the manifest of ``stages/<script>.py``."""
    return (CODE_DIR / f"{Path(script).stem}.json").as_posix()


def write_manifests(out: Path, root: Path = Path(".")) -> list[Path]:
    """``out/<script>.json`` for every ``stages/*.py``, written whole into a sibling folder
    that then takes ``out``'s place; returns the manifests written."""
    import shutil
    import tempfile

    out, scripts = Path(out), sources(Path(root) / "stages")
    if not scripts:
        raise FileNotFoundError(f"no stage scripts in {Path(root) / 'stages'}: run it from the "
                                f"repository's root")
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    old = staging.with_name(staging.name + ".old")
    try:
        for script in scripts:
            text = json.dumps(manifest(script, root), indent=1) + "\n"
            (staging / f"{script.stem}.json").write_text(text, encoding="utf-8")
        staging.chmod(0o755)
        if out.exists():
            out.rename(old)  # aside, so that `out` is always whole: the old folder or the new
        staging.rename(out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        if old.exists() and not out.exists():
            old.rename(out)
        raise
    shutil.rmtree(old, ignore_errors=True)
    return sorted(out.glob("*.json"))


def changed_since(manifest_file: Path, root: Path = Path(".")) -> list[str]:
    """The files whose bytes differ from what ``manifest_file`` (``data/code/<script>.json``)
    records, or that the script runs now and did not then, or no longer runs: empty when the
    manifest still describes the code. A stage checks its own before it starts (DVC records
    the manifest, so a stage must never run code other than what it says)."""
    root = Path(root)
    recorded = json.loads(Path(manifest_file).read_text(encoding="utf-8"))
    current = manifest(root / "stages" / f"{Path(manifest_file).stem}.py", root)
    return sorted(path for path in recorded.keys() | current.keys()
                  if recorded.get(path) != current.get(path))


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m ctxrep.codedeps OUT_DIR", file=sys.stderr)
        return 2
    written = write_manifests(Path(args[0]))
    print(f"[code] {len(written)} manifests in {args[0]}: the source files each stage script runs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
