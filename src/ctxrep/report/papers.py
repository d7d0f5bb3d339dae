"""The papers' published numbers that the report prints beside ours.

Only numbers that appear in the source documents in ``/work/shared/seeds/`` (Chinese explainers of
Peters et al. 2018 and Devlin et al. 2019) are used; each entry names its paper, table and seed
file. The papers report percentages (accuracy, F1 × 100), so these are percentages too.

Mapping onto this project's tasks and methods:

- ELMo Table 1 "baseline" is the task model without ELMo (GloVe input, context-free): our
  ``static`` (word2vec vectors trained on our corpus, where the paper used GloVe); "baseline +
  ELMo" is our ``elmo``. Shared tasks: SST-5 (``sst5``), CoNLL-2003 NER
  (``conll2003``), SQuAD v1.1 (``squad``; the paper reports its test/dev F1, we score on
  held-out dev articles). The paper's SNLI, SRL and coref have no counterpart here.
- ELMo Table 2 (SQuAD dev F1): "last only" = ``elmo-last``, λ = 1 (strong pull toward equal
  weights) = ``elmo-avg``, λ = 0.001 (learned weights) = ``elmo``.
- ELMo Table 3 (SQuAD): "input only" = ``elmo``, "input + output" = ``elmo-io``.
- BERT: the seed files give no per-task BERT results for our tasks (only model sizes and the
  pretraining corpus), so every BERT cell shows "—".
"""

from __future__ import annotations

from dataclasses import dataclass

# Seed files (under /work/shared/seeds/).
ELMO_EXPLAINER = "004_605a6f4b5c248933.txt"   # ELMo walk-through: Tables 1-3, biLM, probes
ELMO_OVERVIEW = "002_8d12d86fa3a1161d.txt"    # CoVe → ELMo overview; repeats Table 1 (rounded)
BERT_OVERVIEW = "000_fd5599df7007f5cd.txt"    # ELMo and BERT overview; BERT sizes and corpus


@dataclass(frozen=True)
class Published:
    value: float
    source: str          # paper, table and column
    seed_file: str
    std: float | None = None
    decimals: int = 1    # as printed in the paper

    def __str__(self) -> str:
        value = f"{self.value:.{self.decimals}f}"
        return value if self.std is None else f"{value} ± {self.std:.{self.decimals}f}"


_T1 = "Peters et al. 2018, Table 1"
_T2 = "Peters et al. 2018, Table 2 (SQuAD dev F1)"
_T3 = "Peters et al. 2018, Table 3 (SQuAD F1)"

# table -> task -> method -> published number
PUBLISHED: dict[str, dict[str, dict[str, Published]]] = {
    "table1": {
        "sst5": {"static": Published(51.4, f"{_T1}, SST-5 accuracy, baseline", ELMO_EXPLAINER),
                 "elmo": Published(54.7, f"{_T1}, SST-5 accuracy, baseline + ELMo", ELMO_EXPLAINER,
                                   std=0.5)},
        "conll2003": {"static": Published(90.15, f"{_T1}, NER F1, baseline", ELMO_EXPLAINER,
                                          decimals=2),
                      "elmo": Published(92.22, f"{_T1}, NER F1, baseline + ELMo", ELMO_EXPLAINER,
                                        std=0.10, decimals=2)},
        "squad": {"static": Published(81.1, f"{_T1}, SQuAD F1, baseline", ELMO_EXPLAINER),
                  "elmo": Published(85.8, f"{_T1}, SQuAD F1, baseline + ELMo (single model)",
                                    ELMO_EXPLAINER)},
    },
    "table2": {
        "squad": {"elmo-last": Published(84.7, f"{_T2}, last layer only", ELMO_EXPLAINER),
                  "elmo-avg": Published(85.0, f"{_T2}, all layers, λ=1", ELMO_EXPLAINER),
                  "elmo": Published(85.2, f"{_T2}, all layers, λ=0.001", ELMO_EXPLAINER)},
    },
    "table3": {
        "squad": {"elmo": Published(85.1, f"{_T3}, ELMo at the input only", ELMO_EXPLAINER),
                  "elmo-io": Published(85.6, f"{_T3}, ELMo at input and output", ELMO_EXPLAINER)},
    },
}

# Pretraining scale of the published models (for the one-line scale notes).
ELMO_PRETRAINING = {
    "corpus": "1B Word Benchmark, 10 epochs",
    "architecture": "2 biLSTM layers of 4096 units with 512-d projections, 2048 char-CNN filters",
    "mean_perplexity": Published(39.7, "Peters et al. 2018, final biLM: mean of forward and "
                                       "backward perplexity", ELMO_EXPLAINER),
    "seed_file": ELMO_EXPLAINER,
}
BERT_PRETRAINING = {
    "corpus": "Wikipedia + BookCorpus",
    "sizes": {"BERT-base": "110M parameters (12 layers, 768 hidden, 12 heads)",
              "BERT-large": "340M parameters (24 layers, 1024 hidden, 16 heads)"},
    "seed_file": BERT_OVERVIEW,
}


def published(table: str, task: str, method: str) -> Published | None:
    """The published number for one cell, or ``None`` (the report then shows "—")."""
    return PUBLISHED.get(table, {}).get(task, {}).get(method)
