"""The report's provenance: where the data came from (sources, pins, rows skipped) and which
models were trained or imported, with their sizes beside the papers'."""

from __future__ import annotations

from ctxrep.report.formatting import fmt_int, fmt_pct, missing_file
from ctxrep.families import STATIC, STATIC_SECTION
from ctxrep.report import parts as family_parts
from ctxrep.report.inputs import ReportInputs
from ctxrep.report.tables import MISSING, markdown_table


def data_section(inputs: ReportInputs) -> str:
    lines = ["## Data and models", ""]
    corpus = inputs.corpus_manifest
    if corpus is None:
        lines.append(missing_file("data/raw/corpus/MANIFEST.json"))
    else:
        if corpus.get("fallback"):
            lines += [f"> **FALLBACK CORPUS:** {corpus['fallback']}", ""]
        docs = sum((corpus.get("rows") or {}).values())
        lines.append(f"- Corpus: **{corpus.get('dataset', MISSING)}** from source "
                     f"`{corpus.get('source', MISSING)}`, {docs:,} documents.")
    tok = inputs.tokenize
    if tok is None:
        lines.append("- " + missing_file("metrics/tokenize.json"))
    else:
        lines.append(f"- Tokenized training text: {fmt_int(tok.get('train_docs'))} documents, "
                     f"{fmt_int(tok.get('train_sentences'))} sentences, "
                     f"{fmt_int(tok.get('train_words'))} words = "
                     f"{fmt_int(tok.get('train_wordpieces'))} WordPieces (vocabulary "
                     f"{fmt_int(tok.get('wordpiece_vocab_size'))}); held-out "
                     f"{fmt_int(tok.get('validation_words'))} words; biLM word OOV rate "
                     f"{fmt_pct(tok, 'train_oov_rate')}%.")
    lines += ["", task_table(inputs), "", *model_lines(inputs)]
    return "\n".join(lines)


def pin_cell(manifest: dict) -> str:
    """Whether the task's mirror files were checked against sha256 pins in the registry."""
    pins = manifest.get("sha256_pins")
    if not pins:
        return MISSING  # not read from the mirror (Hub, package), or fetched before pins were recorded
    pinned, total = len(pins["pinned"]), len(pins["pinned"]) + len(pins["unpinned"])
    if pinned == 0:
        return "**unpinned**"
    state = "pinned" if pinned == total else f"{pinned} of {total} files pinned"
    return state + (", checked" if pins["checked"] else ", not checked (data.verify_sha256 off)")


def task_table(inputs: ReportInputs) -> str:
    """Every fetched task (not only the grid's): where it came from, whether its files are
    pinned to the published sha256, or why it is missing."""
    rows, unavailable, skips = [], [], []
    for task in inputs.task_manifests:
        manifest = inputs.task_manifests.get(task)
        if manifest is None:
            rows.append([task, "not fetched", MISSING, MISSING, MISSING])
        elif not manifest.get("available", False):
            rows.append([task, "**unavailable**", MISSING, MISSING, MISSING])
            reason = manifest.get("reason", "no reason given")
            unavailable.append(f"- `{task}` is unavailable: {reason}")
        else:
            sizes = ", ".join(f"{split} {n:,}" for split, n in (manifest.get("rows") or {}).items())
            status = "available" + (" (fallback)" if manifest.get("fallback") else "")
            rows.append([task, status, manifest.get("source", MISSING), sizes, pin_cell(manifest)])
            if (line := skipped_rows_line(task, manifest)) is not None:
                skips.append(line)
    table = markdown_table(["task", "status", "source", "examples", "sha256"], rows)
    notes = []
    if any("unpinned" in row[4] or " of " in row[4] for row in rows):
        notes.append("An unpinned task's mirror files were used as found: `ctxrep pin <task>` "
                     "pins the published files' sha256 in the registry, and fetch then checks them.")
    return "\n".join([table, "", *unavailable, *skips, *notes]).rstrip()


def skipped_rows_line(task: str, manifest: dict) -> str | None:
    """The line "N malformed rows skipped (file:line …)" for a task whose reader skipped any
    (``DatasetSpec.skip_malformed``), else None."""
    skipped = manifest.get("skipped_rows") or {}
    count = skipped.get("count", 0)
    if not count:
        return None
    where = ", ".join(f"{r.get('file', MISSING)}:{r.get('line', MISSING)}"
                      for r in skipped.get("rows", []))
    more = count - len(skipped.get("rows", []))
    where += f" and {more} more" if more > 0 else ""
    return (f"- `{task}`: {count} malformed row{'s' if count != 1 else ''} skipped ({where}; "
            f"`skip_malformed={skipped.get('limit', MISSING)}` in the registry)")


def _out_of_domain(intrinsic: dict | None, pretrain: dict) -> str:
    """The models on the out-of-domain text (stage intrinsic), with the command that
    reproduces each number."""
    if intrinsic is None:
        return "- out-of-domain text: " + missing_file("metrics/intrinsic.json")
    text = intrinsic["text"]
    if "unavailable" in text:
        return f"- out-of-domain text: not scored ({text['unavailable']})."
    head = (f"- out-of-domain text: the first {text['lines']} sentences of `{text['task']}` "
            f"({text['split']}), `{text['path']}`")
    return head + ": " + "; ".join(family_parts.out_of_domain(intrinsic, pretrain)) + "."


def model_lines(inputs: ReportInputs) -> list[str]:
    lines = family_parts.model_lines(inputs)
    lines.append(_out_of_domain(inputs.intrinsic, inputs.pretrain))
    static = inputs.pretrain.get(STATIC)
    if static is None:
        lines.append("- static word vectors: " + missing_file(f"metrics/{STATIC_SECTION}.json"))
    else:
        lines.append(f"- static word vectors (word2vec, the x_k of the feature-based methods): "
                     f"{fmt_int(static.get('vocab_size'))} words × {fmt_int(static.get('dim'))} "
                     f"dimensions from {fmt_int(static.get('train_words'))} training words; "
                     f"{fmt_pct(static, 'heldout_oov_rate')}% of held-out words have no vector "
                     f"(x_k = 0).")
    if (oov := task_oov_line(inputs)) is not None:
        lines.append(oov)
    return lines


def word_vector_oov_rates(inputs: ReportInputs) -> dict[str, float]:
    """task -> the share of its evaluated split's words with no static vector
    (``word_vector_oov_rate``), from its ``static`` cell, else from any cell that read the
    vectors (the same vectors and split give the same rate)."""
    rates = {}
    for task in inputs.tasks:
        cells = inputs.transfer.get(task, {})
        ordered = [cells[STATIC]] if STATIC in cells else []
        ordered += [c for m, c in cells.items() if m != STATIC]
        rate = next((c.word_vector_oov_rate for c in ordered
                     if c.word_vector_oov_rate is not None), None)
        if rate is not None:
            rates[task] = rate
    return rates


def task_oov_line(inputs: ReportInputs) -> str | None:
    """The line giving each task's ``word_vector_oov_rate``: a few per cent on tokenized text,
    many more on raw sentences that were not tokenized (docs/adding-a-task.md, step 2); None
    where no cell recorded one."""
    rates = word_vector_oov_rates(inputs)
    if not rates:
        return None
    each = ", ".join(f"{task} {100 * rate:.1f}%" for task, rate in rates.items())
    return (f"- task words with no static vector (`word_vector_oov_rate`, on each task's "
            f"evaluated split): {each}.")


