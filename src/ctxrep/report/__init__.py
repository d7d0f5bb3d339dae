"""The report: tables, findings and plots from every stage's small metrics files.

    inputs = load_inputs(".", tasks, methods)      # missing files → None; malformed → error
    write_report(build_report(inputs), ".")        # summary.json, report.md, figures/*.png

Modules: :mod:`inputs` (reading, validation), :mod:`summary` (``metrics/summary.json``),
:mod:`tables` (Tables 1-3 analogs), :mod:`findings` (what reproduced, from the numbers),
:mod:`plots` (deterministic PNGs), :mod:`published` (the papers' numbers), :mod:`build`.
"""

from ctxrep.report.build import Report, build_report, write_report
from ctxrep.report.inputs import ReportInputError, load_inputs

__all__ = ["Report", "ReportInputError", "build_report", "load_inputs", "write_report"]
