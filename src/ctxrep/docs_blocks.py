"""``ctxrep docs``: the numbers of README.md and docs/*.md, written from the committed records.

A generated block sits between two marker lines, each alone on its line::

    <!-- ctxrep:begin NAME -->
    … written by `ctxrep docs`, never by hand …
    <!-- ctxrep:end NAME -->

``ctxrep docs`` rewrites every block of README.md and docs/*.md (not docs/notebook/, whose
dated notes keep the numbers of their day) from the records git tracks; ``ctxrep docs --check``
writes nothing and exits 1 naming each block that differs (tests/test_docs_blocks.py runs it).
The blocks (:data:`BLOCKS`) and the records they read:

    claims-default   metrics/summary.json's claims (metrics/claims.json must agree), its cells
                     and baselines (the flags), params.yaml (which methods use a published BERT)
    scores-default   metrics/summary.json: every cell's score and CI, baselines, pretraining
    run-default      metrics/run.json (ctxrep.run_record): the run's time, machine, date, commit
    budgets          bench/results/budgets.json (bench/time_budgets.py): make test, .ci/run and
                     make repro timed from a fresh clone

An unknown block name, a begin without its end, or a missing record is an error naming the file
and line (exit status 2).
"""

from __future__ import annotations

import argparse
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from ctxrep.errors import InputError
from ctxrep.families import STARTING_POINT_KEY
from ctxrep.report import parts as family_parts

MARKER = re.compile(r"^<!-- ctxrep:(begin|end) ([A-Za-z0-9_.-]+) -->$")
SUMMARY, HEADLINE, CLAIMS = (Path("metrics/summary.json"), Path("metrics/headline.json"),
                             Path("metrics/claims.json"))
RUN, BUDGETS, PARAMS = Path("metrics/run.json"), Path("bench/results/budgets.json"), Path("params.yaml")
BUDGET_LIMITS_MIN = {"test": 15, "ci": 30, "repro": 30}  # issue 60: from a fresh clone
BUDGET_COMMANDS = {"test": "make test", "ci": ".ci/run", "repro": "make repro"}

# Each claim's source (ctxrep.analysis.claims, report.evidence) in words a reader without the
# seed documents understands; "seed NNN" is the explainer the project was started from.
SOURCES_IN_WORDS = {
    "ELMo Table 1 (seed 004 §4.1)": "ELMo paper, Table 1 (its main results)",
    "ELMo §3.1, §5.1 (seed 004 §2.3, §2.5)": "ELMo paper, §3.1 and §5.1 (all layers vs the "
                                             "token layer)",
    "ELMo Table 2 (seed 004)": "ELMo paper, Table 2 (layer weighting)",
    "ELMo Table 3 (seed 004 §3)": "ELMo paper, Table 3 (where ELMo enters the task model)",
    "seed 004 §5 ⑤": "a control the ELMo paper does not run: the same biLM untrained",
    "BERT §5 feature-based (seed 000/003)": "BERT paper, §5.3 (the feature-based approach)",
    "BERT §1, §4 (seed 000/003)": "BERT paper, §1 and §4 (pretraining, then fine-tuning)",
    "BERT Table 7 (seed 000/003)": "BERT paper, Table 7 (fine-tuning vs features, NER)",
    "BERT Tables 1–3 (seed 003)": "BERT paper, Tables 1–3 (BERT beats ELMo on GLUE and SQuAD)",
    "BERT Table 5 (seed 000 §3, 003 §2)": "BERT paper, Table 5 (masked LM vs left-to-right LM)",
    "ELMo §5.3 (seed 004)": "ELMo paper, §5.3 (what each biLM layer captures)",
    "ELMo §5.4, Fig. 1 (seed 004)": "ELMo paper, §5.4 and Figure 1 (sample efficiency)",
}
# Claim statements that cite a seed document, in words.
STATEMENTS_IN_WORDS = {
    "the control seed 004 says the paper lacks": "a control the paper lacks",
}
SEED_REFERENCE = re.compile(r"\bseeds? \d{3}\b")

