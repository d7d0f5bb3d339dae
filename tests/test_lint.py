"""The code passes the linter configured in pyproject.toml (`make lint`): pyflakes finds no unused
import, undefined name or dead f-string, and pycodestyle no line past the configured width."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_ruff_finds_nothing():
    ruff = Path(sys.executable).with_name("ruff")
    ruff = str(ruff) if ruff.exists() else shutil.which("ruff")
    assert ruff, "ruff is not installed: `make` installs it (requirements.lock)"
    out = subprocess.run([ruff, "check", "--no-cache", "src", "tests", "bench", "stages"], cwd=REPO,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
