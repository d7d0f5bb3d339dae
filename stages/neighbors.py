"""Stage neighbors: polysemy through the biLM (ELMo Table 4) → reports/neighbors.md.

For each of ``neighbors.words``, its nearest sentences by the top layer's vector of the word in
context, beside its nearest words in the context-free token layer (:mod:`ctxrep.neighbors`;
``ctxrep neighbors --word W`` prints the same for any word).
"""

from pathlib import Path

from ctxrep.io import atomic_file
from ctxrep.neighbors import neighbours_report
from ctxrep.stage import stage

MODEL, CORPUS, OUT = Path("data/models/bilm"), Path("data/tokenized"), Path("reports/neighbors.md")

with stage("neighbors", "neighbors") as ctx:
    p = ctx.section
    text = neighbours_report(MODEL, CORPUS, p.words, k=p.k, queries=p.queries)
    with atomic_file(OUT) as f:
        f.write(text + "\n")
    ctx.compute(amount=len(p.words), unit="words")
    ctx.summary(words=len(p.words), out=str(OUT))
