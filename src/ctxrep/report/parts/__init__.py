"""Each core family's own part of the report, one module each (``parts/<family>.py``, listed in
its family's ``MODULES``): what the report says about that family alone — the papers' scale
beside ours, where its weights came from, its model line, its score on another domain, its
sanity checks against trivial predictors, its pretraining-loss panel — so that the report's
sections ask the families in turn and name none.

A part module holds ``NAME`` (its family's) and any of these (absent: it adds nothing there):

    WEIGHTS                          ((weights record name, label), ...): "## Weights"
    scale(inputs) -> str             its line of "## Scale: the papers vs this run"
    model_lines(inputs) -> [str]     its lines of "## Data and models"
    out_of_domain(scores, text, pretrain) -> str   its part of the out-of-domain line
    pretraining_findings(pretrain) -> [Finding]    "## Other checks": against trivial predictors
    loss_curve(pretrain) -> (references, train label)   its "## Pretraining loss" panel
    published_methods(inputs) -> {method}          its methods that start from published weights
    headline_sentence(headlines) -> str   its sentence of the README's scores block (its
                                     metrics/headline.json "pretrain" entry, when it has one)

Modules only the report imports: editing a family's report prose reruns the report alone.
"""

from __future__ import annotations

from ctxrep.families import NAMES
from ctxrep.report.findings import Finding
from ctxrep.report.inputs import ReportInputs
from ctxrep.report.parts import bert, bilm

PARTS = {part.NAME: part for part in (bilm, bert)}
if tuple(PARTS) != NAMES:   # one part per core family, in the catalogue's order
    raise ImportError(f"ctxrep.report.parts holds {tuple(PARTS)}, the core families are {NAMES}")


def _each(hook: str):
    return [getattr(part, hook) for part in PARTS.values() if hasattr(part, hook)]


def weights() -> list[tuple[str, str]]:
    return [entry for part in PARTS.values() for entry in getattr(part, "WEIGHTS", ())]


def scale_lines(inputs: ReportInputs) -> list[str]:
    return [scale(inputs) for scale in _each("scale")]


def model_lines(inputs: ReportInputs) -> list[str]:
    return [line for lines in _each("model_lines") for line in lines(inputs)]


def out_of_domain(intrinsic: dict, pretrain: dict) -> list[str]:
    text = intrinsic["text"]
    return [part.out_of_domain(intrinsic.get(name, {}), text, pretrain.get(name))
            for name, part in PARTS.items() if hasattr(part, "out_of_domain")]


def pretraining_findings(pretrain: dict[str, dict | None]) -> list[Finding]:
    """Sanity of the pretrained models: better than the trivial predictor on held-out text,
    judged on the numbers as printed (one decimal)."""
    return [f for check in _each("pretraining_findings") for f in check(pretrain)]


def loss_curves(pretrain: dict[str, dict | None]) -> tuple[dict, dict]:
    """(family → its reference lines, family → its train-loss label) for the loss figure."""
    references, labels = {}, {}
    for name, part in PARTS.items():
        if hasattr(part, "loss_curve"):
            lines, labels[name] = part.loss_curve(pretrain.get(name) or {})
            if lines:
                references[name] = lines
    return references, labels


def published_methods(inputs: ReportInputs) -> set[str]:
    return {m for methods in _each("published_methods") for m in methods(inputs)}


def headline_sentences(pretrain_headlines: dict[str, dict]) -> list[str]:
    """Each family's sentence on its pretraining headlines (``ctxrep docs``' scores block)."""
    return [part.headline_sentence(pretrain_headlines[name]) for name, part in PARTS.items()
            if pretrain_headlines.get(name) and hasattr(part, "headline_sentence")]
