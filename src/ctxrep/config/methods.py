"""The method catalogue: which transfer methods exist, and what each one reads."""

import re

from ctxrep.families import LEFT_TO_RIGHT, METHODS as FAMILY_METHODS, STARTING_POINTS, Method
from ctxrep.families.records import LEARNED

# The methods of every family (ctxrep.families: each family's module declares its own). Feature-
# based ones: as in ELMo's Table 1, every method's task model reads a context-independent
# representation x_k of each word, the static word vectors trained on the same corpus
# (``pretrain_static``, data/models/static/), and adds the frozen features of one model
# (data/features/<set>/), mixed per the method; ``static`` is x_k alone and the token-layer
# control reads no x_k. The random-init controls are the same architectures untrained: they
# show what pretraining itself contributes. Fine-tuned methods: the network of
# ``transfer.<method>.bert`` and a task head, trained together, or from a fresh initialisation
# of that network (the no-pretraining control).
FEATURES_OF = {m.name: m.features for m in FAMILY_METHODS.values() if not m.fine_tuned}
READS_WORD_VECTORS = frozenset(m.name for m in FAMILY_METHODS.values()
                               if not m.fine_tuned and m.reads_word_vectors)
FEATURE_METHODS = tuple(FEATURES_OF)
FINETUNE_METHODS = tuple(m.name for m in FAMILY_METHODS.values() if m.fine_tuned)
FROM_SCRATCH = frozenset(m.name for m in FAMILY_METHODS.values() if m.from_scratch)
METHODS = FEATURE_METHODS + FINETUNE_METHODS
# the feature sets the extract stages write (the core families', their untrained controls', the
# left-to-right LMs')
FEATURE_SETS = tuple(dict.fromkeys(f for f in FEATURES_OF.values() if f is not None))
# A left-to-right LM family's methods run in the ``*_ltr`` stages of dvc.yaml, which only
# profiles listing the family in ``left_to_right`` have, never through the grid's lists (whose
# stages depend on the four other feature sets only).


# A Hugging Face checkpoint named in params ``hf`` (``hf: {<name>: {path: ..., pooling: ...}}``)
# has two methods of its own, as BERT has: ``hf-<name>``, its frozen layers (data/features/
# hf-<name>, from ``extract_hf@<name>``) mixed as ``bert-feature``'s and read beside x_k, in cells
# ``transfer_hf@<task>-<name>`` trained with ``transfer.hf-feature``'s values; and
# ``hf-<name>-finetune``, the checkpoint and a task head trained together
# (:mod:`ctxrep.models.hf_checkpoint`), in cells ``finetune_hf@<task>-<name>`` trained with
# ``transfer.hf-finetune``'s. Both run on every grid task. Their names come from the params, so
# they are never in the tables above: these functions say what such a method reads and where it
# runs.
HF_PREFIX = "hf-"
HF_FINETUNE_SUFFIX = "-finetune"
HF_TRANSFER_SECTION = "hf-feature"
HF_FINETUNE_SECTION = "hf-finetune"
HF_NAME = re.compile(r"[a-z0-9][a-z0-9_]{0,39}")
# Names whose methods would read as the two sections' names.
HF_RESERVED = ("feature", "finetune")


def hf_method(name: str) -> str:
    """The feature-based method (and feature set) of the Hugging Face checkpoint ``name``."""
    return HF_PREFIX + name


def hf_finetune_method(name: str) -> str:
    """The fine-tuned method of the Hugging Face checkpoint ``name``."""
    return HF_PREFIX + name + HF_FINETUNE_SUFFIX


def hf_name(method: str) -> str | None:
    """The params ``hf`` entry whose method or feature set ``method`` is, or None."""
    if not method.startswith(HF_PREFIX):
        return None
    name = method.removeprefix(HF_PREFIX).removesuffix(HF_FINETUNE_SUFFIX)
    return name if HF_NAME.fullmatch(name) else None


def is_hf_finetune(method: str) -> bool:
    """``hf-<name>-finetune`` (and the section ``hf-finetune`` its cells read)."""
    return hf_name(method) is not None and method.endswith(HF_FINETUNE_SUFFIX)


