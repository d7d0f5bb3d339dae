"""Stage locate_data: which location serves each data set now → data/sources.json.

Runs on every `dvc repro` (``always_changed``): it resolves the corpus and every task as the
fetch stages will (mirror → Hub → package) and records the source and the sha256 of each mirror
file. The fetch stages depend on this file, so a mirror that appears, disappears or changes
reruns them, and the run cache can never restore outputs fetched from another source.
"""

from pathlib import Path

from ctxrep.data import registry, sources
from ctxrep.io import write_json
from ctxrep.stage import stage
from ctxrep.verify import lock_outputs, md5_file

OUT = Path("data/sources.json")

with stage("locate_data", "data") as ctx:
    p = ctx.section
    names = [p.corpus, *ctx.params["tasks"]]
    located = {name: sources.locate(registry.get(name), p.source) for name in names}
    write_json(OUT, located)
    if lock_outputs(Path.cwd()).get(OUT.as_posix()) == md5_file(OUT):
        ctx.unchanged()  # nothing moved: a no-op `make repro` leaves no MLflow run behind
    ctx.summary(**{name: entry.get("source", "unavailable") for name, entry in located.items()})
