"""Stages forked from a warm process (ctxrep.warm, CTXREP_WARM=1): the stage gets the
launcher's arguments, streams, environment and exit status, sees its launcher where it looks
for DVC, dies with its launcher, and the warm process ends when asked.

That a forked stage writes the same bytes as one started afresh is checked by ``.ci/run`` (the
tiny pipeline both ways, one dvc.lock)."""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from ctxrep import warm
from tests.conftest import gone

LAUNCH = [sys.executable, "-m", "ctxrep.launch"]

ECHO = """import os, sys
print('args', sys.argv[1:], os.environ.get('MARK'))
print('warm', 'torch' in sys.modules, 'ctxrep' in sys.modules, os.environ.get('CTXREP_WARM_LAUNCHER'))
print('to stderr', file=sys.stderr)
sys.exit(int(sys.argv[1]))
"""


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "stages").mkdir()
    (tmp_path / "stages/echo.py").write_text(ECHO)
    (tmp_path / "stages/sleep.py").write_text(
        "import os, time, pathlib\npathlib.Path('pid').write_text(str(os.getpid()))\n"
        "time.sleep(60)\npathlib.Path('done').write_text('x')\n")
    sockets = Path(tempfile.mkdtemp(prefix="ctxrep-warm-test-"))  # a socket path has 107 bytes
    env = {**os.environ, "CTXREP_WARM": "1", warm.FOLDER_ENV: str(sockets), "MARK": "m1"}
    yield tmp_path, env, sockets
    warm.stop(sockets)
    shutil.rmtree(sockets, ignore_errors=True)


def test_a_warm_stage_gets_the_launchers_arguments_streams_environment_and_status(folder):
    root, env, sockets = folder
    for code in (0, 3):
        proc = subprocess.Popen([*LAUNCH, "stages/echo.py", str(code)], cwd=root, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == code, err
        assert f"args ['{code}'] m1" in out and "to stderr" in err
        # forked from the process that had torch loaded (not ctxrep: the stage imports the
        # project's modules from their files as they are now), and told who its launcher is
        assert f"warm True False {proc.pid}" in out, out


def test_a_warm_stage_dies_with_its_launcher_and_the_warm_process_ends_when_asked(folder):
    root, env, sockets = folder
    subprocess.run([*LAUNCH, "stages/echo.py", "0"], cwd=root, env=env, timeout=300)  # warm up
    launcher = subprocess.Popen([*LAUNCH, "stages/sleep.py"], cwd=root, env=env)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (root / "pid").exists():
        time.sleep(0.05)
    time.sleep(0.2)  # the pid is written whole
    stage = int((root / "pid").read_text())
    assert stage != launcher.pid  # forked, not exec'd
    launcher.send_signal(signal.SIGKILL)
    launcher.wait()
    assert gone(stage, seconds=5), "the stage outlived its launcher"
    assert not (root / "done").exists()
    [pid_file] = sockets.glob("*.pid")
    server = int(pid_file.read_text())
    warm.stop(sockets)
    assert gone(server, seconds=10), "the warm process did not end when asked"



def test_a_warm_process_that_cannot_start_is_said_and_the_stage_starts_afresh(folder, tmp_path):
    root, env, sockets = folder
    broken = tmp_path / "broken"
    (broken / "dvclive").mkdir(parents=True)  # a library the warm process loads, the stage not
    (broken / "dvclive/__init__.py").write_text("raise ImportError('broken on purpose')\n")
    env = {**env, "PYTHONPATH": os.pathsep.join([str(broken), env.get("PYTHONPATH", "")])}
    proc = subprocess.run([*LAUNCH, "stages/echo.py", "3"], cwd=root, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 3, proc.stderr
    assert "warm False False None" in proc.stdout  # started afresh: nothing preloaded
    [said] = [line for line in proc.stderr.splitlines() if line.startswith("ctxrep.launch:")]
    assert "no warm process" in said and "broken on purpose" in said and "afresh" in said
