"""The Makefile never lets a value given to make run a command: variables pasted into a recipe
must be one plain word, and no value from the command line or the environment may hold a `$`
that make itself would expand (`$(shell ...)`). Each hostile value here would create a marker
file if it reached a shell; make must refuse it, naming the variable, before any recipe runs."""

import os
import shutil
import stat
import subprocess

import pytest

from tests.conftest import REPO

# Prerequisites taken as up to date: these tests run recipes, never the install.
UP_TO_DATE = ["-o", ".venv/.installed", "-o", "published/all-MiniLM-L6-v2/model.safetensors"]


def make(tmp_path, *args, env=None, dry_run=False):
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    shutil.copy2(REPO / "Makefile", work / "Makefile")
    return subprocess.run(["make", "-s", *(["-n"] if dry_run else []), *UP_TO_DATE, *args],
                          cwd=work, env={**os.environ, **(env or {})}, capture_output=True,
                          text=True, timeout=120)


HOSTILE = [  # (target, variable, value with {m} for the marker)
    ("exp-show", "DVC", "touch {m}; true"),
    ("exp-show", "DVC", "$$(touch {m})"),
    ("exp-show", "DVC", "$(shell touch {m})"),
    ("exp-show", "BIN", "/usr/bin;touch {m};"),
    ("exp-show", "VENV", "$(shell touch {m})"),
    ("exp-show", "PARAM_SECTIONS", "a'; touch {m}; '"),
    ("venv", "PYTHON", "touch {m} &&"),
    ("venv", "UV_VERSION", "0.1 `touch {m}`"),
    ("test", "TEST_WORKERS", "2; touch {m}"),
    ("test", "PYTEST_ARGS", "$(shell touch {m})"),
    ("repro", "PROFILE", "$(shell touch {m})"),
    ("repro", "CTXREP_DATA_MIRROR", "$(shell touch {m})"),
]


@pytest.mark.parametrize("dry_run", [False, True], ids=["make", "make -n"])
@pytest.mark.parametrize("target,name,value", HOSTILE)
def test_a_hostile_variable_is_refused_before_anything_runs(tmp_path, target, name, value,
                                                            dry_run):
    marker = tmp_path / "pwned"
    proc = make(tmp_path, target, f"{name}={value.format(m=marker)}", dry_run=dry_run)
    assert not marker.exists(), f"{name} ran a command"
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"{name}='" in proc.stderr and "refused" in proc.stderr, proc.stderr
    assert proc.stdout == ""  # not even `make -n` printed a recipe


def test_a_hostile_value_from_the_environment_is_refused_too(tmp_path):
    marker = tmp_path / "pwned"
    proc = make(tmp_path, "exp-show", env={"DVC": f"touch {marker}; true"})
    assert proc.returncode == 2 and not marker.exists()
    assert "DVC='touch" in proc.stderr and "refused" in proc.stderr


def test_plain_values_still_work(tmp_path):
    proc = make(tmp_path, "exp-show", "DVC=/opt/dvc-3.1/bin/dvc", "PYTHON=python3.11",
                dry_run=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("/opt/dvc-3.1/bin/dvc exp show --md --drop")


def test_pytest_args_reach_pytest_verbatim_and_never_a_shell(tmp_path):
    """PYTEST_ARGS travels in the environment (pytest reads PYTEST_ADDOPTS and splits it
    itself): quotes work as before, and `;` is only a character of a -k expression."""
    fake = tmp_path / "bin"
    fake.mkdir()
    seen = tmp_path / "seen"
    (fake / "python").write_text(f'#!/usr/bin/env bash\nprintf "%s\\n" "$PYTEST_ADDOPTS" "$*" '
                                 f'> {seen}\n')
    (fake / "python").chmod(0o755 | stat.S_IEXEC)
    marker = tmp_path / "pwned"
    args = f'-k "share or (config)"; touch {marker}'
    proc = make(tmp_path, "test-fast", f"BIN={fake}", f"PYTEST_ARGS={args}", "TEST_WORKERS=3",
                env={"PYTEST_ADDOPTS": ""})
    assert proc.returncode == 0, proc.stderr
    assert not marker.exists()
    addopts, argv = seen.read_text().splitlines()
    assert addopts.strip() == args
    assert argv == "-m pytest -q -n 3 -m not slow"
