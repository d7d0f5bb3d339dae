"""Stage fetch_corpus: the pretraining corpus → data/raw/corpus/ (Arrow documents + MANIFEST)."""

from pathlib import Path

from ctxrep.data import registry, sources
from ctxrep.stage import stage

OUT = Path("data/raw/corpus")
LOCATED = Path("data/sources.json")  # locate_data: which source serves, as DVC hashed it

with stage("fetch_corpus", "data") as ctx:
    p = ctx.section
    spec = registry.CORPORA[p.corpus]
    manifest = sources.fetch(spec, p.source, {"seed": p.seed}, OUT, max_rows=p.corpus_max_docs,
                             verify_sha256=p.verify_sha256)
    sources.check_located(LOCATED, p.corpus, manifest)
    ctx.summary(source=manifest["source"], docs=manifest["rows"]["train"],
                fallback=bool(manifest["fallback"]))
