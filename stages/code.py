"""Stage code: the source files each stage script runs → data/code/<script>.json.

For every ``stages/<script>.py``, the sha256 of each file it runs (ctxrep.codedeps). Each other
stage depends on its script's manifest, so DVC reruns exactly the stages whose code changed. An
edit that changes no manifest (a file no stage runs: the CLI, the docs generator) reruns this
stage alone, and leaves no MLflow run behind.
"""

from pathlib import Path

from ctxrep.codedeps import CODE_DIR, write_manifests
from ctxrep.lockfile import cache_dir, check_output, lock_outputs
from ctxrep.stage import stage

with stage("code", None) as ctx:
    written = write_manifests(CODE_DIR)
    before = lock_outputs(Path.cwd()).get(CODE_DIR.as_posix())
    if before and not check_output(Path.cwd(), CODE_DIR.as_posix(), before, cache_dir(Path.cwd())):
        ctx.unchanged()  # every manifest as dvc.lock records it: no stage's code changed
    ctx.summary(manifests=len(written))
