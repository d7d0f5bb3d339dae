"""The report's sentences about pretraining and probing, decided from the numbers.

Transfer claims are judged in one place, :mod:`ctxrep.analysis.claims`, from their bootstrap
CIs; this module turns the pretraining ledger and the biLM's layer probe into sentences, each
compared against its reference as the report prints it (:func:`relation`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ctxrep.analysis.claims import FIRST_LAYER, LAYER_CLAIMS


@dataclass(frozen=True)
class Finding:
    reproduced: bool
    sentence: str


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
