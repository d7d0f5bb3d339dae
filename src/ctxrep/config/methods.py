"""The method catalogue: which transfer methods exist, and what each one reads."""

# Feature-based methods. As in ELMo's Table 1, every method's task model reads a
# context-independent representation x_k of each word, the static word vectors trained on the same
# corpus (``pretrain_static``, data/models/static/), and adds the frozen features of one model
# (data/features/<set>/), mixed per the method:
#
#   static        x_k alone: the paper's baseline (no model features)
#   elmo-token    the biLM's token layer alone (layer 0, its char CNN), no x_k: a control
#   elmo-last ... [mix of the model's layers; x_k]
#
# ``elmo-random`` and ``bert-random`` are the same architectures untrained: the controls that show
# what pretraining itself contributes.
FEATURES_OF = {"static": None, "elmo-token": "bilm", "elmo-last": "bilm", "elmo-avg": "bilm",
               "elmo": "bilm", "elmo-io": "bilm", "bert-feature": "bert",
               "elmo-random": "bilm-random", "bert-random": "bert-random"}
# The methods that read the static word vectors as x_k: all but the token-layer control.
READS_WORD_VECTORS = frozenset(FEATURES_OF) - {"elmo-token"}
FEATURE_METHODS = tuple(FEATURES_OF)
FINETUNE_METHODS = ("bert-finetune", "bert-scratch")
METHODS = FEATURE_METHODS + FINETUNE_METHODS
# bilm, bert, bilm-random, bert-random: what the extract stage writes
FEATURE_SETS = tuple(dict.fromkeys(f for f in FEATURES_OF.values() if f is not None))

# The BERTs a fine-tuning method can start from: the stage that wrote it, and where.
BERT_MODELS = {"pretrain_bert": "data/models/bert", "import_bert": "data/models/bert-published"}
