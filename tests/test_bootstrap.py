"""scripts/bootstrap says what it installs and, during a long step (the llama-cpp-python build: minutes of
pip's silence), that it is still going, and how long each step took (issue 22.5). Its ``progress``
function, taken from the script itself, around commands that end when the test lets them."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROGRESS = subprocess.run(
    ["sed", "-n", "/^PROGRESS_EVERY_S=/,/^}/p", str(ROOT / "scripts" / "bootstrap")],
    capture_output=True,
    text=True,
    check=True,
).stdout


def _progress(tmp_path: Path, command: str) -> subprocess.CompletedProcess[str]:
    log = tmp_path / "out.log"
    script = (
        f"{PROGRESS}\nPROGRESS_EVERY_S=1\nprogress 'building the thing' {command} >{log} 2>&1\nstatus=$?\ncat {log}\n"
    )
    script += "exit $status\n"
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60, cwd=tmp_path)


def test_a_long_step_reports_that_it_is_still_going_and_how_long_it_took(tmp_path: Path) -> None:
    # The command ends only once a progress line has been written: however loaded the machine, one was.
    result = _progress(tmp_path, "bash -c 'until grep -q \"so far\" out.log; do sleep 0.1; done'")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "scripts/bootstrap: building the thing ..."
    assert any(
        line.startswith("scripts/bootstrap:   building the thing: ") and line.endswith(" s so far") for line in lines
    )
    assert lines[-1].startswith("scripts/bootstrap: building the thing: done in ") and lines[-1].endswith(" s")


def test_a_failing_step_says_so_and_fails_the_bootstrap(tmp_path: Path) -> None:
    result = _progress(tmp_path, "bash -c 'exit 3'")
    assert result.returncode == 3
    assert "scripts/bootstrap: building the thing failed after " in result.stdout
    assert "done in" not in result.stdout
