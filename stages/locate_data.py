"""Stage locate_data: which location serves each data set now → data/sources/<name>.json.

Runs on every `dvc repro` (``always_changed``): it resolves the corpus and every task as the
fetch stages will (mirror → Hub → package) and records the source and the sha256 of each mirror
file, one file per data set. Each fetch stage depends on its own file, so a mirror that appears,
disappears or changes reruns the fetches it serves (and no other), and the run cache can never
restore outputs fetched from another source.
"""

from pathlib import Path

from ctxrep.data import sources, tasks
from ctxrep.io import atomic_dir, write_json
from ctxrep.stage import stage
from ctxrep.lockfile import cache_dir, check_output, lock_outputs

OUT = sources.LOCATED_DIR

with stage("locate_data", "data") as ctx:
    p = ctx.section
    names = [p.corpus, *ctx.params["tasks"]]
    located = {name: sources.locate(tasks.dataset(name), p.source) for name in names}
    with atomic_dir(OUT) as tmp:
        for name, entry in located.items():
            write_json(tmp / f"{name}.json", entry)
    before = lock_outputs(Path.cwd()).get(OUT.as_posix())
    if before and not check_output(Path.cwd(), OUT.as_posix(), before, cache_dir(Path.cwd())):
        ctx.unchanged()  # nothing moved: a no-op `make repro` leaves no MLflow run behind
    ctx.summary(**{name: entry.get("source", "unavailable") for name, entry in located.items()})
