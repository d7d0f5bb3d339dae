"""The report's sentences about pretraining and probing, decided from the numbers.

Transfer claims are judged in one place, :mod:`ctxrep.analysis.claims`, from their bootstrap
CIs; this module holds a sentence's record and its comparison as the report prints it
(:func:`relation`), and turns the biLM's layer probe into sentences; each family's checks of
its pretraining are its report part's (:mod:`ctxrep.report.parts`).
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
