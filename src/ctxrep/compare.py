"""``ctxrep compare [REV]``: does this workspace's run reproduce the committed one?

Where the bytes cannot match by construction (another CPU vendor's MKL branch, a GPU, an ARM
laptop, another BLAS), the question is statistical. Both runs' results are read from
``metrics/summary.json`` (git tracks it, so ``REV``'s is in git before anything runs) and the
outputs' hashes from ``dvc.lock``; one table says, for

- **every claim** (task, better vs worse): both verdicts, both Δs, and whether each Δ lies
  inside the other run's 95 % CI. A verdict that flips is a failed reproduction (exit 1);
- **every cell** (task, method): both means, and whether they agree within the seeds' spread
  (:meth:`CellRow.band`: Student's t times the standard error of the difference of the means
  over seeds; the cells' bootstrap CIs where a side has one seed). A cell outside that band is
  flagged, not failed: a few seeds' spread is a rough yardstick, and the claims are what the
  papers assert;
- **every output** ``dvc.lock`` records in both: bytes identical or not.

It exits 0 when no verdict flips (last bits that move are expected off the committed machine),
1 when one does (the rows are named), 2 when a side has no results. ``make repro`` ends with it
against the commit it ran, when the params it ran are that commit's.
"""

from __future__ import annotations

import json
import math
import subprocess
from dataclasses import dataclass
from pathlib import Path

import yaml

from ctxrep.errors import InputError

SUMMARY = "metrics/summary.json"
LOCK = "dvc.lock"
PARAMS = "params.yaml"
FLIPPED_EXIT, MISSING_EXIT = 1, 2


def git_show(rev: str, path: str, root: Path) -> str | None:
    """``path`` as committed at ``rev``; None when ``rev`` does not hold it."""
    proc = subprocess.run(["git", "show", f"{rev}:{path}"], cwd=root, capture_output=True,
                          text=True)
    return proc.stdout if proc.returncode == 0 else None


def load_summary(text: str | None, where: str) -> dict:
    if text is None:
        raise InputError(f"{where}: no {SUMMARY}; "
                         + ("run the pipeline first (make repro)" if "workspace" in where else
                            "that commit recorded no run's results (git tracks them from the "
                            "commit that added `ctxrep compare` on)"))
    try:
        summary = json.loads(text)
    except ValueError as e:
        raise InputError(f"{where}: {SUMMARY} is not JSON ({e})") from None
    if not isinstance(summary, dict) or not isinstance(summary.get("cells"), dict):
        raise InputError(f"{where}: {SUMMARY} has no 'cells' table")
    return summary


def lock_hashes(text: str | None) -> dict[str, str]:
    """Output path → md5 of a ``dvc.lock``'s text (empty when there is none)."""
    if not text:
        return {}
    data = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) or {}
    return {out["path"]: out.get("md5", "")
            for stage in (data.get("stages") or {}).values() for out in stage.get("outs") or []}


@dataclass(frozen=True)
class ClaimRow:
    task: str
    better: str
    worse: str
    ref: dict | None
    here: dict | None

    @property
    def flipped(self) -> bool:
        return self.ref is not None and self.here is not None \
            and self.ref["verdict"] != self.here["verdict"]


@dataclass(frozen=True)
class CellRow:
    task: str
    method: str
    ref: dict | None
    here: dict | None

    def band(self) -> float | None:
        """How far two means of the same experiment may lie apart by the seeds' noise:
        t·√(s₁²/n₁ + s₂²/n₂), t the 97.5 % quantile of Student's t with min(n₁, n₂) − 1
        degrees of freedom (conservative for few seeds: 12.7 at two, 2.8 at five); where a side
        has one seed, or the seeds agree to the 4 decimals summary.json keeps, the cells'
        bootstrap CI half-widths over examples instead, √(h₁² + h₂²)."""
        a, b = self.ref, self.here
        if a is None or b is None:
            return None
        n = min(a.get("n_seeds", 1), b.get("n_seeds", 1))
        se = math.sqrt(a["std"] ** 2 / max(a.get("n_seeds", 1), 1)
                       + b["std"] ** 2 / max(b.get("n_seeds", 1), 1))
        if n >= 2 and se > 0:
            from scipy.stats import t

            return float(t.ppf(0.975, n - 1)) * se
        half = [(c["ci95"][1] - c["ci95"][0]) / 2 for c in (a, b) if c.get("ci95")]
        return math.sqrt(sum(h * h for h in half)) if len(half) == 2 else None

    @property
    def agrees(self) -> bool | None:
        band = self.band()
        if band is None:
            return None
        return abs(self.ref["mean"] - self.here["mean"]) <= band + 1e-12


