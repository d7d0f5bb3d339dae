"""`dvc plots show/diff` render offline: .dvc/config points DVC at .dvc/plots/offline.html, a
page with vega, vega-lite and vega-embed inline (.dvc/plots/build_offline_html.py), and the
top-level `plots:` of dvc.yaml overlay each family of curves on one chart with the Vega-Lite
templates in .dvc/plots/. Fast: parsing, and one `dvc plots show` in a scratch repo."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from tests.conftest import REPO

DVC_DIR = REPO / ".dvc"
REMOTE_SCRIPT = re.compile(r"""<script\b[^>]*\bsrc\s*=\s*["']?\s*(https?:)?//""", re.I)


def html_template() -> Path:
    """The page .dvc/config names, resolved as DVC resolves it: a relative path against .dvc/."""
    from configobj import ConfigObj

    value = ConfigObj(str(DVC_DIR / "config"))["plots"]["html_template"]
    return Path(value) if os.path.isabs(value) else DVC_DIR / value


def inline_scripts(page: str) -> dict[str, str]:
    """name@version -> the text of each inline library of the page."""
    return dict(re.findall(r'<script type="text/javascript" data-package="([^"]+)">(.*?)</script>',
                           page, re.S))


def test_the_configured_page_is_offline_and_has_dvcs_placeholder():
    path = html_template()
    assert path.is_file(), f"{path}: DVC would read the path itself as the page and fail"
    page = path.read_text(encoding="utf-8")
    assert page.count("{plot_divs}") == 1
    # DVC adds its CDN <script src> tags at {scripts}: the page has no such placeholder.
    assert "{scripts}" not in page
    assert not REMOTE_SCRIPT.search(page)
    assert "vegaEmbed" in page


def test_the_inline_libraries_are_the_versions_dvc_pins_byte_for_byte():
    """The versions DVC's renderer would load from the CDN (a DVC upgrade that changes them
    fails here: `make plots-template`), each file's sha256 as the page's header lists it."""
    from dvc_render.vega import VegaRenderer

    pinned = re.findall(r'src="https://cdn\.jsdelivr\.net/npm/([^"]+)"', VegaRenderer.SCRIPTS)
    page = html_template().read_text(encoding="utf-8")
    scripts = inline_scripts(page)
    assert list(scripts) == pinned == ["vega@5.20.2", "vega-lite@5.2.0", "vega-embed@6.18.2"]
    for spec, js in scripts.items():
        listed = re.search(rf"^\s*{re.escape(spec)} \S+ (\d+) bytes sha256=([0-9a-f]{{64}}) ",
                           page, re.M)
        assert listed, spec
        data = js.encode("utf-8")
        assert (len(data), hashlib.sha256(data).hexdigest()) == (int(listed[1]), listed[2]), spec


def top_level_plots() -> dict[str, dict]:
    plots = yaml.safe_load((REPO / "dvc.yaml").read_text())["plots"]
    return {k: v for entry in plots for k, v in entry.items()}


def test_each_top_level_plot_has_a_title_and_a_template_that_exists():
    import json

    for plot_id, plot in top_level_plots().items():
        assert plot.get("title"), plot_id
        template = DVC_DIR / "plots" / f"{plot['template']}.json"
        assert "<DVC_METRIC_DATA>" in json.dumps(json.loads(template.read_text())), plot_id


def test_the_transfer_chart_draws_the_reports_table_of_every_cell():
    """One file for any grid: the report stage's long table, an output of that stage."""
    from ctxrep.report.build import TRANSFER_CURVES_PATH

    plot = top_level_plots()[TRANSFER_CURVES_PATH.as_posix()]
    assert (plot["x"], plot["y"]) == ("epoch", "dev")
    (report,) = [s for s in yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"].values()
                 if s.get("cmd") == "python -m ctxrep.launch stages/report.py"]
    assert TRANSFER_CURVES_PATH.as_posix() in [next(iter(o)) if isinstance(o, dict) else o
                                               for o in report["outs"]]


def test_dvc_plots_show_writes_a_page_with_no_remote_script(tmp_path):
    """A scratch git+DVC repo with the project's DVC config and templates and the report's
    curve table of two tasks: `dvc plots show` fills the offline page with one chart."""
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    (repo / ".dvc").mkdir()
    shutil.copy2(DVC_DIR / "config", repo / ".dvc" / "config")
    shutil.copytree(DVC_DIR / "plots", repo / ".dvc" / "plots")
    from ctxrep.report.build import transfer_curve_table
    from ctxrep.transfer.record import CellRecord

    def cell(task, method, dev):
        return CellRecord(task, method, "tagging", "token_accuracy", ["token_accuracy"],
                          "token_accuracy", "test", seeds=[0, 1],
                          curves=[{"dev": dev, "train_loss": [0.9, 0.7]}] * 2)

    table = repo / "reports" / "transfer_curves.tsv"
    table.parent.mkdir()
    table.write_text(transfer_curve_table({
        "t1": {"static": cell("t1", "static", [0.5, 0.6]), "elmo": cell("t1", "elmo", [0.6, 0.7])},
        "t2": {"elmo": cell("t2", "elmo", [0.2, 0.3])}}))
    (repo / "dvc.yaml").write_text(yaml.safe_dump({"plots": [{"reports/transfer_curves.tsv": {
        "template": "transfer_tasks", "title": "dev per epoch", "x": "epoch", "y": "dev"}}]}))
    env = {**os.environ, "DVC_SITE_CACHE_DIR": str(tmp_path / "site-cache"),
           "DVC_NO_ANALYTICS": "1"}
    proc = subprocess.run([sys.executable, "-m", "dvc", "plots", "show", "--out", "out"],
                          cwd=repo, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "failed" not in proc.stderr.lower(), proc.stderr
    page = (repo / "out" / "index.html").read_text(encoding="utf-8")
    assert not REMOTE_SCRIPT.search(page)
    assert list(inline_scripts(page)) == ["vega@5.20.2", "vega-lite@5.2.0", "vega-embed@6.18.2"]
    assert "{plot_divs}" not in page and page.count("vegaEmbed('#") == 1
    assert "dev per epoch" in page and '"task": "t2"' in page and '"method": "static"' in page

