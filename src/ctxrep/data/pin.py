"""Pin the sha256 of a task's (or a corpus's) mirror files in its registry module:
``ctxrep pin <task>``.

A pinned file is checked by ``fetch_tasks@<task>`` (when ``data.verify_sha256`` is on): a copy
whose bytes differ from the pinned ones stops the fetch, naming the file. Pins live in
``SHA256`` of the task's own module, ``src/ctxrep/data/tasks/<task>.py``: a dict literal that
this module rewrites in place (sorted, so the same pins give the same bytes). Only that task's
stages depend on the file, so pinning one task reruns no other.

    ctxrep pin rte               # hash $CTXREP_DATA_MIRROR's files of rte, write the pins
    ctxrep pin rte --print       # only print them
    ctxrep pin wikipedia         # a corpus: src/ctxrep/data/pins/wikipedia.py

Pin the files as published (right after downloading them), so a later modified or truncated
copy is caught. Whether a task was pinned and checked is recorded in its fetch manifest
(``sha256_pins``) and shown in the report's data section.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from ctxrep.data import registry, tasks
from ctxrep.data.readers import DataError
from ctxrep.data.sources import mirror_root
from ctxrep.io import atomic_file, sha256_file

MIRROR_ENV = "CTXREP_DATA_MIRROR"
PINS_DIR = Path(__file__).parent / "pins"  # a corpus's pins (a task's are in its own module)

_BLOCK = re.compile(r"^SHA256 = (\{\}|\{$.*?^\})", re.S | re.M)  # then maybe a comment


def mirror_pins(task: str) -> dict[str, str]:
    """{mirror path: sha256} of ``task``'s files under ``$CTXREP_DATA_MIRROR`` (globs expanded)."""
    from ctxrep.data.sources import _mirror_files

    spec = registry.CORPORA[task] if task in registry.CORPORA else tasks.get(task)
    files, why = _mirror_files(spec)
    if files is None:
        raise DataError(mirror_root() or f"${MIRROR_ENV}", f"cannot pin {task}: {why}")
    root = Path(mirror_root())
    return {str(f.relative_to(root)): sha256_file(f) for f in files}


def write_pins(task: str, pins: dict[str, str], module_file: Path | None = None) -> Path:
    """Replace the ``SHA256 = {...}`` literal of ``task``'s module (default
    ``src/ctxrep/data/tasks/<task>.py``, a corpus's ``src/ctxrep/data/pins/<corpus>.py``) with
    ``pins``, sorted."""
    default = (PINS_DIR if task in registry.CORPORA else tasks.HERE) / f"{task}.py"
    path = Path(module_file or default)
    text = path.read_text()
    match = _BLOCK.search(text)
    if match is None:
        raise DataError(path, "no 'SHA256 = {...}' block to update (a dict literal: '{}', or "
                              "'{' ... ending in a line '}')")
    literal = json.dumps(dict(sorted(pins.items())), indent=4) if pins else "{}"
    with atomic_file(path) as f:
        f.write(text[:match.start(1)] + literal + text[match.end(1):])
    return path


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("task", help="a task (or corpus) of the registry whose mirror files to pin")
    ap.add_argument("--print", action="store_true", dest="print_only",
                    help="print the pins instead of writing them into the task's module")


def run(a) -> int:
    try:
        pins = mirror_pins(a.task)
        print(json.dumps({a.task: pins}, indent=4))
        if not a.print_only:
            path = write_pins(a.task, pins)
            print(f"ctxrep pin: wrote {len(pins)} pin(s) of {a.task} into {path}")
    except DataError as e:
        print(f"ctxrep pin: {e}", file=sys.stderr)
        return 2
    return 0
