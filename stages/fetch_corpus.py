"""Stage fetch_corpus: the pretraining corpus → data/raw/corpus/ (Arrow documents + MANIFEST)."""

from pathlib import Path

from ctxrep.data import registry, sources
from ctxrep.stage import stage

OUT = Path("data/raw/corpus")

with stage("fetch_corpus", "data") as ctx:
    p = ctx.section
    spec = registry.corpus(p.corpus)
    manifest = sources.fetch(spec, p.source, {"seed": p.seed}, OUT, max_rows=p.corpus_max_docs,
                             verify_sha256=p.verify_sha256)
    sources.check_located(p.corpus, manifest)  # as locate_data found it
    ctx.summary(source=manifest["source"], docs=manifest["rows"]["train"],
                fallback=bool(manifest["fallback"]))
