"""No import cycle inside the ``ctxrep`` package.

Every module under ``src/ctxrep`` is parsed (never imported) and each import it holds, at module
level or inside a function, class or ``if TYPE_CHECKING`` block, becomes an edge to the ctxrep
module it names: ``import a.b.c`` and ``from a.b import c`` (``c`` a submodule) point to
``a.b.c``, ``from a.b import name`` to ``a.b``; relative imports are resolved against the
importing module's package. A lazy import inside a function is a cycle all the same: it only
moves the failure (or the half-initialised module) to the first call.

Importing ``a.b.c`` also runs the packages ``a`` and ``a.b``; those implicit edges are left out,
so a package ``__init__`` that re-exports its submodules is not by itself a cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

from ctxrep.codedeps import absolute_module

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = "ctxrep"


def module_files(src: Path, package: str = PACKAGE) -> dict[str, Path]:
    """Dotted module name -> file, for every module of ``package`` (``__init__`` = the package)."""
    out = {}
    for path in sorted((src / package).rglob("*.py")):
        parts = path.relative_to(src).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _known_prefix(name: str, known: dict) -> str | None:
    """The longest prefix of the dotted ``name`` that is a known module."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        if ".".join(parts[:i]) in known:
            return ".".join(parts[:i])
    return None


def imported_modules(name: str, path: Path, known: dict) -> set[str]:
    """The known modules that module ``name`` (at ``path``) imports, anywhere in its code."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = absolute_module(node, package)
            # `from a import b`: the submodule a.b if there is one, else a name in a
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                       for alias in node.names]
        else:
            continue
        for target in targets:
            module = _known_prefix(target, known)
            if module is not None and module != name:
                found.add(module)
    return found


def import_graph(src: Path, package: str = PACKAGE) -> dict[str, set[str]]:
    known = module_files(src, package)
    return {name: imported_modules(name, path, known) for name, path in known.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle through each back edge a depth-first search meets (``[a, b, ..., a]``), in a
    stable order; empty when the graph has none."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                found.append(path[path.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt)
        path.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return found


def test_the_package_has_no_import_cycle():
    graph = import_graph(SRC)
    assert len(graph) > 50 and "ctxrep.training.loop" in graph  # the walk saw the package
    found = cycles(graph)
    assert not found, "import cycles in ctxrep:\n" + "\n".join(" -> ".join(c) for c in found)


def test_a_cycle_through_a_lazy_or_relative_import_is_found(tmp_path):
    pkg = tmp_path / "ctxrep"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("import ctxrep.sub.b\n")
    (pkg / "sub" / "b.py").write_text("from . import c\n")                  # relative: sub.c
    (pkg / "sub" / "c.py").write_text("def f():\n    from ctxrep import a\n")  # lazy
    (pkg / "d.py").write_text("from ctxrep.sub.b import NAME\n")          # a name in b
    graph = import_graph(tmp_path)
    assert graph["ctxrep.d"] == {"ctxrep.sub.b"}
    assert cycles(graph) == [["ctxrep.a", "ctxrep.sub.b", "ctxrep.sub.c", "ctxrep.a"]]
    (pkg / "sub" / "c.py").write_text("def f():\n    pass\n")
    assert cycles(import_graph(tmp_path)) == []


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The module graph folded to ``ctxrep``'s first level (``ctxrep.transfer.cell`` →
    ``ctxrep.transfer``; a top-level module stands for itself)."""
    def top(module: str) -> str:
        return ".".join(module.split(".")[:2])

    folded: dict[str, set[str]] = {}
    for module, targets in graph.items():
        folded.setdefault(top(module), set()).update(
            t for t in map(top, targets) if t != top(module))
    return folded


def two_way(folded: dict[str, set[str]]) -> list[tuple[str, str]]:
    return sorted({tuple(sorted((a, b))) for a, targets in folded.items() for b in targets
                   if a in folded.get(b, ())})


def test_no_two_packages_import_each_other():
    """Issue 49: a layer reads top to bottom. `kinds/` once imported `transfer.feature_models`
    while `transfer/` imports `kinds`; the task model's network now lives in `models/`."""
    folded = package_graph(import_graph(SRC))
    assert not any(t.startswith("ctxrep.transfer") for t in folded["ctxrep.kinds"])
    assert two_way(folded) == []


def test_a_two_way_package_dependency_is_found(tmp_path):
    pkg = tmp_path / "ctxrep"
    for sub in ("kinds", "transfer"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "transfer" / "cell.py").write_text("from ctxrep.kinds import tagging\n")
    (pkg / "kinds" / "tagging.py").write_text("import torch\n")
    assert two_way(package_graph(import_graph(tmp_path))) == []
    (pkg / "kinds" / "tagging.py").write_text("def f():\n    from ctxrep.transfer import heads\n")
    (pkg / "transfer" / "heads.py").write_text("")
    assert two_way(package_graph(import_graph(tmp_path))) == [("ctxrep.kinds", "ctxrep.transfer")]
