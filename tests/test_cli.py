"""The one entry point: every tool is a `ctxrep` subcommand."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ctxrep import cli
from tests.conftest import REPO


@pytest.mark.parametrize("name", sorted(cli.COMMANDS))
def test_every_command_builds_its_parser(name):
    add_arguments, run = cli._functions(name)
    parser = cli.argparse.ArgumentParser(prog=f"ctxrep {name}")
    add_arguments(parser)
    assert callable(run) and parser.format_help().startswith(f"usage: ctxrep {name}")


def test_help_lists_every_command_without_importing_them(capsys):
    code = ("import sys\nfrom ctxrep.cli import main\n"
            "try:\n    main(['--help'])\nexcept SystemExit as e:\n    assert e.code == 0\n"
            "heavy = [m for m in ('torch', 'mlflow', 'datasets', 'dvc') if m in sys.modules]\n"
            "assert not heavy, heavy\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    for name in cli.COMMANDS:
        assert name in out.stdout


def test_an_unknown_command_exits_2_naming_the_choices(capsys):
    with pytest.raises(SystemExit) as end:
        cli.main(["nope"])
    assert end.value.code == 2 and "check-params" in capsys.readouterr().err


def test_python_dash_m_ctxrep_is_the_command_line():
    out = subprocess.run([sys.executable, "-m", "ctxrep", "check-params", "no such profile"],
                         capture_output=True, text=True)
    assert out.returncode == 2 and "profile" in out.stderr


# Issue 61 F: each once a traceback, or exit 0 doing nothing sensible.
BAD_ARGUMENTS = [
    ["timings", "--out", "reports"],
    ["timings", "--out", ""],
    ["neighbors", "--word", "play", "--out", "reports"],
    ["neighbors", "--word", "play", "--k", "-1"],
    ["neighbors", "--word", "play", "--k", "0"],
    ["neighbors", "--word", "play", "--queries", "0"],
    ["neighbors", "--word", ""],
    ["neighbors", "--word", "play", "--model", "conf"],
    ["recipes", "--out", "reports/report.md"],
    ["recipes", "--target", "nan"],
    ["sweep", "--out", "reports/report.md"],
    ["fixture", "sst2", "--records", "-1"],
    ["fixture", "sst2", "--out", "README.md"],
    ["unpack", "all-MiniLM-L6-v2", "--root", "README.md"],
    ["perplexity", "conf", "README.md"],
    ["perplexity", "data/models/bilm", "README.md", "--json", "reports"],
    ["perplexity", "data/models/bilm", "README.md", "--max-tokens", "0"],
    ["compare", "--out", "reports"],
]


@pytest.mark.parametrize("argv", BAD_ARGUMENTS, ids=" ".join)
def test_each_bad_argument_is_one_line_and_a_nonzero_exit(tmp_path, argv):
    """One mechanism (ctxrep.cli.check_arguments) checks every subcommand's arguments before the
    command runs: one line naming the argument, exit status 2, nothing written."""
    import shutil
    import subprocess
    import sys

    (tmp_path / "reports").mkdir()
    (tmp_path / "reports/report.md").write_text("# a report\n")
    (tmp_path / "README.md").write_text("readme\n")
    shutil.copytree(REPO / "conf", tmp_path / "conf")
    (tmp_path / "data/models/bilm").mkdir(parents=True)
    (tmp_path / "data/models/bilm/config.json").write_text("{}")
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    proc = subprocess.run([sys.executable, "-m", "ctxrep", *argv], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"ctxrep {argv[0]}: "), proc.stderr
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


def test_every_numeric_or_output_argument_has_a_rule():
    """A new `--n` or `--out` of any subcommand must be listed in ctxrep.cli.ARGUMENTS, or its
    bad values reach the command unchecked."""
    import argparse
    from pathlib import Path

    from ctxrep import cli

    unchecked = []
    for name in cli.COMMANDS:
        add_arguments, _ = cli._functions(name)
        parser = argparse.ArgumentParser()
        add_arguments(parser)
        for action in parser._actions:
            numeric = action.type in (int, float)
            output = action.type is Path and action.dest in ("out", "json", "show_json", "root")
            if (numeric or output) and (name, action.dest) not in cli.ARGUMENTS:
                unchecked.append(f"{name} {action.option_strings or action.dest}")
    assert not unchecked, unchecked
