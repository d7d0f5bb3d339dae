"""`ctxrep fixture`: every format it cuts gives a fixture its reader can parse, or it refuses."""

from __future__ import annotations

import gzip
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from ctxrep.cli import main
from ctxrep.data import registry, tasks
from ctxrep.data import schemas as S


def ctxrep_fixture(argv: list[str]) -> int:
    """``ctxrep fixture ARGV...``'s exit status."""
    try:
        return main(["fixture", *argv])
    except SystemExit as end:
        return end.code


def _pairs_xml(n: int) -> str:
    """An RTE-style corpus: ``n`` <pair> records, each over several lines."""
    pairs = "".join(f'  <pair id="{i}" entailment="{"YES" if i % 2 else "NO"}">\n'
                    f"    <t>Text number {i} &amp; more,\n    over two lines.</t>\n"
                    f"    <h>Hypothesis {i}.</h>\n  </pair>\n" for i in range(1, n + 1))
    return f'<?xml version="1.0" encoding="UTF-8"?>\n<entailment-corpus lang="en">\n{pairs}' \
           f"</entailment-corpus>\n"


def _task(monkeypatch, tmp_path: Path, files: dict[str, bytes]) -> str:
    """A registry task whose mirror (a fresh one under ``tmp_path``) holds ``files``."""
    mirror = tmp_path / "mirror"
    for rel, data in files.items():
        (mirror / rel).parent.mkdir(parents=True, exist_ok=True)
        (mirror / rel).write_bytes(data)
    monkeypatch.setenv("CTXREP_DATA_MIRROR", str(mirror))
    spec = registry.DatasetSpec(name="newtask", kind="classification",
                                features=S.classification(["NO", "YES"]), mirror=tuple(files),
                                read_mirror=lambda paths, stats, opts: {})
    known = tasks.dataset
    monkeypatch.setattr(tasks, "dataset", lambda name: spec if name == "newtask" else known(name))
    return "newtask"


def test_an_xml_file_is_cut_by_record_into_well_formed_xml(monkeypatch, tmp_path, capsys):
    task = _task(monkeypatch, tmp_path, {
        "tasks/new/train.xml": _pairs_xml(30).encode(),
        "tasks/new/dev.xml.gz": gzip.compress(_pairs_xml(25).encode())})
    out = tmp_path / "fixtures"
    assert ctxrep_fixture([task, "--out", str(out)]) == 0
    assert "wrote" in capsys.readouterr().out
    data = (out / "tasks/new/train.xml").read_bytes()
    assert data.startswith(b'<?xml version="1.0" encoding="UTF-8"?>\n<entailment-corpus lang="en">')
    root = ET.fromstring(data)
    assert root.tag == "entailment-corpus" and root.attrib == {"lang": "en"}
    pairs = root.findall("pair")
    assert [p.get("id") for p in pairs] == [str(i) for i in range(1, 21)]
    assert pairs[0].findtext("t") == "Text number 1 & more,\n    over two lines."
    assert data.endswith(b"  </pair>\n</entailment-corpus>\n")
    gz = ET.fromstring(gzip.decompress((out / "tasks/new/dev.xml.gz").read_bytes()))
    assert len(gz.findall("pair")) == 20
    # fewer records than asked: the whole file, still well-formed
    assert ctxrep_fixture([task, "--out", str(out), "--records", "50"]) == 0
    assert len(ET.fromstring((out / "tasks/new/train.xml").read_bytes())) == 30


def test_a_json_file_is_refused_before_anything_is_written(monkeypatch, tmp_path, capsys):
    task = _task(monkeypatch, tmp_path, {"tasks/new/train.xml": _pairs_xml(30).encode(),
                                         "tasks/new/dev.json": b'{"data": []}\n'})
    out = tmp_path / "fixtures"
    assert ctxrep_fixture([task, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "dev.json: a JSON file cannot be cut by lines: write its fixture by hand" in err
    assert not out.exists()  # the XML file before it was not written either


@pytest.mark.parametrize("name, data, why", [
    ("train.xml", b"<corpus><pair>a</pair><pair>b</corpus>\n", "not well-formed XML"),
    ("train.zip", b"PK\x03\x04", "an archive or binary file cannot be cut"),
    ("train.bin", b"\x00\x01\x02\n", "binary file (it holds NUL bytes)"),
])
def test_a_file_that_cannot_be_cut_safely_is_named_and_refused(monkeypatch, tmp_path, capsys,
                                                                name, data, why):
    task = _task(monkeypatch, tmp_path, {f"tasks/new/{name}": data})
    assert ctxrep_fixture([task, "--out", str(tmp_path / "fixtures")]) == 2
    err = capsys.readouterr().err
    assert f"tasks/new/{name}: " in err and why in err
    assert not (tmp_path / "fixtures").exists()


def test_line_based_files_are_still_cut_by_lines(monkeypatch, tmp_path):
    lines = "".join(f"gj04\t1\t\tSentence {i}.\n" for i in range(30))
    task = _task(monkeypatch, tmp_path, {"tasks/new/train.tsv": lines.encode()})
    out = tmp_path / "fixtures"
    assert ctxrep_fixture([task, "--out", str(out), "--records", "5"]) == 0
    assert (out / "tasks/new/train.tsv").read_text() == "".join(lines.splitlines(True)[:5])
