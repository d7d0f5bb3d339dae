"""Stage fetch_tasks@<task>: one task → data/raw/tasks/<task>/ (Arrow DatasetDict + MANIFEST).

A task no location can serve is recorded as unavailable (MANIFEST only, with how to provide it);
it is never replaced by other data, and the rest of the pipeline goes on without it.
"""

import logging
import sys
from pathlib import Path

from ctxrep.data import sources, tasks
from ctxrep.stage import stage

task = sys.argv[1]
with stage(f"fetch_tasks@{task}", "data") as ctx:
    p = ctx.section
    spec = tasks.get(task)
    out = Path("data/raw/tasks") / task
    try:
        manifest = sources.fetch(spec, p.source, {"seed": p.seed,
                                                  "squad_train_fraction": p.squad_train_fraction},
                                 out, verify_sha256=p.verify_sha256)
        sources.check_located(task, manifest)  # as locate_data found it
        ctx.summary(source=manifest["source"], **manifest["rows"])
    except sources.Unavailable as e:
        sources.check_located(task, None)
        logging.getLogger("ctxrep").warning("TASK UNAVAILABLE: %s", e)
        sources.write_unavailable(spec, str(e), out)
        ctx.summary(available=False)