def is_hf_feature(method: str) -> bool:
    """``hf-<name>``, a checkpoint's frozen layers (and the section ``hf-feature``)."""
    return hf_name(method) is not None and not method.endswith(HF_FINETUNE_SUFFIX)


def method_record(method: str) -> Method:
    """What ``method`` is: its family's record, or a Hugging Face checkpoint's (its frozen layers
    mixed as BERT's are, by a learned scalar mix)."""
    if method in FAMILY_METHODS:
        return FAMILY_METHODS[method]
    if is_hf_feature(method):
        return Method(method, method, LEARNED)
    if is_hf_finetune(method):
        return Method(method, fine_tuned=True)
    raise ValueError(f"unknown transfer method {method!r}")


# The feature-based methods whose layer weights are learned (the report draws them), the
# untrained controls aside.
LEARNED_MIX_METHODS = tuple(m.name for m in FAMILY_METHODS.values()
                            if m.mix == LEARNED and not m.untrained)
# The methods that exist to be compared against (the report lists them after the others).
CONTROL_METHODS = tuple(m.name for m in FAMILY_METHODS.values() if m.control)


def feature_method_of(family: str) -> str | None:
    """The method that reads ``family``'s frozen layers as ELMo's eq. 1 does (a learned mix at
    the task encoder's input): ``elmo`` for the biLM, ``<family>-feature`` for the others."""
    return next((m.name for m in FAMILY_METHODS.values() if m.features == family
                 and m.mix == LEARNED and not m.at_output), None)


def features_of(method: str) -> str | None:
    """The feature set a feature-based method reads (None: x_k alone), an ``hf-`` one included."""
    return method if hf_name(method) is not None else FEATURES_OF[method]


def is_feature_method(method: str) -> bool:
    return method in FEATURE_METHODS or is_hf_feature(method)


def is_finetune_method(method: str) -> bool:
    return method in FINETUNE_METHODS or is_hf_finetune(method)


def reads_word_vectors(method: str) -> bool:
    return method in READS_WORD_VECTORS or is_hf_feature(method)


def transfer_section(method: str) -> str:
    """The key under ``transfer`` that holds a method's training values."""
    if hf_name(method) is None:
        return method
    return HF_FINETUNE_SECTION if is_hf_finetune(method) else HF_TRANSFER_SECTION


def left_to_right_family(method: str) -> str | None:
    """The left-to-right LM family whose method ``method`` is, or None."""
    return next((f for f, methods in LEFT_TO_RIGHT.items() if method in methods), None)


def cell_stage_name(task: str, method: str) -> str:
    """The DVC stage of one cell: ``transfer@<task>-<method>`` (feature-based) or
    ``finetune@<task>-<method>`` (fine-tuned); a left-to-right LM's methods are
    ``transfer_ltr@<task>-<family>`` and ``finetune_ltr@<task>-<family>``; a Hugging Face
    checkpoint's, ``transfer_hf@<task>-<name>`` and ``finetune_hf@<task>-<name>``."""
    if (name := hf_name(method)) is not None:
        return f"{'finetune' if is_hf_finetune(method) else 'transfer'}_hf@{task}-{name}"
    group = "finetune" if method in FINETUNE_METHODS else "transfer"
    family = left_to_right_family(method)
    return f"{group}_ltr@{task}-{family}" if family else f"{group}@{task}-{method}"


def extract_stage_name(features: str) -> str:
    """The DVC stage that writes data/features/<features>."""
    if (name := hf_name(features)) is not None:
        return f"extract_hf@{name}"
    return f"extract_ltr@{features}" if features in LEFT_TO_RIGHT else f"extract@{features}"


def pretrain_stage_name(name: str) -> str:
    """The DVC stage that pretrains family ``name`` into data/models/<name>."""
    return f"pretrain_ltr@{name}" if name in LEFT_TO_RIGHT else f"pretrain_{name}"


# The networks a fine-tuning method can start from: the stage that wrote it, and where.
BERT_MODELS = STARTING_POINTS
