"""``python -m ctxrep ...``: the ``ctxrep`` command line."""

from ctxrep.cli import main

raise SystemExit(main())
