"""The one entry point: every tool is a `ctxrep` subcommand."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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
    ["neighbors", "--word", "play", "--model", "data/models/bilm", "--corpus", "nosuch"],
    ["recipes", "--out", "reports/report.md"],
    ["recipes", "--target", "nan"],
    ["recipes", "--reference", ""],
    ["recipes", "--model", "gpt2"],
    ["sweep", "--out", "reports/report.md"],
    ["objectives", "plan", "--budgets", "0"],
    ["objectives", "plan", "--budgets", "many"],
    ["objectives", "plan"],
    ["objectives", "collect", "--metrics", "no/such/folder"],
    ["objectives", "survey"],
    ["sweep", "--claim", "elmo"],
    ["sweep", "--experiments", " "],
    ["fixture", "sst2", "--records", "-1"],
    ["fixture", "sst2", "--out", "README.md"],
    ["fixture", "no_such_task"],
    ["pin", "no_such_task"],
    ["pin", ""],
    ["unpack", "all-MiniLM-L6-v2", "--root", "README.md"],
    ["unpack", "no-such-checkpoint"],
    ["perplexity", "conf", "README.md"],
    ["perplexity", "data/models/bilm", "README.md", "--json", "reports"],
    ["perplexity", "data/models/bilm", "README.md", "--max-tokens", "-1"],
    ["perplexity", "data/models/bilm", "no-such-text"],
    ["perplexity", "data/models/bilm", "reports"],
    ["compare", "--out", "reports"],
    ["compare", "--against", "README.md"],
    ["compare", "no-such-commit"],
    ["repro", ""],
    ["repro", "tiny", "--no-such-flag"],
    ["check-params", "no-such-profile"],
    ["check-params", "tiny", "no_such_section.x=1"],
    ["verify", "--repair=yes"],
    ["docs", "--root", "no-such-folder"],
    ["import-elmo", "no-options.json", "no-weights.hdf5", "out"],
    ["import-elmo", "README.md", "README.md", "README.md"],
    ["export-elmo", "no-such-model", "out"],
    ["export-elmo", "data/models/bilm", "README.md"],
    ["import-bert", "", "out"],
    ["import-bert", "conf", "README.md"],
]


# Run in a child process, all cases one after the other: the commands set up logging (DVC's
# included) on the stderr they find, which must not be a test's captured stream.
FEED_BAD_ARGUMENTS = """
import contextlib, io, json, sys
from pathlib import Path
from ctxrep import cli

def files():
    return sorted(str(p) for p in Path(".").rglob("*"))

results = []
for argv in json.loads(sys.argv[1]):
    before, err = files(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            cli.main(argv)
            code = 0
        except SystemExit as end:
            code = end.code
    results.append({"code": code, "err": err.getvalue(), "wrote": files() != before})
print(json.dumps(results))
"""


@pytest.fixture(scope="module")
def bad_argument_results(tmp_path_factory):
    """Each case of BAD_ARGUMENTS run by ``ctxrep.cli.main`` in a folder holding a report, a
    README, conf/ and a (fake) saved model: its exit status, stderr, and whether it wrote."""
    import json
    import shutil

    root = tmp_path_factory.mktemp("bad-arguments")
    (root / "reports").mkdir()
    (root / "reports/report.md").write_text("# a report\n")
    (root / "README.md").write_text("readme\n")
    shutil.copytree(REPO / "conf", root / "conf")
    (root / "data/models/bilm").mkdir(parents=True)
    (root / "data/models/bilm/config.json").write_text("{}")
    out = subprocess.run([sys.executable, "-c", FEED_BAD_ARGUMENTS, json.dumps(BAD_ARGUMENTS)],
                         cwd=root, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return dict(zip(map(" ".join, BAD_ARGUMENTS), json.loads(out.stdout.splitlines()[-1])))


@pytest.mark.parametrize("argv", BAD_ARGUMENTS, ids=" ".join)
def test_each_bad_argument_is_one_line_and_a_nonzero_exit(bad_argument_results, argv):
    """One mechanism (ctxrep.cli.check_arguments, and argparse's refusals in one line) checks
    every subcommand's arguments before the command runs: one line naming the problem, exit
    status 2, nothing written."""
    result = bad_argument_results[" ".join(argv)]
    assert result["code"] == 2, result
    lines = result["err"].strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ctxrep"), result
    assert not result["wrote"], result


def test_every_subcommand_is_fed_bad_arguments():
    assert {argv[0] for argv in BAD_ARGUMENTS} == set(cli.COMMANDS)


def test_every_argument_that_takes_a_value_has_a_rule():
    """A new argument of any subcommand must be listed in ctxrep.cli.ARGUMENTS (or judged by
    argparse through its choices or a checking type, or by the command, COMMAND_CHECKS), or its
    bad values reach the command unchecked."""
    import argparse

    unchecked = []
    for name in cli.COMMANDS:
        add_arguments, _ = cli._functions(name)
        parser = argparse.ArgumentParser()
        add_arguments(parser)
        for action in parser._actions:
            if action.nargs == 0 or action.dest == "help":
                continue  # a flag
            by_argparse = action.choices is not None or action.type not in (None, str, int,
                                                                             float, Path)
            if not by_argparse and (name, action.dest) not in {**cli.ARGUMENTS,
                                                                **cli.COMMAND_CHECKS}:
                unchecked.append(f"{name} {action.option_strings or action.dest}")
    assert not unchecked, unchecked
