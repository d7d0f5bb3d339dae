"""Stage tokenize (file not named tokenize.py: that would shadow the stdlib module).

WordPiece + biLM vocab + char ids + sentence-split Arrow shards → data/tokenized/.
"""

from pathlib import Path

from ctxrep.data.tokenized import build
from ctxrep.io import atomic_dir
from ctxrep.stage import stage

with stage("tokenize", "tokenize") as ctx:
    with atomic_dir(Path("data/tokenized")) as tmp:
        meta = build(Path("data/raw/corpus"), tmp, ctx.section)
    train = meta["splits"]["train"]
    ctx.write_metrics("metrics/tokenize.json", {
        "train_docs": train["docs"], "train_sentences": train["sentences"],
        "train_words": train["words"], "train_wordpieces": train["wordpieces"],
        "validation_words": meta["splits"]["validation"]["words"],
        "train_oov_rate": meta["train_oov_rate"], "wordpiece_vocab_size": meta["wordpiece_vocab_size"]})
    words = train["words"] + meta["splits"]["validation"]["words"]
    ctx.compute(amount=words, unit="words")
    ctx.summary(docs=train["docs"], sentences=train["sentences"], words=train["words"],
                wordpieces=train["wordpieces"])
