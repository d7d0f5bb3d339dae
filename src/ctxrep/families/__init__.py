"""The model families the project pretrains, and what the pipeline and the report know of each.

    bilm   ELMo's biLM (Peters et al. 2018): char CNN + highway + projected biLSTM, a forward and
           a backward LM; judged by held-out perplexity
    bert   BERT (Devlin et al. 2019): a Transformer encoder trained by masked LM (+ NSP); judged
           by held-out masked-token accuracy

Each core family (:data:`NAMES`) is a module of this package (``bilm.py``, ``bert.py``) that
declares everything the pipeline and the report ask of it by name: its entry (``FAMILY``), its
transfer methods as records (``METHODS``: which features each reads and how it mixes them), the
papers' claims about them (``CLAIMS``), and the papers' tables and numbers (``TABLES``,
``PRETRAINING``); ``static.py`` is the static word vectors x_k, ``records.py`` the record types.
This module composes them into the catalogue (:data:`METHODS`, :data:`CLAIMS`, :data:`TABLES`)
that every other module iterates over instead of naming a method. A core family is pretrained
by stage ``pretrain_<name>`` into ``data/models/<name>`` (its metrics
``metrics/pretrain_<name>.json``, its curves ``dvclive/pretrain_<name>``), featurized by
``extract@<name>`` (and its untrained control ``extract@<name>-random``) into
``data/features/<name>``, probed by ``probe@<name>`` and scored on another domain by
``intrinsic``. The order of :data:`NAMES` is the report's.

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

This package imports nothing but the standard library: the report reads it. The core
families' modules are in every stage's code manifest; a left-to-right family's in its own only.
"""

from __future__ import annotations

import functools
import importlib
import re
from pathlib import Path

from ctxrep.families import bert, bilm, static
from ctxrep.families.records import (Claim, Family, Method, PaperTable, Published, model_dir_of,
                                     section_of)

__all__ = ["CLAIMS", "CORE", "Claim", "FIRST_LAYER", "Family", "LAYER_CLAIMS", "LEFT_TO_RIGHT",
           "METHODS", "Method", "NAMES", "OWN_MODULES", "PRETRAINING", "PROBED", "PUBLISHED_MODELS",
           "PaperTable", "Published", "STARTING_POINT_KEY", "STARTING_POINTS", "STATIC", "STATIC_DIR",
           "STATIC_SECTION", "TABLES", "TOP_LAYER", "family", "is_left_to_right_module",
           "model_dir_of", "section_of"]

# The families every profile pretrains, probes, scores on another domain and reports, one module
# each, in the report's order.
CORE = {module.FAMILY.name: module.FAMILY for module in (bilm, bert)}
NAMES = tuple(CORE)
PACKAGE_DIR = Path(__file__).parent
# Modules of this package that are not left-to-right families: the core families, the static
# word vectors and the records they are made of.
NOT_LEFT_TO_RIGHT = (*NAMES, "static", "records")
# The left-to-right LMs (BERT's Table 5 ablation), one module each, by file name (sorted):
# name → its two methods, feature-based and fine-tuned.
LEFT_TO_RIGHT = {p.stem: (f"{p.stem}-feature", f"{p.stem}-finetune")
                 for p in sorted(PACKAGE_DIR.glob("*.py"))
                 if not p.stem.startswith((".", "_")) and p.stem not in NOT_LEFT_TO_RIGHT}


def is_left_to_right_module(module: str) -> bool:
    """Whether ``module`` (``ctxrep.families.gpt``) is a left-to-right family's own: loaded by
    name (``family(name)``) by the stages of that family alone, so in no code manifest; this
    package's other modules (the core families, the records) are imported by code, like any."""
    package, _, stem = module.rpartition(".")
    return package == __name__ and stem in LEFT_TO_RIGHT


_NAME = re.compile(r"[a-z][a-z0-9_]{0,31}")  # a method is <name>-feature: no hyphen in a name
for _bad in [n for n in LEFT_TO_RIGHT if not _NAME.fullmatch(n)]:
    raise ImportError(f"{PACKAGE_DIR / _bad}.py: a left-to-right family's module is named "
                      f"{_NAME.pattern}")

# The transfer methods of the core families and the static word vectors, and those of each
# left-to-right LM (its frozen layers mixed as BERT's, and its network fine-tuned as BERT's).
# The order is the catalogue's: x_k alone, the pretrained models' features, their untrained
# controls, then the fine-tuned methods.
_CORE_METHODS = (*static.METHODS, *bilm.METHODS, *bert.METHODS)
_LEFT_TO_RIGHT_METHODS = tuple(
    method for name, (feature, finetune) in LEFT_TO_RIGHT.items()
    for method in (Method(feature, name, bert.BERT_FEATURE.mix),
                   Method(finetune, fine_tuned=True)))
METHODS = {m.name: m for m in (
    *[m for m in _CORE_METHODS if not m.fine_tuned and not m.untrained],
    *[m for m in _CORE_METHODS if m.untrained],
    *[m for m in _LEFT_TO_RIGHT_METHODS if not m.fine_tuned],
    *[m for m in _CORE_METHODS if m.fine_tuned],
    *[m for m in _LEFT_TO_RIGHT_METHODS if m.fine_tuned])}

# The papers' claims on the methods (ctxrep.analysis.claims judges them), and ELMo's layer claims.
CLAIMS = (*bilm.CLAIMS, *bert.CLAIMS,
          *(c for methods in LEFT_TO_RIGHT.values() for c in bert.against_left_to_right(*methods)))
LAYER_CLAIMS = bilm.LAYER_CLAIMS
PROBED = bilm.FAMILY.name   # the family whose layer probes judge LAYER_CLAIMS
FIRST_LAYER, TOP_LAYER = bilm.FIRST_LAYER, bilm.TOP_LAYER  # the layers' names in them
# The papers' tables the report rebuilds over our tasks: ELMo's, Table 1 with BERT's columns.
TABLES = tuple(PaperTable(t.key, t.title, (*t.methods, *bert.TABLE1_METHODS), t.question,
                          t.published) if t.key == "table1" else t for t in bilm.TABLES)
# The networks a fine-tuning method can start from: the stage that wrote it, and where (BERT's,
# pretrained or published, and each left-to-right LM's).
STARTING_POINT_KEY = bert.STARTING_POINT_KEY   # transfer.<method>.<key>: which one
STARTING_POINTS = {**bert.STARTING_POINTS,
                   **{section_of(name): str(model_dir_of(name)) for name in LEFT_TO_RIGHT}}
# The static word vectors x_k: the method, its params section and stage, its folder.
STATIC, STATIC_SECTION, STATIC_DIR = static.STATIC.name, static.SECTION, static.MODEL_DIR
# The code each core module owns besides itself (its network, objective and stage scripts): the
# only modules that may name it or its methods.
OWN_MODULES = {module.__name__.rpartition(".")[2]: module.MODULES for module in (static, bilm, bert)}
# The published checkpoints imported beside the core families: stage → the name of its weights
# record and metrics in the report.
PUBLISHED_MODELS = {bert.PUBLISHED_STAGE: bert.PUBLISHED_NAME}
# The published models' scale, per family.
PRETRAINING = {bilm.FAMILY.name: bilm.PRETRAINING, bert.FAMILY.name: bert.PRETRAINING}


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
