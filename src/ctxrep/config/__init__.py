"""Typed, validated parameters: the one place where each hyper-parameter is declared.

Values live in ``conf/config.yaml`` (the default profile) and ``conf/profile/<name>.yaml``;
DVC's Hydra composition writes the effective values to ``params.yaml`` before a run
(``dvc exp run -S profile=tiny -S pretrain_bilm.steps=40``; see :func:`~ctxrep.config.composition.compose`). Stages read
``params.yaml`` and nothing else, so what DVC hashes is what runs.

Each section is a dataclass whose fields carry type, range and meaning but no value: a key
missing from ``params.yaml`` is an error, never a silent default. :func:`load_section` checks
every key (unknown, wrong type, out of range, contradicting another) and raises
:class:`ParamError` naming ``section.key``, the value and what is allowed, before any work.
Model configs are built from these sections (``BiLMParams.model_config``), and architecture
contradictions are checked once, by the model config, and reported here under the params key.

The package, along its seams:

- :mod:`~ctxrep.config.fields`: a typed field with a range, and the check that builds a
  section from a mapping (:func:`from_dict`, :class:`ParamError`);
- :mod:`~ctxrep.config.methods`: the method catalogue (which methods exist, what each reads);
- :mod:`~ctxrep.config.sections`: one dataclass per section of ``params.yaml``;
- :mod:`~ctxrep.config.params`: reading ``params.yaml`` (every section checked first) and
  tracing the keys a stage reads;
- :mod:`~ctxrep.config.composition`: profiles composed into ``params.yaml``, checked before DVC
  runs (``ctxrep check-params``). Stages never import it, so editing it reruns no stage.

What stages and models use is re-exported here (``from ctxrep import config``).
"""

from ctxrep.config.fields import MAX_SEED, ParamError, as_dict, as_param_error, from_dict
from ctxrep.config.methods import (BERT_MODELS, FEATURE_METHODS, FEATURE_SETS, FEATURES_OF,
                                   FINETUNE_METHODS, FROM_SCRATCH, LEFT_TO_RIGHT, METHODS,
                                   READS_WORD_VECTORS, cell_stage_name, extract_stage_name,
                                   features_of, hf_finetune_method, hf_method, hf_name,
                                   is_feature_method, is_finetune_method, is_hf_finetune,
                                   left_to_right_family, method_record, pretrain_stage_name,
                                   reads_word_vectors, transfer_section)
from ctxrep.config.params import (GRID_KEYS, PARAMS_FILE, TRACE_ENV, grid_methods, load_hf,
                                  load_section, load_transfer, load_transfer_common, read_params,
                                  validate, write_trace)
from ctxrep.config.sections import (SECTIONS, TRAIN_INPUT, BertParams, BiLMParams, LeftToRightParams,
                                    ExtractParams, FeatureTransferParams, FinetuneTrainingParams,
                                    FinetuneTransferParams, HFEncoderParams, ImportBertParams,
                                    IntrinsicParams, LearningCurveParams,
                                    LoopParams, NeighborsParams, ProbeParams, StaticParams, TokenizeParams,
                                    TransferCommon)

__all__ = [
    "BERT_MODELS", "FEATURE_METHODS", "FEATURE_SETS", "FEATURES_OF", "FINETUNE_METHODS",
    "FROM_SCRATCH", "LEFT_TO_RIGHT", "cell_stage_name", "extract_stage_name", "left_to_right_family",
    "pretrain_stage_name", "features_of", "hf_method", "hf_finetune_method", "hf_name",
    "is_feature_method", "is_finetune_method", "is_hf_finetune", "FinetuneTrainingParams",
    "transfer_section", "method_record",
    "reads_word_vectors", "load_hf", "HFEncoderParams",
    "GRID_KEYS", "MAX_SEED", "METHODS", "PARAMS_FILE", "READS_WORD_VECTORS", "SECTIONS", "TRACE_ENV",
    "TRAIN_INPUT", "BertParams", "BiLMParams", "LeftToRightParams", "ExtractParams", "FeatureTransferParams",
    "FinetuneTransferParams", "ImportBertParams", "IntrinsicParams", "LearningCurveParams",
    "LoopParams", "NeighborsParams", "ParamError", "ProbeParams", "StaticParams", "TokenizeParams", "TransferCommon",
    "as_dict", "as_param_error", "from_dict", "grid_methods", "load_section", "load_transfer",
    "load_transfer_common", "read_params", "validate", "write_trace",
]
