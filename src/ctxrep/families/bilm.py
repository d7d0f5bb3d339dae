"""bilm: ELMo's biLM (Peters et al. 2018): char CNN + highway + projected biLSTM, a forward and
a backward LM sharing the token layer and softmax; judged by held-out perplexity. Its features
are ELMo: the biLM's layers mixed per task (ELMo's eq. 1), read beside the static word vectors.

Its methods, as ELMo's Tables 1-3 and §3.1 use them:

    elmo-token    the token layer alone (layer 0, its char CNN), no x_k: the control that shows
                  what the contextual layers add
    elmo-last     the top layer alone (Table 2, "last only")
    elmo-avg      an equal average of all layers (Table 2, λ = 1)
    elmo          the learned mix γ · Σ softmax(s)_j · h_j (Table 1's "+ ELMo"; Table 2, λ = 0.001)
    elmo-io       the learned mix at the task encoder's input and, mixed separately, its output
                  (Table 3)
    elmo-random   ``elmo`` on the same biLM untrained: the control the paper lacks (seed 004 §5)
"""

from ctxrep.families.records import (AVERAGE, ELMO_EXPLAINER, LAST, LEARNED, TOKEN, Claim, Family,
                                     Method, PaperTable, Published)
from ctxrep.families.static import STATIC

FAMILY = Family("bilm", "biLM", headlines=("val_ppl", "unigram_ppl", "train_tokens"),
                heldout=("val_ppl", "held-out perplexity (full softmax)", True),
                recipe_metric="val_ppl", recipe_lower_is_better=True,
                intrinsic=("perplexity_mean", "ppl"), featurizer="ElmoFeaturizer")

ELMO_TOKEN = Method("elmo-token", "bilm", TOKEN, reads_word_vectors=False, control=True)
ELMO_LAST = Method("elmo-last", "bilm", LAST)
ELMO_AVG = Method("elmo-avg", "bilm", AVERAGE)
ELMO = Method("elmo", "bilm", LEARNED)
ELMO_IO = Method("elmo-io", "bilm", LEARNED, at_output=True)
ELMO_RANDOM = Method("elmo-random", "bilm-random", LEARNED, control=True)
# The code that is this family's own (its network, objective, import and export, stage scripts,
# the nearest-neighbour analysis of ELMo's Table 4): the only modules besides this one that may
# name it or its methods as a key (tests/test_families.py).
MODULES = ("src/ctxrep/models/bilm.py", "src/ctxrep/models/elmo.py",
           "src/ctxrep/models/elmo_import.py", "src/ctxrep/models/elmo_pyfunc.py",
           "src/ctxrep/models/elmo_pyfunc_code.py", "src/ctxrep/pretraining/bilm_objective.py",
           "src/ctxrep/neighbors.py", "src/ctxrep/report/parts/bilm.py", "stages/pretrain_bilm.py",
           "stages/neighbors.py")

METHODS = (ELMO_TOKEN, ELMO_LAST, ELMO_AVG, ELMO, ELMO_IO, ELMO_RANDOM)

CLAIMS = (
    Claim(ELMO.name, STATIC.name, "contextual features beat the context-independent word vectors "
          "they are added to", "ELMo Table 1 (seed 004 §4.1)"),
    Claim(ELMO.name, ELMO_TOKEN.name, "the biLM's contextual layers add to its own token layer",
          "ELMo §3.1, §5.1 (seed 004 §2.3, §2.5)"),
    Claim(ELMO.name, ELMO_AVG.name, "a learned layer mix is at least as good as equal weights",
          "ELMo Table 2 (seed 004)"),
    Claim(ELMO_AVG.name, ELMO_LAST.name, "all layers (averaged) beat the top layer alone",
          "ELMo Table 2 (seed 004)"),
    Claim(ELMO_IO.name, ELMO.name, "ELMo at the task encoder's input and output beats input only "
          "(for SQuAD and SNLI)", "ELMo Table 3 (seed 004 §3)", tasks=("squad", "sick")),
    Claim(ELMO.name, ELMO_RANDOM.name, "pretraining, not the architecture, makes the biLM's "
          "features useful (the control seed 004 says the paper lacks)", "seed 004 §5 ⑤"),
)

