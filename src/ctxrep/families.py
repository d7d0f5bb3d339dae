"""The model families the project pretrains, and what the pipeline and the report know of each.

    bilm   ELMo's biLM (Peters et al. 2018): char CNN + highway + projected biLSTM, a forward and
           a backward LM; judged by held-out perplexity
    bert   BERT (Devlin et al. 2019): a Transformer encoder trained by masked LM (+ NSP); judged
           by held-out masked-token accuracy
    gpt    the left-to-right LM of BERT's Table 5 ablation: BERT's network with causal attention,
           trained to predict the next token; judged by held-out perplexity. A left-to-right
           family (below): not probed, scored on another domain nor in the report's pretraining
           sections

Each family of :data:`NAMES` is pretrained by stage ``pretrain_<name>`` into
``data/models/<name>`` (its metrics ``metrics/pretrain_<name>.json``, its curves
``dvclive/pretrain_<name>``), featurized by ``extract@<name>`` (and its untrained control
``extract@<name>-random``) into ``data/features/<name>``, probed by ``probe@<name>`` and scored
on another domain by ``intrinsic``. Every module that lists families reads this one, so they
agree and the order (the report's) is this file's. This module imports nothing but the standard
library: the report reads it.

A left-to-right family (:data:`LEFT_TO_RIGHT`) is BERT's network with causal attention trained
to predict each next token (``ctxrep.pretraining.next_token_objective``), with the same outputs
from the ``*_ltr`` stages of dvc.yaml, which run only in profiles whose ``left_to_right`` lists
it. Everything else follows from its entry here: its methods ``<name>-feature`` (its frozen
layers, mixed as ``bert-feature``'s) and ``<name>-finetune`` (fine-tuned as ``bert-finetune``),
its params section ``pretrain_<name>``, its stage names and its two claims against BERT. So a
new one is an entry below plus its conf keys (``pretrain_<name>``, ``transfer.<name>-feature``,
``transfer.<name>-finetune``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Family:
    name: str
    label: str                     # how the report names it
    # metrics/pretrain_<name>.json keys that are headlines (metrics/headline.json, summary.json):
    # held-out quality and the budget it took
    headlines: tuple[str, ...]
    # The rest is read for :data:`NAMES` only (a left-to-right family leaves them None):
    # the held-out curve (dvclive/pretrain_<name>): its metric key, its label, and whether the
    # panel's axis is perplexity (log scale; the train loss drawn as exp(loss)) or loss
    heldout: tuple[str, str, bool] | None = None
    recipe_metric: str | None = None   # what `ctxrep recipes` compares recipes on (held-out)
    recipe_lower_is_better: bool = False
    intrinsic: tuple[str, str] | None = None  # metrics/intrinsic.json: its key there, its short name
    left_to_right: bool = False    # a left-to-right LM, run where params left_to_right lists it

    @property
    def model_dir(self) -> Path:
        return Path("data/models") / self.name

    @property
    def section(self) -> str:
        """Its params section and the name of the stage script's run: ``pretrain_<name>``."""
        return f"pretrain_{self.name}"


FAMILIES = {
    "bilm": Family("bilm", "biLM", headlines=("val_ppl", "unigram_ppl", "train_tokens"),
                   heldout=("val_ppl", "held-out perplexity (full softmax)", True),
                   recipe_metric="val_ppl", recipe_lower_is_better=True,
                   intrinsic=("perplexity_mean", "ppl")),
    "bert": Family("bert", "BERT", headlines=("val_mlm_acc", "val_mlm_acc_at_mask", "train_tokens"),
                   heldout=("val_mlm_loss", "held-out MLM loss", False),
                   recipe_metric="val_mlm_acc", recipe_lower_is_better=False,
                   intrinsic=("pseudo_perplexity", "pppl")),
    "gpt": Family("gpt", "left-to-right LM", headlines=("val_lm_ppl", "val_lm_acc", "train_tokens"),
                  left_to_right=True),
}
# The families every profile pretrains, probes, scores on another domain and reports.
NAMES = tuple(name for name, f in FAMILIES.items() if not f.left_to_right)
# The left-to-right LMs (BERT's Table 5 ablation): name → its two methods, feature-based and
# fine-tuned.
LEFT_TO_RIGHT = {name: (f"{name}-feature", f"{name}-finetune")
                 for name, f in FAMILIES.items() if f.left_to_right}


def family(name: str) -> Family:
    if name not in FAMILIES:
        raise ValueError(f"unknown model family {name!r}; known: {', '.join(FAMILIES)}")
    return FAMILIES[name]