VERDICT_RULE = ("Verdict rule: Δ = better − worse, in points, of seed means on the same "
                "evaluation examples; its 95 % CI is a paired bootstrap (1,000 resamples of the "
                "examples and of the seeds, the 2.5th and 97.5th percentiles): **reproduced** "
                "when the whole CI is above 0, **contradicted** when it is wholly below 0, "
                "**inconclusive** when it contains 0.")


@dataclass
class Records:
    """The records under ``root``, each read once, on first use; a missing or unreadable one is
    an :class:`InputError` naming it."""

    root: Path
    _cache: dict = field(default_factory=dict)

    def json(self, path: Path):
        if path not in self._cache:
            file = self.root / path
            try:
                self._cache[path] = json.loads(file.read_text(encoding="utf-8"))
            except FileNotFoundError:
                raise InputError(f"{path}: missing (a generated block is written from it)") from None
            except (OSError, ValueError) as e:
                raise InputError(f"{path}: unreadable ({e})") from None
        return self._cache[path]

    def params(self) -> dict:
        if PARAMS not in self._cache:
            import yaml

            try:
                self._cache[PARAMS] = yaml.safe_load((self.root / PARAMS).read_text()) or {}
            except FileNotFoundError:
                raise InputError(f"{PARAMS}: missing (a generated block is written from it)") from None
        return self._cache[PARAMS]


# ------------------------------------------------------------------------------------------
# numbers as the docs write them


def points(value: float) -> str:
    """A fraction as signed points with one decimal and a true minus sign: 0.0336 -> +3.4."""
    return f"{value * 100:+.1f}".replace("-", "−")


def percent(value: float) -> str:
    return f"{value * 100:.1f}"


def interval(low: float, high: float) -> str:
    return f"[{percent(low)}, {percent(high)}]".replace("-", "−")


def duration(seconds: float) -> str:
    """1807 -> "30 min 7 s"; 3725 -> "1 h 2 min"."""
    seconds = int(round(seconds))
    if seconds >= 3600:
        return f"{seconds // 3600} h {seconds % 3600 // 60} min"
    if seconds >= 60:
        return f"{seconds // 60} min {seconds % 60} s"
    return f"{seconds} s"


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header),
            *("| " + " | ".join(row) + " |" for row in rows)]


def in_words(source: str) -> str:
    """A claim's source without references to the seed documents (an error if one is new)."""
    words = SOURCES_IN_WORDS.get(source, source)
    if SEED_REFERENCE.search(words):
        raise InputError(f"claim source {source!r} cites a seed document: add its words to "
                         f"ctxrep.docs_blocks.SOURCES_IN_WORDS")
    return words


def statement_in_words(statement: str) -> str:
    for cited, words in STATEMENTS_IN_WORDS.items():
        statement = statement.replace(cited, words)
    if SEED_REFERENCE.search(statement):
        raise InputError(f"claim {statement!r} cites a seed document: add its words to "
                         f"ctxrep.docs_blocks.STATEMENTS_IN_WORDS")
    return statement


# ------------------------------------------------------------------------------------------
# the claims table


def published_bert_methods(params: dict) -> dict[str, str]:
    """method -> the published checkpoint it starts from instead of a BERT pretrained here:
    fine-tuning from ``import_bert`` (``transfer.<method>.bert``), and every BERT method when
    ``pretrain_bert.source`` imports its weights (as ctxrep.report.evidence marks them †)."""
    checkpoint = (params.get("import_bert") or {}).get("checkpoint", "a published BERT")
    methods = {m: checkpoint for m, section in (params.get("transfer") or {}).items()
               if isinstance(section, dict) and section.get(STARTING_POINT_KEY) == "import_bert"}
    if (params.get("pretrain_bert") or {}).get("source") == "import":
        methods.update({m: "a published BERT" for m in params.get("transfer") or {}
                        if m.startswith("bert-")})
    return methods


