"""``python -m ctxrep.dvc_cli ARGS``: DVC's own command line, as ``dvc ARGS`` runs it, less one
warning per output that nothing has made yet.

``dvc exp run`` checks out every output ``dvc.yaml`` declares before it runs anything. A stage
that this params file adds (a task or a method new to the grid) has no ``dvc.lock`` entry yet,
and DVC warns "No file hash info found for '…'. It won't be created." once per output: 40–50
lines when a task is added, before the run that makes them. ``ctxrep repro`` (``make repro``)
runs DVC through this module, which says it once.
"""

from __future__ import annotations

import logging
import sys

# The loggers and the message of dvc-data's checkout (tests/test_repro.py checks they still are).
CHECKOUT_LOGGERS = ("dvc_data.index.checkout", "dvc_data.hashfile.checkout")
MISSING = "No file hash info found for"


class NotMadeYet(logging.Filter):
    """Drops DVC's per-output warning; the first one becomes one line."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def filter(self, record: logging.LogRecord) -> bool:
        if not str(record.msg).startswith(MISSING):
            return True
        self.count += 1
        if self.count == 1:
            print("DVC: outputs of stages that have not run yet have nothing to check out; this "
                  "run makes them (DVC's warning for each is left out)", file=sys.stderr, flush=True)
        return False


def install() -> NotMadeYet:
    quiet = NotMadeYet()
    for name in CHECKOUT_LOGGERS:
        logging.getLogger(name).addFilter(quiet)
    return quiet


def main(argv: list[str] | None = None) -> int:
    from dvc.cli import main as dvc_main

    from ctxrep.launch import die_with_parent

    # `make repro` runs DVC in a process group of its own; were `ctxrep repro` killed with -9,
    # DVC would carry on alone. It gets SIGTERM instead, and its stages theirs in turn.
    die_with_parent()
    install()
    return dvc_main(sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    sys.exit(main())
