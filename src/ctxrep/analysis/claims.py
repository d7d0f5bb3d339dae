"""The papers' claims, each a paired comparison judged from a bootstrap confidence interval.

A claim says ``better`` scores above ``worse`` on a task. Its difference Δ (seed means, same
evaluation examples) and 95 % CI come from :func:`ctxrep.analysis.bootstrap.paired_difference`;
the verdict is read off the interval, never off a point estimate:

    reproduced     the whole CI is above 0
    contradicted   the whole CI is below 0
    inconclusive   the CI contains 0 (the data cannot tell the two apart)

The claims are their families' (``CLAIMS`` of ``ctxrep/families/<name>.py``, composed by
:mod:`ctxrep.families`); their sources are the seed documents the project was created from
(``../shared/seeds/``): 004 (the ELMo paper, tables and ablations), 000 and 003 (ELMo and BERT
explainers).
"""

from __future__ import annotations

from dataclasses import dataclass

from ctxrep.analysis.bootstrap import Interval, paired_difference
# Each family's module states its papers' claims (ctxrep.families composes them, in order).
from ctxrep.families import CLAIMS, FIRST_LAYER, LAYER_CLAIMS, TOP_LAYER, Claim  # noqa: F401 (the report's)


# Tasks that stand in for the one a paper judged its claim on: the report says so under every
# claims table that judges one of them.
STAND_INS = {
    "sick": "SICK (3-way entailment on 10 k sentence pairs) stands in for SNLI (550 k pairs), "
            "which the data mirror does not hold",
    "squad": "SQuAD is trained on 80 % of the v1.1 dev set's articles and evaluated on the other "
             "20 % (`data.squad_train_fraction`): the mirror holds only the dev set, not the "
             "87 k-question training set the papers used",
}


def layer_runs(layers: list) -> dict[str, list]:
    """The first and top biLSTM layers' probe statistics as two single-run "methods" (layer 0 is
    the context-free token layer; a biLM with one LSTM layer has no comparison to make)."""
    return {FIRST_LAYER: [layers[1]], TOP_LAYER: [layers[-1]]} if len(layers) >= 3 else {}


def verdict(interval: Interval) -> str:
    if interval.low > 0:
        return "reproduced"
    if interval.high < 0:
        return "contradicted"
    return "inconclusive"


@dataclass(frozen=True)
class Judgement:
    claim: Claim
    task: str
    difference: Interval
    verdict: str

    def as_dict(self) -> dict:
        return {"better": self.claim.better, "worse": self.claim.worse, "task": self.task,
                "claim": self.claim.statement, "source": self.claim.source,
                **self.difference.as_dict(), "verdict": self.verdict}


def judge_all(runs: dict[str, dict[str, list]], statistic: dict[str, str],
              claims=CLAIMS) -> list[Judgement]:
    """``runs``: task → method → per-seed example statistics; ``statistic``: task → the
    statistic of its primary metric. One judgement per claim and task with both methods."""
    out = []
    for claim in claims:
        for task, methods in runs.items():
            if claim.tasks is not None and task not in claim.tasks:
                continue
            if claim.better in methods and claim.worse in methods:
                interval = paired_difference(statistic[task], methods[claim.better],
                                             methods[claim.worse])
                out.append(Judgement(claim, task, interval, verdict(interval)))
    return out


def unjudged(judgements: list[Judgement], claims=CLAIMS) -> list[Claim]:
    """The claims without a judgement: a method they compare, or every task they are claimed
    for, is missing from the runs."""
    judged = {j.claim for j in judgements}
    return [c for c in claims if c not in judged]