# Probing claims (ELMo §5.3): the "methods" are the biLM's layers, each probed alone (a linear
# probe per layer, see ctxrep.transfer.probe); the report names them as below.
FIRST_LAYER, TOP_LAYER = "biLM layer 1", "biLM top layer"
LAYER_CLAIMS = (
    Claim(FIRST_LAYER, TOP_LAYER, "part-of-speech is best predicted from the first biLSTM layer",
          "ELMo §5.3 (seed 004)", tasks=("ud_pos",)),
    Claim(TOP_LAYER, FIRST_LAYER, "word sense is best predicted from the top biLSTM layer",
          "ELMo §5.3 (seed 004)", tasks=("wic",)),
)

# ELMo's Tables 1-3 as the report rebuilds them (Table 1's BERT columns are BERT's family's).
# The published numbers are the seed's, in percent. Table 1's "baseline" is the task model
# without ELMo (GloVe input): our ``static``; "baseline + ELMo" is ``elmo``. Table 2 (SQuAD dev
# F1): "last only" = ``elmo-last``, λ = 1 = ``elmo-avg``, λ = 0.001 = ``elmo``. Table 3 (SQuAD):
# "input only" = ``elmo``, "input + output" = ``elmo-io``. The paper's SNLI, SRL and coref
# have no counterpart here.
_T1 = "Peters et al. 2018, Table 1"
_T2 = "Peters et al. 2018, Table 2 (SQuAD dev F1)"
_T3 = "Peters et al. 2018, Table 3 (SQuAD F1)"
TABLES = (
    PaperTable(
        "table1", "Table 1 analog: context-free vs contextual representations",
        (STATIC.name, ELMO_TOKEN.name, ELMO.name),
        "Does a pretrained contextual representation beat the context-free one?",
        {"sst5": {STATIC.name: Published(51.4, f"{_T1}, SST-5 accuracy, baseline", ELMO_EXPLAINER),
                  ELMO.name: Published(54.7, f"{_T1}, SST-5 accuracy, baseline + ELMo",
                                       ELMO_EXPLAINER, std=0.5)},
         "conll2003": {STATIC.name: Published(90.15, f"{_T1}, NER F1, baseline", ELMO_EXPLAINER,
                                              decimals=2),
                       ELMO.name: Published(92.22, f"{_T1}, NER F1, baseline + ELMo",
                                            ELMO_EXPLAINER, std=0.10, decimals=2)},
         "squad": {STATIC.name: Published(81.1, f"{_T1}, SQuAD F1, baseline", ELMO_EXPLAINER),
                   ELMO.name: Published(85.8, f"{_T1}, SQuAD F1, baseline + ELMo (single model)",
                                        ELMO_EXPLAINER)}}),
    PaperTable(
        "table2", "Table 2 analog: which biLM layers to use",
        (ELMO_LAST.name, ELMO_AVG.name, ELMO.name),
        "Top layer only, an equal average of all layers, or learned layer weights?",
        {"squad": {ELMO_LAST.name: Published(84.7, f"{_T2}, last layer only", ELMO_EXPLAINER),
                   ELMO_AVG.name: Published(85.0, f"{_T2}, all layers, λ=1", ELMO_EXPLAINER),
                   ELMO.name: Published(85.2, f"{_T2}, all layers, λ=0.001", ELMO_EXPLAINER)}}),
    PaperTable(
        "table3", "Table 3 analog: where ELMo enters the task model",
        (ELMO.name, ELMO_IO.name),
        "ELMo at the task encoder's input only, or at its input and output?",
        {"squad": {ELMO.name: Published(85.1, f"{_T3}, ELMo at the input only", ELMO_EXPLAINER),
                   ELMO_IO.name: Published(85.6, f"{_T3}, ELMo at input and output",
                                           ELMO_EXPLAINER)}}),
)

# The published biLM's scale (the report's one-line scale note).
PRETRAINING = {
    "corpus": "1B Word Benchmark, 10 epochs",
    "architecture": "2 biLSTM layers of 4096 units with 512-d projections, 2048 char-CNN filters",
    "mean_perplexity": Published(39.7, "Peters et al. 2018, final biLM: mean of forward and "
                                       "backward perplexity", ELMO_EXPLAINER),
    "seed_file": ELMO_EXPLAINER,
}
