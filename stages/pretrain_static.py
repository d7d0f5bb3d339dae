"""Stage pretrain_static: word2vec vectors on the tokenized corpus → data/models/static/.

The static x_k of every feature-based method (see ctxrep.pretraining.word2vec): trained on the
training documents the biLM and BERT pretrain on, with the corpus's own lower-casing.
"""

import time
from pathlib import Path

from ctxrep import config
from ctxrep.data.tokenized import TokenizedCorpus
from ctxrep.io import atomic_dir
from ctxrep.pretraining.word2vec import CorpusSentences, train_flops, train_word2vec
from ctxrep.stage import stage

OUT = Path("data/models/static")

with stage("pretrain_static", "pretrain_static") as ctx:
    p = ctx.section
    corpus = TokenizedCorpus("data/tokenized")
    lowercase = bool(corpus.meta["params"]["lowercase"])  # as the corpus was tokenized
    start = time.perf_counter()
    vectors, words_per_epoch = train_word2vec(CorpusSentences(corpus, "train", lowercase), p)
    seconds = time.perf_counter() - start
    with atomic_dir(OUT) as tmp:
        vectors.save(tmp, {"pretrain_static": config.as_dict(p)})
    n_params = 2 * len(vectors.words) * vectors.dim  # input vectors + negative-sampling outputs
    metrics = {
        "vocab_size": len(vectors.words), "dim": vectors.dim,
        "train_words": words_per_epoch * p.epochs, "epochs": p.epochs, "params": n_params,
        "heldout_oov_rate": round(vectors.oov_rate(CorpusSentences(corpus, "validation",
                                                                   lowercase)), 6),
        "train_flops": train_flops(p, words_per_epoch),
    }
    ctx.write_metrics("metrics/pretrain_static.json", metrics)
    ctx.compute(amount=metrics["train_words"], unit="words", params=n_params,
                flops=metrics["train_flops"], train_s=round(seconds, 1),
                words_per_s=round(metrics["train_words"] / max(seconds, 1e-9), 1))
    ctx.summary(vocab=len(vectors.words), dim=vectors.dim, words=metrics["train_words"],
                heldout_oov=metrics["heldout_oov_rate"])
