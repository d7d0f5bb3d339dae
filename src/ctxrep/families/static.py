"""static: the context-independent word vectors x_k (word2vec trained on the corpus by
``pretrain_static`` into data/models/static; ELMo Table 1's "baseline", where the paper used
GloVe). Every feature-based method but the token-layer control reads them beside its model's
features; ``static`` is x_k alone."""

from ctxrep.families.records import Method, model_dir_of, section_of

STATIC = Method("static")
METHODS = (STATIC,)
SECTION = section_of(STATIC.name)            # pretrain_static: its params and its stage
MODEL_DIR = model_dir_of(STATIC.name)        # data/models/static

# The code that is its own: the only modules besides this one that may name it.
MODULES = ("src/ctxrep/pretraining/word2vec.py", "src/ctxrep/models/word_vectors.py",
           "stages/pretrain_static.py")
