"""The one entry point: every tool is a `ctxrep` subcommand."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ctxrep import cli


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