def cell_flags(summary: dict, task: str, method: str) -> list[str]:
    """What makes a compared cell trivial: a degenerate seed (one label for nearly every
    example), a seed that did not learn, or a mean at the task's majority baseline within the
    cell's spread (its seeds' std or half its CI, whichever is wider)."""
    cell = (summary.get("cells") or {}).get(task, {}).get(method)
    if not cell:
        return []
    flags = []
    if cell.get("degenerate"):
        flags.append(f"⚠ `{method}` degenerate (a seed predicts one label)")
    if cell.get("did_not_learn"):
        flags.append(f"⚠ `{method}` did not learn (a seed's loss never fell)")
    majority = (summary.get("baselines") or {}).get(task, {}).get("majority")
    if majority is not None and "mean" in cell:
        low, high = cell.get("ci95") or (cell["mean"], cell["mean"])
        spread = max(cell.get("std") or 0.0, (high - low) / 2)
        if abs(cell["mean"] - majority) <= spread:
            flags.append(f"⚠ `{method}` at the majority baseline ({percent(cell['mean'])} vs "
                         f"{percent(majority)})")
    return flags


def claims_block(records: Records, profile: str = "default") -> list[str]:
    summary, counts = records.json(SUMMARY), records.json(HEADLINE).get("claims", {})
    claims = summary.get("claims") or []
    check_claims_agree(claims, records.json(CLAIMS))
    from ctxrep.analysis.claims import STAND_INS as task_stand_ins

    stand_ins = published_bert_methods(records.params())
    rows, used, tasks_used = [], {}, set()
    for c in claims:
        flags = [flag for m in (c["better"], c["worse"]) for flag in cell_flags(summary, c["task"], m)]
        published = {m: stand_ins[m] for m in (c["better"], c["worse"]) if m in stand_ins}
        used.update(published)
        if published:
            flags.append("† stand-in checkpoint")
        if c["task"] in task_stand_ins:
            flags.append(f"‡ `{c['task']}` is a stand-in task")
            tasks_used.add(c["task"])
        low, high = c["ci95"]
        rows.append([statement_in_words(c["claim"]), in_words(c["source"]), c["task"],
                     f"`{c['better']}` − `{c['worse']}`",
                     f"{points(c['estimate'])} {interval(low, high)}",
                     f"**{c['verdict']}**", "; ".join(flags) or "—"])
    lines = table(["claim", "source", "task", "comparison", "Δ [95 % CI]", "verdict", "caveat"],
                  rows)
    notes = [VERDICT_RULE, ", ".join(f"{counts.get(v, 0)} {v}" for v in
                                     ("reproduced", "contradicted", "inconclusive")) + "."]
    if used:
        notes.append("† " + ", ".join(f"`{m}`" for m in sorted(used)) + " start from "
                     + ", ".join(sorted(set(used.values()))) + " (published weights; "
                     "`bert-scratch`: its architecture and vocabulary, freshly initialised), not "
                     "a BERT pretrained here: a comparison with `elmo` says nothing about the "
                     "architectures.")
    if tasks_used:
        notes.append("‡ " + "; ".join(task_stand_ins[t] for t in sorted(tasks_used)) + ".")
    notes.append(f"_Written by `ctxrep docs` from {SUMMARY}, {HEADLINE} and {PARAMS} of the "
                 f"committed `{profile}` run._")
    return lines + ["", " ".join(notes)]


def check_claims_agree(claims: list[dict], by_pair: dict) -> None:
    """metrics/claims.json (Δ and CI per comparison and task, for `dvc metrics`) says what
    summary.json's claims say, to its four decimals."""
    judged = {(f"{c['better']}_vs_{c['worse']}", c["task"]): c for c in claims}
    for pair, tasks in by_pair.items():
        for task, d in tasks.items():
            c = judged.get((pair, task))
            if c is None or any(abs(a - b) > 6e-5 for a, b in
                                zip((d["delta"], d["low"], d["high"]), (c["estimate"], *c["ci95"]))):
                raise InputError(f"{CLAIMS} and {SUMMARY} disagree on {pair} ({task}): the "
                                 f"records are not of one run")


# ------------------------------------------------------------------------------------------
# scores, the run, the budgets

METRIC_NAMES = {"token_accuracy": "accuracy", "f1": "F1", "accuracy": "accuracy"}


