"""ctxrep: contextual word representations (ELMo biLM and BERT), reproduced end to end.

    from ctxrep import Elmo, ScalarMix
    elmo = Elmo.from_pretrained("data/models/bilm")
"""

__version__ = "0.1.0"

_LAZY = {"Elmo": "ctxrep.models.elmo", "ScalarMix": "ctxrep.models.scalar_mix",
         "BiLM": "ctxrep.models.bilm", "BertForPreTraining": "ctxrep.models.bert",
         "BertModel": "ctxrep.models.bert"}


def __getattr__(name):  # torch is imported only when a model is asked for
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'ctxrep' has no attribute {name!r}")
