"""The biLM's part of the report (:mod:`ctxrep.report.parts`): ELMo's scale beside ours, its
weights, its held-out and out-of-domain perplexity against a unigram model's, its loss panel."""

from __future__ import annotations

from ctxrep.families.bilm import FAMILY, PRETRAINING
from ctxrep.report.findings import Finding, relation
from ctxrep.report.formatting import fmt_float, fmt_int, missing_file
from ctxrep.report.inputs import ReportInputs, imported_record

NAME = FAMILY.name
WEIGHTS = ((NAME, FAMILY.label),)


def scale(inputs: ReportInputs) -> str:
    ours = inputs.pretrain.get(NAME) or {}
    said = (f"ours saw {fmt_int(ours.get('train_tokens'))} tokens with "
            f"{fmt_int(ours.get('params'))} parameters" if ours else "ours has not been trained")
    if (record := imported_record(inputs, NAME)) is not None:
        said = f"this run uses published weights (`{record['path']}`)"
    return (f"- ELMo's biLM was trained on the {PRETRAINING['corpus']} "
            f"({PRETRAINING['architecture']}); {said}. (seed `{PRETRAINING['seed_file']}`)")


def model_lines(inputs: ReportInputs) -> list[str]:
    bilm = inputs.pretrain.get(NAME)
    if (record := imported_record(inputs, NAME)) is not None:
        return [f"- biLM: the published weights imported from `{record['path']}`, "
                f"{fmt_int((bilm or {}).get('params'))} parameters; not trained or evaluated "
                f"as a language model here (the published files hold no softmax)."]
    if bilm is None:
        return ["- biLM: " + missing_file(f"metrics/pretrain_{NAME}.json")]
    return [f"- biLM: {fmt_int(bilm.get('params'))} parameters "
            f"({fmt_int(bilm.get('params_without_softmax'))} without the softmax), "
            f"held-out perplexity forward {fmt_float(bilm.get('val_ppl_forward'))}, "
            f"backward {fmt_float(bilm.get('val_ppl_backward'))}, mean "
            f"{fmt_float(bilm.get('val_ppl'))} (unigram model "
            f"{fmt_float(bilm.get('unigram_ppl'))}; published biLM "
            f"{PRETRAINING['mean_perplexity']})."]


def out_of_domain(lm: dict, text: dict, bilm: dict | None) -> str:
    if "unavailable" in lm:
        return f"biLM not scored ({lm['unavailable']})"
    unigram = (f"unigram model {fmt_float(lm['unigram_ppl'])}" if lm.get("unigram_ppl")
               is not None else "no unigram reference")
    in_domain = (f"; held-out in domain {fmt_float(bilm.get('val_ppl'))}"
                 if bilm and bilm.get("val_ppl") is not None else "")
    return (f"biLM perplexity {fmt_float(lm['perplexity_mean'])} (forward "
            f"{fmt_float(lm['perplexity_forward'])}, backward "
            f"{fmt_float(lm['perplexity_backward'])}; {unigram}{in_domain}), "
            f"{100 * lm['oov_rate']:.1f}% of its {lm['tokens']} words outside the "
            f"vocabulary (`ctxrep perplexity {FAMILY.model_dir} {text['path']}`)")


def pretraining_findings(pretrain: dict[str, dict | None]) -> list[Finding]:
    bilm = pretrain.get(NAME)
    if not (bilm and "val_ppl" in bilm and "unigram_ppl" in bilm):
        return []
    rel = relation(bilm["val_ppl"], bilm["unigram_ppl"])
    ok = rel == "below"
    return [Finding(ok, (
        f"The biLM's held-out perplexity ({bilm['val_ppl']:.1f}) is "
        f"{rel} a unigram model's ({bilm['unigram_ppl']:.1f})"
        + ("." if ok else ": at this scale it has not learned more than word frequencies.")))]


def loss_curve(bilm: dict) -> tuple[dict[str, float], str]:
    references = ({f"unigram model ({bilm['unigram_ppl']:.1f})": bilm["unigram_ppl"]}
                  if bilm.get("unigram_ppl") is not None else {})
    return references, "train exp(loss)"


def headline_sentence(bilm: dict) -> str:
    ratio = bilm["val_ppl"] / bilm["unigram_ppl"]
    return (f"**biLM**: held-out perplexity {bilm['val_ppl']:.1f} against "
            f"{bilm['unigram_ppl']:.1f} for a unigram model ({ratio:.2f} ×), "
            f"{bilm['train_tokens'] / 1e6:.2f} M training tokens.")
