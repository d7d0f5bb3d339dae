"""A task's test fixture, cut from its mirror files: ``ctxrep fixture <task>``.

The test suite reads every registry task from a tiny fixture mirror
(``tests/conftest.py::build_mirror``, ``test_every_task_reads_from_fixture_mirror``). The
fixtures of the built-in tasks are generated there; a task added later gets its fixture from
this command, which copies the head of each of the task's mirror files (from
``$CTXREP_DATA_MIRROR``) to the same relative path under ``tests/fixtures/mirror/``, which
``build_mirror`` lays over the generated mirror:

    ctxrep fixture rte                     # first 20 records of each file of rte
    ctxrep fixture rte --records 50 --out tests/fixtures/mirror

The head of a line-based file is its first ``records`` non-blank lines (a header row counts as
one); a file with blank-line-separated blocks (CoNLL) is cut at the next blank line after
them, so no sentence is split. Gzipped files stay gzipped. A JSON file cannot be cut by lines:
the command names it and stops, and its fixture is written by hand.
"""

from __future__ import annotations

import argparse
import gzip
import os
import sys
from pathlib import Path

from ctxrep.data import registry
from ctxrep.data.readers import DataError
from ctxrep.io import atomic_file

DEFAULT_OUT = Path("tests/fixtures/mirror")
MIRROR_ENV = "CTXREP_DATA_MIRROR"


def head_lines(lines: list[str], records: int) -> list[str]:
    """The first ``records`` non-blank lines, extended to the end of their blank-line block."""
    kept, seen = [], 0
    blocks = any(not line.strip() for line in lines)
    for line in lines:
        if seen >= records and (not blocks or not line.strip()):
            break
        kept.append(line)
        seen += bool(line.strip())
    return kept


def write_fixture(task: str, out: Path = DEFAULT_OUT, records: int = 20) -> list[Path]:
    """Write the heads of ``task``'s mirror files under ``out``; return the files written."""
    from ctxrep.data.sources import _mirror_files

    spec = registry.get(task)
    files, why = _mirror_files(spec)
    if files is None:
        raise DataError(os.environ.get(MIRROR_ENV, f"${MIRROR_ENV}"),
                        f"cannot cut a fixture of {task}: {why}")
    root, written = Path(os.environ[MIRROR_ENV]), []
    for path in files:
        if path.suffix == ".json":
            raise DataError(path, "a JSON file cannot be cut by lines: write its fixture by hand "
                                  f"under {out}")
        gz = path.suffix == ".gz"
        with (gzip.open if gz else open)(path, "rb") as f:
            raw = f.read()
        text = raw.decode("utf-8", errors="surrogateescape")
        lines = head_lines(text.splitlines(keepends=True), records)
        data = "".join(lines).encode("utf-8", errors="surrogateescape")
        target = out / path.relative_to(root)
        with atomic_file(target, "wb") as f:
            f.write(gzip.compress(data, mtime=0) if gz else data)
        written.append(target)
    return written


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("task", help="a task of the registry")
    ap.add_argument("--records", type=int, default=20,
                    help="non-blank lines kept per file (default 20)")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT,
                    help=f"the fixture mirror folder (default {DEFAULT_OUT})")


def run(a) -> int:
    try:
        for path in write_fixture(a.task, a.out, a.records):
            print(f"ctxrep fixture: wrote {path}")
    except DataError as e:
        print(f"ctxrep fixture: {e}", file=sys.stderr)
        return 2
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="ctxrep fixture", description=__doc__.splitlines()[0])
    add_arguments(ap)
    return run(ap.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
