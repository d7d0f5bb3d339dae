"""The model families the project pretrains, and what the pipeline and the report know of each.

    bilm   ELMo's biLM (Peters et al. 2018): char CNN + highway + projected biLSTM, a forward and
           a backward LM; judged by held-out perplexity
    bert   BERT (Devlin et al. 2019): a Transformer encoder trained by masked LM (+ NSP); judged
           by held-out masked-token accuracy

Each core family (:data:`NAMES`) is pretrained by stage ``pretrain_<name>`` into
``data/models/<name>`` (its metrics ``metrics/pretrain_<name>.json``, its curves
``dvclive/pretrain_<name>``), featurized by ``extract@<name>`` (and its untrained control
``extract@<name>-random``) into ``data/features/<name>``, probed by ``probe@<name>`` and scored
on another domain by ``intrinsic``. Every module that lists families reads this one, so they
agree and the order (the report's) is this file's.

**A left-to-right family is a module of this package, found by its file name** (``gpt.py``, the
left-to-right LM of BERT's Table 5), as a task is a module of :mod:`ctxrep.data.tasks`: BERT's
network with causal attention trained to predict each next token
(``ctxrep.pretraining.next_token_objective``), with the same outputs from the ``*_ltr`` stages
of dvc.yaml, which run only in profiles whose ``left_to_right`` lists it. Everything else
follows from its name: its methods ``<name>-feature`` (its frozen layers, mixed as
``bert-feature``'s) and ``<name>-finetune`` (fine-tuned as ``bert-finetune``), its params
section ``pretrain_<name>``, its stage names and its two claims against BERT. So a new one is a
module ``<name>.py`` holding ``FAMILY = Family("<name>", ..., left_to_right=True)`` plus its conf
keys (``pretrain_<name>``, ``transfer.<name>-feature``, ``transfer.<name>-finetune``).

The catalogue reads the module *names* only (:data:`LEFT_TO_RIGHT`); a module itself is
imported by :func:`family` where its entry is needed, by its own pretraining stage. Like a
task's module it is in no stage's code manifest (:mod:`ctxrep.codedeps`): only
``pretrain_ltr@<name>`` lists it in dvc.yaml, and the later stages and the report learn of it
from the params (``left_to_right``), so adding a family reruns nothing else.

This package imports nothing but the standard library: the report reads it.
"""

from __future__ import annotations

import functools
import importlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable


def section_of(name: str) -> str:
    """A family's params section and the name of its stage script's run: ``pretrain_<name>``."""
    return f"pretrain_{name}"


def model_dir_of(name: str) -> Path:
    return Path("data/models") / name


@dataclass(frozen=True)
class Family:
    name: str
    label: str                     # how the report names it
    # metrics/pretrain_<name>.json keys that are headlines (metrics/headline.json, summary.json):
    # held-out quality and the budget it took
    headlines: tuple[str, ...]
    # The rest is read for the core families only (a left-to-right family leaves them None):
    # the held-out curve (dvclive/pretrain_<name>): its metric key, its label, and whether the
    # panel's axis is perplexity (log scale; the train loss drawn as exp(loss)) or loss
    heldout: tuple[str, str, bool] | None = None
    recipe_metric: str | None = None   # what `ctxrep recipes` compares recipes on (held-out)
    recipe_lower_is_better: bool = False
    intrinsic: tuple[str, str] | None = None  # metrics/intrinsic.json: its key there, its short name
    left_to_right: bool = False    # a left-to-right LM, run where params left_to_right lists it
    # A left-to-right family's own tokenizer: tokenizer(corpus, out_dir) writes a folder that
    # ``transformers.AutoTokenizer`` loads (tokenizer.json, tokenizer_config.json), learned from
    # the tokenized corpus; None: the corpus's WordPiece, BERT's.
    tokenizer: Callable[[Any, Path], None] | None = None

    @property
    def model_dir(self) -> Path:
        return model_dir_of(self.name)

    @property
    def section(self) -> str:
        return section_of(self.name)


# The families every profile pretrains, probes, scores on another domain and reports.
CORE = {
    "bilm": Family("bilm", "biLM", headlines=("val_ppl", "unigram_ppl", "train_tokens"),
                   heldout=("val_ppl", "held-out perplexity (full softmax)", True),
                   recipe_metric="val_ppl", recipe_lower_is_better=True,
                   intrinsic=("perplexity_mean", "ppl")),
    "bert": Family("bert", "BERT", headlines=("val_mlm_acc", "val_mlm_acc_at_mask", "train_tokens"),
                   heldout=("val_mlm_loss", "held-out MLM loss", False),
                   recipe_metric="val_mlm_acc", recipe_lower_is_better=False,
                   intrinsic=("pseudo_perplexity", "pppl")),
}
NAMES = tuple(CORE)
PACKAGE_DIR = Path(__file__).parent
# The left-to-right LMs (BERT's Table 5 ablation), one module each, by file name (sorted):
# name → its two methods, feature-based and fine-tuned.
LEFT_TO_RIGHT = {p.stem: (f"{p.stem}-feature", f"{p.stem}-finetune")
                 for p in sorted(PACKAGE_DIR.glob("*.py")) if not p.stem.startswith((".", "_"))}
_NAME = re.compile(r"[a-z][a-z0-9_]{0,31}")  # a method is <name>-feature: no hyphen in a name
for _bad in [n for n in LEFT_TO_RIGHT if n in CORE or not _NAME.fullmatch(n)]:
    raise ImportError(f"{PACKAGE_DIR / _bad}.py: a left-to-right family's module is named "
                      f"{_NAME.pattern}, and not as a core family ({', '.join(CORE)})")


@functools.cache
def family(name: str) -> Family:
    """A core family's entry, or a left-to-right family's from its module (imported here)."""
    if name in CORE:
        return CORE[name]
    if name not in LEFT_TO_RIGHT:
        raise ValueError(f"unknown model family {name!r}; known: "
                         f"{', '.join([*CORE, *LEFT_TO_RIGHT])}")
    entry = getattr(importlib.import_module(f"{__name__}.{name}"), "FAMILY", None)
    if not isinstance(entry, Family) or entry.name != name or not entry.left_to_right:
        raise ImportError(f"{PACKAGE_DIR / name}.py: a family module holds "
                          f"FAMILY = Family({name!r}, ..., left_to_right=True)")
    return entry
