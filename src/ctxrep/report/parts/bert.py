"""BERT's part of the report (:mod:`ctxrep.report.parts`): the paper's scale beside ours, its
weights and the published BERT's, its held-out masked-LM accuracy against the most frequent
token, its pseudo-perplexity on another domain, its loss panel, and the methods that start from
published weights (marked † in the tables)."""

from __future__ import annotations

from ctxrep.families.bert import FAMILY, PRETRAINING, PUBLISHED_NAME, PUBLISHED_STAGE
from ctxrep.report.findings import Finding, relation
from ctxrep.report.formatting import fmt_float, fmt_int, fmt_pct, missing_file
from ctxrep.report.inputs import ReportInputs, imported_record

NAME = FAMILY.name
WEIGHTS = ((NAME, FAMILY.label), (PUBLISHED_NAME, f"published BERT ({PUBLISHED_STAGE})"))


def scale(inputs: ReportInputs) -> str:
    ours = inputs.pretrain.get(NAME) or {}
    said = (f"ours is a {fmt_int(ours.get('params'))}-parameter model that saw "
            f"{fmt_int(ours.get('train_tokens'))} tokens" if ours else "ours has not been trained")
    if (record := imported_record(inputs, NAME)) is not None:
        said = f"this run uses a published checkpoint (`{record['path']}`)"
    sizes = " / ".join(f"{name} {size}" for name, size in PRETRAINING["sizes"].items())
    return (f"- BERT was pretrained on {PRETRAINING['corpus']} ({sizes}); {said}. "
            f"(seed `{PRETRAINING['seed_file']}`)")


def _published(record: dict, metrics: dict | None) -> str:
    """One sentence on an imported BERT: where from, what it is, what cannot be evaluated."""
    metrics = metrics or {}
    package = record.get("package")
    where = (f"`{package['distribution']}=={package['version']}` from the package index "
             f"(`{record['path']}`): {package['what']}" if package
             else f"the published checkpoint imported from `{record['path']}`")
    heads = ("; it has no MLM head, so its masked-LM evaluation is skipped"
             if metrics.get("mlm_head") is False else "")
    return (f"{where}. Its own WordPiece vocabulary ({fmt_int(metrics.get('vocab_size'))} entries), "
            f"{fmt_int(metrics.get('params'))} parameters; not pretrained here{heads}.")


def model_lines(inputs: ReportInputs) -> list[str]:
    bert = inputs.pretrain.get(NAME)
    if (record := imported_record(inputs, NAME)) is not None:
        lines = [f"- BERT: {_published(record, bert)}"]
    elif bert is None:
        lines = ["- BERT: " + missing_file(f"metrics/pretrain_{NAME}.json")]
    else:
        lines = [f"- BERT: {fmt_int(bert.get('params'))} parameters, held-out MLM loss "
                 f"{fmt_float(bert.get('val_mlm_loss'), '.3f')}, MLM accuracy "
                 f"{fmt_pct(bert, 'val_mlm_acc')}% (most-frequent token "
                 f"{fmt_pct(bert, 'val_mlm_acc_most_frequent')}%), at [MASK] positions "
                 f"{fmt_pct(bert, 'val_mlm_acc_at_mask')}% (most-frequent token "
                 f"{fmt_pct(bert, 'val_mlm_acc_at_mask_most_frequent')}%), NSP accuracy "
                 f"{fmt_pct(bert, 'val_nsp_acc')}%."]
    if (record := imported_record(inputs, PUBLISHED_NAME)) is not None:
        users = sorted(f"`{c.method}` on {task}" for task, cells in inputs.transfer.items()
                       for c in cells.values() if c.start == PUBLISHED_STAGE)
        used = (f"these fine-tuning cells start from it: {', '.join(users)}"
                if users else "no cell of this grid uses it")
        lines.append(f"- published BERT (`{PUBLISHED_STAGE}`, beside the BERT above): "
                     f"{_published(record, inputs.pretrain.get(PUBLISHED_NAME))} "
                     f"In this run {used}.")
    return lines


