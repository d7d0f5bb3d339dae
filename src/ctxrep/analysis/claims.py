"""The papers' claims, each a paired comparison judged from a bootstrap confidence interval.

A claim says ``better`` scores above ``worse`` on a task. Its difference Δ (seed means, same
evaluation examples) and 95 % CI come from :func:`ctxrep.analysis.bootstrap.paired_difference`;
the verdict is read off the interval, never off a point estimate:

    reproduced     the whole CI is above 0
    contradicted   the whole CI is below 0
    inconclusive   the CI contains 0 (the data cannot tell the two apart)

Sources are the seed documents the project was created from (``../shared/seeds/``):
004 (the ELMo paper, tables and ablations), 000 and 003 (ELMo and BERT explainers).
"""

from __future__ import annotations

from dataclasses import dataclass

from ctxrep.analysis.bootstrap import Interval, paired_difference
from ctxrep.families import LEFT_TO_RIGHT


@dataclass(frozen=True)
class Claim:
    better: str
    worse: str
    statement: str
    source: str
    tasks: tuple[str, ...] | None = None  # None: claimed for every task


CLAIMS = (
    Claim("elmo", "static", "contextual features beat the context-independent word vectors "
          "they are added to", "ELMo Table 1 (seed 004 §4.1)"),
    Claim("elmo", "elmo-token", "the biLM's contextual layers add to its own token layer",
          "ELMo §3.1, §5.1 (seed 004 §2.3, §2.5)"),
    Claim("elmo", "elmo-avg", "a learned layer mix is at least as good as equal weights",
          "ELMo Table 2 (seed 004)"),
    Claim("elmo-avg", "elmo-last", "all layers (averaged) beat the top layer alone",
          "ELMo Table 2 (seed 004)"),
    Claim("elmo-io", "elmo", "ELMo at the task encoder's input and output beats input only "
          "(for SQuAD and SNLI)", "ELMo Table 3 (seed 004 §3)", tasks=("squad", "sick")),
    Claim("elmo", "elmo-random", "pretraining, not the architecture, makes the biLM's "
          "features useful (the control seed 004 says the paper lacks)", "seed 004 §5 ⑤"),
    Claim("bert-feature", "bert-random", "pretrained BERT features beat the same network "
          "untrained", "BERT §5 feature-based (seed 000/003)"),
    Claim("bert-finetune", "bert-scratch", "fine-tuning a pretrained BERT beats training the "
          "same network from scratch", "BERT §1, §4 (seed 000/003)"),
    Claim("bert-finetune", "bert-feature", "fine-tuning beats frozen BERT features",
          "BERT Table 7 (seed 000/003)"),
    Claim("bert-finetune", "elmo", "fine-tuned BERT beats feature-based ELMo",
          "BERT Tables 1–3 (seed 003)"),
    # each left-to-right LM (ctxrep.families) against BERT, both ways of transfer
    *(Claim(f"bert-{way}", method, "the bidirectional masked LM beats a left-to-right LM of the "
            f"same network, corpus and budget ({how})", "BERT Table 5 (seed 000 §3, 003 §2)")
      for methods in LEFT_TO_RIGHT.values()
      for way, method, how in zip(("feature", "finetune"), methods, ("frozen features", "fine-tuned"))),
)


# Tasks that stand in for the one a paper judged its claim on: the report says so under every
# claims table that judges one of them.
STAND_INS = {
    "sick": "SICK (3-way entailment on 10 k sentence pairs) stands in for SNLI (550 k pairs), "
            "which the data mirror does not hold",
    "squad": "SQuAD is trained on 80 % of the v1.1 dev set's articles and evaluated on the other "
             "20 % (`data.squad_train_fraction`): the mirror holds only the dev set, not the "
             "87 k-question training set the papers used",
}


# Probing claims (ELMo §5.3): the "methods" are the biLM's layers, each probed alone (a linear
# probe per layer, see ctxrep.transfer.probe); the report names them as below.
FIRST_LAYER, TOP_LAYER = "biLM layer 1", "biLM top layer"
LAYER_CLAIMS = (
    Claim(FIRST_LAYER, TOP_LAYER, "part-of-speech is best predicted from the first biLSTM layer",
          "ELMo §5.3 (seed 004)", tasks=("ud_pos",)),
    Claim(TOP_LAYER, FIRST_LAYER, "word sense is best predicted from the top biLSTM layer",
          "ELMo §5.3 (seed 004)", tasks=("wic",)),
)


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
