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
them, so no sentence is split. An XML file (``.xml``, or one that opens with an XML declaration)
is cut by record: the first ``records`` children of its root element, under the same root tag and
attributes and the same declaration, so the fixture is well-formed XML. Gzipped files stay
gzipped. A file that cannot be cut safely (JSON, an archive or other binary file, XML that does
not parse) is named and the command stops (exit 2) before it writes anything; such a fixture is
written by hand.
"""

from __future__ import annotations

import argparse
import gzip
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from ctxrep.data import tasks
from ctxrep.data.readers import DataError
from ctxrep.data.sources import mirror_root
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


# Not cut by lines or records: written by hand (named by the suffix of the file's name, after .gz).
UNCUTTABLE = {".json": "a JSON file cannot be cut by lines",
              **{s: "an archive or binary file cannot be cut by lines"
                 for s in (".zip", ".tar", ".tgz", ".bz2", ".xz", ".7z", ".parquet", ".arrow",
                           ".xlsx", ".pkl", ".npy", ".npz")}}
_XML_DECL = re.compile(rb"\A(?:\xef\xbb\xbf)?\s*(<\?xml\b[^>]*\?>)")
_XML_ENCODING = re.compile(rb"""encoding\s*=\s*["']([A-Za-z0-9._-]+)["']""")


def head_xml(raw: bytes, records: int, path: Path) -> bytes:
    """The first ``records`` children of the root element of the XML document ``raw``, as a
    well-formed document with the same root tag and attributes and the same XML declaration."""
    try:
        root = ET.fromstring(raw)
    except ET.ParseError as e:
        raise DataError(path, f"not well-formed XML ({e}): cannot cut its fixture by record; "
                              f"write it by hand") from None
    children = list(root)
    if len(children) > records:
        last_tail = children[-1].tail  # the text before the root's closing tag
        for extra in children[records:]:
            root.remove(extra)
        if records:
            children[records - 1].tail = last_tail
    decl = _XML_DECL.match(raw)
    enc = _XML_ENCODING.search(decl.group(1)) if decl else None
    encoding = enc.group(1).decode("ascii") if enc else "utf-8"
    body = ET.tostring(root, encoding=encoding, xml_declaration=False)
    out = (decl.group(1) + b"\n" if decl else b"") + body + b"\n"
    try:
        ET.fromstring(out)
    except ET.ParseError as e:  # e.g. a DOCTYPE the records need: refuse rather than write it
        raise DataError(path, f"its first {records} records do not make well-formed XML on "
                              f"their own ({e}); write its fixture by hand") from None
    return out


def is_xml(path: Path, raw: bytes) -> bool:
    """An ``.xml`` (or ``.xml.gz``) file, or one that opens with an XML declaration."""
    name = path.name[:-3] if path.suffix == ".gz" else path.name
    return name.endswith(".xml") or _XML_DECL.match(raw) is not None


def cut(path: Path, raw: bytes, records: int, out: Path) -> bytes:
    """The head of one (decompressed) mirror file, or a DataError naming it if it cannot be cut."""
    inner = Path(path.name[:-3] if path.suffix == ".gz" else path.name).suffix.lower()
    if inner in UNCUTTABLE:
        raise DataError(path, f"{UNCUTTABLE[inner]}: write its fixture by hand under {out}")
    if is_xml(path, raw):
        return head_xml(raw, records, path)
    if b"\0" in raw:
        raise DataError(path, f"a binary file (it holds NUL bytes) cannot be cut by lines: write "
                              f"its fixture by hand under {out}")
    text = raw.decode("utf-8", errors="surrogateescape")
    lines = head_lines(text.splitlines(keepends=True), records)
    return "".join(lines).encode("utf-8", errors="surrogateescape")


def write_fixture(task: str, out: Path = DEFAULT_OUT, records: int = 20) -> list[Path]:
    """Write the heads of ``task``'s mirror files under ``out``; return the files written."""
    from ctxrep.data.sources import _mirror_files

    spec = tasks.dataset(task)
    files, why = _mirror_files(spec)
    if files is None:
        raise DataError(mirror_root() or f"${MIRROR_ENV}",
                        f"cannot cut a fixture of {task}: {why}")
    root, heads, written = Path(mirror_root()), [], []
    for path in files:  # every file is cut before any is written: a refusal leaves no half fixture
        gz = path.suffix == ".gz"
        try:
            with (gzip.open if gz else open)(path, "rb") as f:
                raw = f.read()
        except (gzip.BadGzipFile, EOFError, OSError) as e:
            raise DataError(path, f"cannot be read ({e.__class__.__name__}: {e})") from None
        heads.append((path, gz, cut(path, raw, records, out)))
    for path, gz, data in heads:
        target = out / path.relative_to(root)
        with atomic_file(target, "wb") as f:
            f.write(gzip.compress(data, mtime=0) if gz else data)
        written.append(target)
    return written


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("task", help="a task of the registry")
    ap.add_argument("--records", type=int, default=20,
                    help="records kept per file: non-blank lines (whole blank-line blocks), "
                         "or an XML root's children (default 20)")
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