def claim_rows(ref: dict, here: dict) -> list[ClaimRow]:
    def keyed(summary):
        return {(c["task"], c["better"], c["worse"]): c for c in summary.get("claims") or []}

    a, b = keyed(ref), keyed(here)
    return [ClaimRow(*key, a.get(key), b.get(key)) for key in sorted(a.keys() | b.keys())]


def cell_rows(ref: dict, here: dict) -> list[CellRow]:
    keys = {(t, m) for s in (ref, here) for t, cells in s["cells"].items() for m in cells}
    return [CellRow(t, m, ref["cells"].get(t, {}).get(m), here["cells"].get(t, {}).get(m))
            for t, m in sorted(keys)]


def inside(x: float, ci) -> bool:
    return bool(ci) and ci[0] <= x <= ci[1]


def claims_table(rows: list[ClaimRow], rev: str) -> list[str]:
    lines = [f"| claim | task | verdict {rev} | verdict here | Δ {rev} [CI] | Δ here [CI] | "
             f"Δ here in {rev}'s CI | Δ {rev} in this CI |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        def cell(c):
            return "—" if c is None else (f"{c['estimate']:+.4f} [{c['ci95'][0]:+.4f}, "
                                          f"{c['ci95'][1]:+.4f}]")
        both = r.ref is not None and r.here is not None
        lines.append(
            f"| {r.better} > {r.worse} | {r.task} | {r.ref['verdict'] if r.ref else '—'} | "
            f"{(r.here['verdict'] if r.here else '—') + (' **FLIPPED**' if r.flipped else '')} | "
            f"{cell(r.ref)} | {cell(r.here)} | "
            f"{('yes' if inside(r.here['estimate'], r.ref['ci95']) else 'no') if both else '—'} | "
            f"{('yes' if inside(r.ref['estimate'], r.here['ci95']) else 'no') if both else '—'} |")
    return lines


def cells_table(rows: list[CellRow], rev: str) -> list[str]:
    lines = [f"| task | method | mean {rev} (sd, seeds) | mean here (sd, seeds) | |Δ| | band | "
             f"agree |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        def cell(c):
            return "—" if c is None else f"{c['mean']:.4f} ({c['std']:.4f}, {c.get('n_seeds', 1)})"
        band, agrees = r.band(), r.agrees
        diff = abs(r.ref["mean"] - r.here["mean"]) if r.ref and r.here else None
        lines.append(f"| {r.task} | {r.method} | {cell(r.ref)} | {cell(r.here)} | "
                     f"{'—' if diff is None else f'{diff:.4f}'} | "
                     f"{'—' if band is None else f'{band:.4f}'} | "
                     f"{'—' if agrees is None else 'yes' if agrees else '**no**'} |")
    return lines


@dataclass
class Comparison:
    rev: str
    claims: list[ClaimRow]
    cells: list[CellRow]
    identical: list[str]
    differing: list[str]
    only_one: list[str]
    same_params: bool

    @property
    def flipped(self) -> list[ClaimRow]:
        return [r for r in self.claims if r.flipped]

    @property
    def one_sided(self) -> list[ClaimRow]:
        return [r for r in self.claims if r.ref is None or r.here is None]

    @property
    def exit_status(self) -> int:
        return FLIPPED_EXIT if self.flipped else 0

    def lines(self) -> list[str]:
        out = [f"ctxrep compare: this workspace against {self.rev}"]
        if not self.same_params:
            out.append(f"note: params.yaml differs from {self.rev}'s beyond compute and launch: "
                       f"the runs are not the same experiment, so differences need not be noise")
        out += ["", "Claims (Δ in the metric's own units):", *claims_table(self.claims, self.rev),
                "", "Cells:", *cells_table(self.cells, self.rev), "",
                f"Outputs (dvc.lock): {len(self.identical)} identical, {len(self.differing)} "
                f"differ, {len(self.only_one)} in one run only"]
        out += [f"  differs: {p}" for p in self.differing[:20]]
        if len(self.differing) > 20:
            out.append(f"  … and {len(self.differing) - 20} more")
        out.append("")
        disagree = [r for r in self.cells if r.agrees is False]
        if self.flipped:
            out.append(f"NOT REPRODUCED: {len(self.flipped)} verdict(s) flipped: " + "; ".join(
                f"{r.better} > {r.worse} on {r.task}: {r.ref['verdict']} → {r.here['verdict']}"
                for r in self.flipped))
        elif not self.identical and not self.differing:
            out.append(f"every verdict judged in both runs as {self.rev}'s; no dvc.lock "
                       f"outputs to compare")
        elif not self.differing and not self.only_one and not self.one_sided:
            out.append(f"reproduced: every output the same bytes as {self.rev}'s")
        else:
            judged = (f"every verdict judged in both as {self.rev}'s; {len(self.one_sided)} "
                      f"claim(s) judged in one run only" if self.one_sided else
                      f"every verdict as {self.rev}'s")
            out.append(f"reproduced within noise: {judged}"
                       + (f"; {len(disagree)} cell(s) outside their seeds' spread: "
                          + ", ".join(f"{r.task}/{r.method}" for r in disagree) if disagree else
                          "; every cell within its seeds' spread"))
        return out


def read(folder: Path, path: str) -> str | None:
    file = folder / path
    return file.read_text() if file.is_file() else None


def compare(rev: str = "HEAD", root: Path | str = ".", against: Path | None = None) -> Comparison:
    """This workspace's results against those committed at ``rev`` (or, with ``against``,
    those of another checkout's workspace: a run on another machine or device); raises
    :class:`InputError` when either side has none."""
    root = Path(root)
    if against is not None:
        if not Path(against).is_dir():
            raise InputError(f"--against {against}: not a folder (name another checkout)")
        name, theirs = str(against), lambda path: read(Path(against), path)
    else:
        if subprocess.run(["git", "rev-parse", "--verify", "-q", f"{rev}^{{commit}}"],
                          cwd=root, capture_output=True).returncode != 0:
            raise InputError(f"{rev!r}: not a commit of this repository")
        name, theirs = rev, lambda path: git_show(rev, path, root)
    ref = load_summary(theirs(SUMMARY), name)
    here = load_summary(read(root, SUMMARY), "this workspace")
    a, b = lock_hashes(theirs(LOCK)), lock_hashes(read(root, LOCK))
    common = sorted(a.keys() & b.keys())
    mine = read(root, PARAMS)
    same = mine is not None and same_experiment(theirs(PARAMS), mine)
    return Comparison(name, claim_rows(ref, here), cell_rows(ref, here),
                      [p for p in common if a[p] == b[p]], [p for p in common if a[p] != b[p]],
                      sorted(a.keys() ^ b.keys()), same)


# Sections that decide how the float work runs, not what is computed: two runs that differ
# only there are the same experiment, whose last bits may differ.
HOW_IT_RAN = ("compute", "launch")


def same_experiment(theirs: str | None, mine: str) -> bool:
    """Whether two params.yaml texts are the same experiment: equal but for
    :data:`HOW_IT_RAN`."""
    if theirs is None:
        return False
    a, b = yaml.safe_load(theirs) or {}, yaml.safe_load(mine) or {}
    return {k: v for k, v in a.items() if k not in HOW_IT_RAN} == \
        {k: v for k, v in b.items() if k not in HOW_IT_RAN}


def add_arguments(parser) -> None:
    parser.add_argument("rev", nargs="?", default="HEAD",
                        help="the commit whose run to compare with (default: HEAD)")
    parser.add_argument("--against", type=Path, metavar="DIR",
                        help="compare with another checkout's run (its metrics/summary.json, "
                             "dvc.lock and params.yaml) instead of a commit")
    parser.add_argument("--out", type=Path, help="also write the table to this file (Markdown)")


def run(args) -> int:
    if args.out is not None and (args.out.is_dir() or not str(args.out).strip()):
        raise InputError(f"--out {str(args.out)!r}: name a file to write, not a folder")
    comparison = compare(args.rev, against=args.against)
    text = "\n".join(comparison.lines())
    print(text)
    if args.out is not None:
        from ctxrep.io import atomic_file

        with atomic_file(args.out) as f:
            f.write(text + "\n")
    return comparison.exit_status