def scores_block(records: Records) -> list[str]:
    summary = records.json(SUMMARY)
    parts = []
    for task, cells in (summary.get("cells") or {}).items():
        baselines = (summary.get("baselines") or {}).get(task, {})
        metric = next(iter(cells.values()), {}).get("metric", "")
        shown = ", ".join(
            f"`{m}` {percent(c['mean'])} {interval(*c['ci95'])} ({c['n_seeds']} seeds)"
            for m, c in cells.items())
        base = ", ".join(f"{name} {percent(v)}" for name, v in baselines.items())
        parts.append(f"**{task}** ({METRIC_NAMES.get(metric, metric)}, %): {shown}; baselines: "
                     f"{base}.")
    pre, intrinsic = summary.get("pretrain") or {}, summary.get("intrinsic") or {}
    parts += family_parts.headline_sentences(pre)
    if intrinsic:
        parts.append(f"**Reuters news of 1996** (stage `intrinsic`): biLM perplexity "
                     f"{intrinsic['bilm_ppl']:.1f}, BERT pseudo-perplexity "
                     f"{intrinsic['bert_pppl']:,.0f}.")
    parts.append(f"_Seed means and 95 % CIs from {SUMMARY}, written by `ctxrep docs`._")
    return [" ".join(parts)]


def machine_words(machine: dict) -> str:
    """{"cores": 2, "memory_gib": 23.5, "model": "AMD EPYC", …} -> "a 2-core, 23.5 GiB AMD EPYC
    (AuthenticAMD, AVX-512)"."""
    size = ", ".join(part for part in (f"{machine['cores']}-core" if machine.get("cores") else "",
                                       f"{machine['memory_gib']} GiB" if machine.get("memory_gib")
                                       else "") if part)
    simd = machine.get("simd") or []
    units = "AVX-512" if "avx512f" in simd else "AVX2" if "avx2" in simd else ""
    detail = ", ".join(part for part in (machine.get("vendor", ""), units) if part)
    return (f"a {size} " if size else "a ") + (machine.get("model") or "CPU of unknown model") + (
        f" ({detail})" if detail else "")


def run_block(records: Records) -> list[str]:
    run = records.json(RUN)
    machine, compute, counts = run.get("machine", {}), run.get("compute", {}), run["stage_counts"]
    timed = sorted(((s["wall_s"], name) for name, s in run["stages"].items()
                    if s["status"] == "ran"), reverse=True)[:3]
    tree = {True: "with uncommitted changes", False: "clean", None: "state unknown"}[run.get("dirty")]
    line = (f"**The run record** (`{RUN}`): profile `{run['profile']}`, `dvc exp run` "
            f"**{duration(run['dvc_wall_s'])}** ({run['started_utc'][:16].replace('T', ' ')}–"
            f"{run['ended_utc'][11:16]} UTC) on {machine_words(machine)}, `compute.isa` "
            f"{compute.get('isa', '?')}, {compute.get('threads', '?')} threads, "
            f"at `{run['commit'][:7]}` ({tree}); {counts.get('ran', 0)} of {len(run['stages'])} "
            f"stages ran ({duration(run['stages_wall_s'])} of stage time; slowest: "
            + ", ".join(f"`{name}` {duration(s)}" for s, name in timed) + f"), "
            f"{counts.get('restored', 0)} restored, {counts.get('untimed', 0)} untimed.")
    if run.get("note"):
        line += f" {run['note']}"
    return [line]


def budgets_block(records: Records) -> list[str]:
    entries = records.json(BUDGETS).get("entries") or []
    latest = {}
    for e in entries:  # appended in time order: the last of each budget is the latest
        if e.get("fresh_clone", True):
            latest[e["budget"]] = e
    rows = []
    for budget in ("test", "ci", "repro"):
        e = latest.get(budget)
        if e is None:
            rows.append([f"`{BUDGET_COMMANDS[budget]}`", f"{BUDGET_LIMITS_MIN[budget]} min",
                         "not measured", "", "", "", "", ""])
            continue
        limit = BUDGET_LIMITS_MIN[budget]
        # A run that failed stopped early: its time says nothing of the budget.
        verdict = ("failed: not a budget time" if e.get("rc") not in (0, None)
                   else "over" if e["seconds"] > limit * 60 else "within")
        result = "exit 0" if e.get("rc") == 0 else f"exit {e.get('rc')}"
        if e.get("passed") is not None:
            result += f", {e['passed']} passed, {e.get('failed', 0)} failed"
        rows.append([f"`{e.get('command') or BUDGET_COMMANDS[budget]}`", f"{limit} min",
                     f"**{duration(e['seconds'])}** ({verdict})", result, f"`{e['commit'][:7]}`",
                     e["date"][:10], f"{e.get('cores', '?')}-core {e.get('cpu', '?')}",
                     e.get("source", "")])
    return table(["command", "budget", "from a fresh clone", "result", "commit", "date",
                  "machine", "source"], rows) + [
        "", f"_From {BUDGETS} (`bench/time_budgets.py {{test,ci,repro}}` appends a timed run from "
            f"a fresh clone), written by `ctxrep docs`._"]


