"""What reproduced at this scale and what did not, decided from the numbers.

Each check states one published claim as a comparison (``better`` should score above ``worse``)
and turns our numbers into a sentence. Nothing here knows the outcome in advance: a claim is
*reproduced* exactly when our mean for ``better`` is above our mean for ``worse``; when the gap
is no larger than the seeds' standard deviation the sentence says so.
"""

from __future__ import annotations

from dataclasses import dataclass

from ctxrep.analysis.claims import FIRST_LAYER, LAYER_CLAIMS
from ctxrep.report.tables import percent_scale
from ctxrep.transfer.record import CellRecord


@dataclass(frozen=True)
class Claim:
    better: str
    worse: str
    statement: str                       # the paper's claim, with its source
    tasks: tuple[str, ...] | None = None  # None: the claim is made for every task


CLAIMS = (
    Claim("elmo", "static", "ELMo (Peters et al. 2018, Table 1): adding ELMo improves over the "
                            "context-free baseline on every task"),
    Claim("elmo", "elmo-last", "ELMo Table 2: a learned mix of all biLM layers beats the top "
                               "layer alone"),
    Claim("elmo", "elmo-avg", "ELMo Table 2: learned layer weights (λ=0.001) beat near-equal "
                              "weights (λ=1)"),
    Claim("elmo-io", "elmo", "ELMo Table 3: on SQuAD, ELMo at the task encoder's input and output "
                             "beats input only", tasks=("squad",)),
    Claim("bert-finetune", "bert-scratch", "BERT (Devlin et al. 2019): pretraining is what makes "
                                           "the fine-tuned model strong; the same architecture "
                                           "trained from scratch does worse"),
    Claim("bert-finetune", "elmo", "BERT: a fine-tuned BERT outperforms feature-based ELMo"),
)


@dataclass(frozen=True)
class Finding:
    reproduced: bool
    sentence: str


def describe(cell: CellRecord) -> str:
    """``61.25 ± 1.20 over 3 seeds`` (percent)."""
    scale = percent_scale(cell.metric)
    spread = f" ± {cell.std * scale:.2f}" if cell.n_seeds > 1 else ""
    return f"{cell.mean * scale:.2f}{spread} over {cell.n_seeds} seed{'s' * (cell.n_seeds > 1)}"


def compare(claim: Claim, task: str, better: CellRecord, worse: CellRecord) -> Finding:
    """``better`` should score above ``worse``: did it?"""
    scale = percent_scale(better.metric)
    gap = abs(better.mean - worse.mean) * scale
    noise = max(better.std, worse.std) * scale
    if better.mean > worse.mean:
        verb = "beats"
    else:
        verb = "ties with" if better.mean == worse.mean else "does not beat"
    sentence = f"On {task}, {claim.better} ({describe(better)}) {verb} {claim.worse} " \
               f"({describe(worse)})"
    if 0 < gap <= noise:
        sentence += f"; the gap ({gap:.2f}) is within one seed standard deviation ({noise:.2f})"
    return Finding(better.mean > worse.mean, f"{sentence}. Claim: {claim.statement}.")


def transfer_findings(tasks: list[str], transfer: dict[str, dict[str, CellRecord]],
                      claims=CLAIMS) -> list[Finding]:
    """One finding per claim and task where both cells exist."""
    findings = []
    for claim in claims:
        for task in tasks:
            cells = transfer.get(task, {})
            if (claim.tasks is None or task in claim.tasks) and \
                    claim.better in cells and claim.worse in cells:
                findings.append(compare(claim, task, cells[claim.better], cells[claim.worse]))
    return findings


def relation(value: float, reference: float, fmt: str = ".1f") -> str:
    """"above", "equal to" or "below": ``value`` against ``reference`` as the report shows
    them (formatted with ``fmt``), so a sentence never calls two equal printed numbers
    different."""
    shown, ref = float(format(value, fmt)), float(format(reference, fmt))
    return "above" if shown > ref else "below" if shown < ref else "equal to"


def pretraining_findings(pretrain: dict[str, dict | None]) -> list[Finding]:
    """Sanity of the pretrained models: better than the trivial predictor on held-out text,
    judged on the numbers as printed (one decimal)."""
    findings = []
    bilm, bert = pretrain.get("bilm"), pretrain.get("bert")
    if bilm and "val_ppl" in bilm and "unigram_ppl" in bilm:
        rel = relation(bilm["val_ppl"], bilm["unigram_ppl"])
        ok = rel == "below"
        findings.append(Finding(ok, (
            f"The biLM's held-out perplexity ({bilm['val_ppl']:.1f}) is "
            f"{rel} a unigram model's ({bilm['unigram_ppl']:.1f})"
            + ("." if ok else ": at this scale it has not learned more than word frequencies.")
        )))
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


# ELMo §5.3's layer claims, as the claims table states them (analysis.claims.LAYER_CLAIMS):
# (task, the layer expected to win, statement). Used only when the probes saved no predictions.
PROBE_CLAIMS = tuple(
    (task, "first" if claim.better == FIRST_LAYER else "top",
     f"{claim.source.split(' (')[0]}: {claim.statement}")
    for claim in LAYER_CLAIMS for task in claim.tasks)
VERDICTS = {"first": "the first layer is better", "top": "the top layer is better",
            "neither": "they tie"}


def probe_findings(bilm_probe: dict | None) -> list[Finding]:
    """Compare the biLM's first and top contextual layers per probed task."""
    if not bilm_probe:
        return []
    findings = []
    for task, expected, statement in PROBE_CLAIMS:
        layers = bilm_probe["tasks"].get(task, {}).get("layers")
        if not layers or len(layers) < 3:    # needs layer 0 plus two contextual layers
            continue
        first, top = layers[1], layers[-1]
        rel = relation(100 * first, 100 * top)     # as printed
        winner = {"above": "first", "below": "top", "equal to": "neither"}[rel]
        findings.append(Finding(winner == expected, (
            f"biLM probe on {task}: layer 1 scores {100 * first:.1f}, the top layer "
            f"({len(layers) - 1}) {100 * top:.1f}: {VERDICTS[winner]}. "
            f"Claim: {statement}.")))
    return findings
