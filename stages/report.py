"""Stage report: the grid's metrics files → metrics/summary.json, reports/report.md,
reports/figures/.

Only this grid's cells are read (``grid.tasks`` × ``grid.feature_based`` + ``grid.fine_tuned``):
files left by a run of another grid are not mixed in; the learning curves are those of ``learning_curve``. The data
section lists every fetched task (``tasks``). Missing inputs are reported as missing; a
malformed one stops the stage naming the file.
"""

from pathlib import Path

from ctxrep import config
from ctxrep.report import ReportInputError, build_report, load_inputs, write_report
from ctxrep.report.build import FIGURES_DIR, HEADLINE_PATH, REPORT_PATH, SUMMARY_PATH
from ctxrep.report.summary import flat_numbers
from ctxrep.stage import log, stage

with stage("report", None) as ctx:
    try:
        grid = ctx.params["grid"]
        methods = config.grid_methods(grid, ctx.params["left_to_right"], ctx.params["hf"])
        inputs = load_inputs(".", list(grid["tasks"]), methods,
                             fetched=list(ctx.params["tasks"]), curve=ctx.params["learning_curve"])
    except ReportInputError as e:
        log.error("report: bad input: %s", e)
        raise SystemExit(2) from e
    report = build_report(inputs, profile=ctx.params["profile"])
    write_report(report, ".")
    if ctx.run:
        # The headline numbers, the report, its figures and the pipeline's record so far (DVC
        # writes each stage's dvc.lock entry when it ends) on this run and on the pipeline run,
        # where runs of the pipeline are compared.
        numbers = flat_numbers(report.summary, inputs.pretrain)
        ctx.run.log_metrics(numbers)
        ctx.run.log_pipeline_metrics(numbers)
        for path in (REPORT_PATH, SUMMARY_PATH, HEADLINE_PATH, FIGURES_DIR,
                     Path("dvc.lock")):
            if path.exists():
                ctx.run.log_artifact(path, "report")
                ctx.run.log_pipeline_artifact(path, "report")
    cells = report.summary["cells"]
    verdicts = [c["verdict"] for c in report.summary["claims"]]
    ctx.summary(tasks=len(cells), cells=sum(len(c) for c in cells.values()),
                figures=len(report.figures),
                claims=", ".join(f"{verdicts.count(v)} {v}" for v in sorted(set(verdicts))))