def out_of_domain(mlm: dict, text: dict, bert: dict | None) -> str:
    if "unavailable" in mlm:
        return f"BERT not scored ({mlm['unavailable']})"
    return (f"BERT pseudo-perplexity {fmt_float(mlm['pseudo_perplexity'])}, masked-token "
            f"accuracy {100 * mlm['mlm_accuracy']:.1f}% on {mlm['tokens']} WordPiece "
            f"positions, {100 * mlm['oov_rate']:.1f}% `[UNK]` (`ctxrep perplexity "
            f"{FAMILY.model_dir} {text['path']} --max-tokens {mlm['tokens']}`)")


def pretraining_findings(pretrain: dict[str, dict | None]) -> list[Finding]:
    bert, findings = pretrain.get(NAME), []
    if bert and "val_mlm_acc_at_mask" in bert and "val_mlm_acc_at_mask_most_frequent" in bert:
        # Judged at [MASK] positions: over all chosen positions, copying the 10 % kept tokens
        # lifts a model that has learned only frequencies well above the most-frequent rate.
        rel = relation(100 * bert["val_mlm_acc_at_mask"],
                       100 * bert["val_mlm_acc_at_mask_most_frequent"])
        ok = rel == "above" and bert["val_mlm_acc_at_mask"] >= 1.5 * bert[
            "val_mlm_acc_at_mask_most_frequent"]
        findings.append(Finding(ok, (
            f"BERT's held-out accuracy at [MASK] positions ({100 * bert['val_mlm_acc_at_mask']:.1f}%; "
            f"{100 * bert.get('val_mlm_acc', float('nan')):.1f}% over every chosen position, "
            f"copies of kept tokens included) is {rel} always predicting the most frequent "
            f"token ({100 * bert['val_mlm_acc_at_mask_most_frequent']:.1f}%)"
            + ("." if ok else ": at this scale the MLM has not learned much beyond frequencies "
               "(it needs 1.5 x that rate to count as learning from context).")
        )))
    elif bert and "val_mlm_acc" in bert and "val_mlm_acc_most_frequent" in bert:
        rel = relation(100 * bert["val_mlm_acc"], 100 * bert["val_mlm_acc_most_frequent"])
        ok = rel == "above"
        findings.append(Finding(ok, (
            f"BERT's held-out masked-token accuracy ({100 * bert['val_mlm_acc']:.1f}%) is "
            f"{rel} always predicting the most frequent token "
            f"({100 * bert['val_mlm_acc_most_frequent']:.1f}%)"
            + ("." if ok else ": at this scale the MLM has not learned more than frequencies.")
        )))
    if bert and bert.get("val_nsp_acc") is not None:
        rel = relation(100 * bert["val_nsp_acc"], 50.0)
        findings.append(Finding(rel == "above", (
            f"BERT's next-sentence accuracy ({100 * bert['val_nsp_acc']:.1f}%) is "
            f"{rel} chance (50%).")))
    return findings


def loss_curve(bert: dict) -> tuple[dict[str, float], str]:
    return {}, ("train loss (MLM + NSP)" if bert.get("val_nsp_acc") is not None
                else "train loss (MLM)")


def published_methods(inputs: ReportInputs) -> set[str]:
    """The methods whose cells start from published BERT weights rather than a BERT pretrained
    here: fine-tuning from the published BERT, and every BERT method when this family's
    pretraining imported its weights."""
    cells = [c for task_cells in inputs.transfer.values() for c in task_cells.values()]
    marked = {c.method for c in cells if c.start == PUBLISHED_STAGE}
    if (inputs.weights.get(NAME) or {}).get("source") == "import":
        marked |= {c.method for c in cells if c.method.startswith(f"{NAME}-")}
    return marked


def headline_sentence(bert: dict) -> str:
    return (f"**BERT** (pretrained here): held-out masked-token accuracy "
            f"{100 * bert['val_mlm_acc_at_mask']:.1f} % at [MASK], "
            f"{bert['train_tokens'] / 1e6:.2f} M training tokens.")