BLOCKS = {
    "claims-default": claims_block,
    "scores-default": scores_block,
    "run-default": run_block,
    "budgets": budgets_block,
}


# ------------------------------------------------------------------------------------------
# finding and rewriting the blocks


def doc_files(root: Path) -> list[Path]:
    """README.md and docs/*.md (not docs/notebook/: dated notes keep their day's numbers)."""
    return [p for p in [root / "README.md", *sorted((root / "docs").glob("*.md"))] if p.is_file()]


@dataclass(frozen=True)
class Block:
    name: str
    begin: int  # index of the begin marker's line
    end: int  # index of the end marker's line


def find_blocks(lines: list[str], where: str) -> list[Block]:
    """The blocks of a file's ``lines``; an error naming ``where`` and the line for an unknown
    name, a begin without its end, an end without its begin, or a block inside another."""
    blocks, open_at = [], None
    for i, line in enumerate(lines):
        m = MARKER.match(line.strip())
        if not m:
            continue
        marker, name = m.groups()
        at = f"{where}:{i + 1}"
        if name not in BLOCKS:
            raise InputError(f"{at}: unknown block {name!r}; known: {', '.join(BLOCKS)}")
        if marker == "begin":
            if open_at is not None:
                raise InputError(f"{at}: block {name!r} begins inside block {open_at[0]!r}")
            open_at = (name, i)
        elif open_at is None or open_at[0] != name:
            raise InputError(f"{at}: end of block {name!r} without its begin")
        else:
            blocks.append(Block(name, open_at[1], i))
            open_at = None
    if open_at is not None:
        raise InputError(f"{where}:{open_at[1] + 1}: block {open_at[0]!r} has no end marker")
    return blocks


def render(name: str, records: Records) -> list[str]:
    if name not in BLOCKS:
        raise InputError(f"unknown block {name!r}; known: {', '.join(BLOCKS)}")
    return BLOCKS[name](records)


def rewrite(text: str, records: Records, where: str) -> tuple[str, list[str]]:
    """``text`` with every block written from ``records``, and the names of those that
    changed. The marker lines are HTML comments, which end where they end: a table or a
    paragraph may follow or precede them with no blank line."""
    lines = text.split("\n")
    changed, out, last = [], [], 0
    for block in find_blocks(lines, where):
        body = render(block.name, records)
        out += lines[last:block.begin + 1] + body
        if lines[block.begin + 1:block.end] != body:
            changed.append(block.name)
        last = block.end
    out += lines[last:]
    return "\n".join(out), changed


def update(root: Path, check: bool) -> list[str]:
    """Rewrite (or with ``check``, only compare) every block under ``root``; returns
    "file: block" for each block that differed."""
    records, differed = Records(root), []
    for path in doc_files(root):
        where = str(path.relative_to(root))
        text = path.read_text(encoding="utf-8")
        new, changed = rewrite(text, records, where)
        differed += [f"{where}: {name}" for name in changed]
        if changed and not check:
            path.write_text(new, encoding="utf-8")
    return differed


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = __doc__
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 naming each block that differs")
    parser.add_argument("--root", type=Path, default=Path("."),
                        help="the repository whose README.md, docs/ and records to use")


def run(args: argparse.Namespace) -> int:
    differed = update(args.root, args.check)
    if args.check:
        for name in differed:
            print(f"ctxrep docs: differs from the records: {name} (run `ctxrep docs`)")
        return 1 if differed else 0
    print(f"ctxrep docs: rewrote {len(differed)} block(s)" +
          (": " + ", ".join(differed) if differed else ", every block was up to date"))
    return 0
