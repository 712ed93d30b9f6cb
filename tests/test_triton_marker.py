"""`pytest -m "not triton"` never starts Triton, and a test cannot use the server without the marker.

Each check runs a small pytest in a subprocess with the Triton environment pointed at a folder that
does not exist: any attempt to start the server there fails loudly (TritonEnvironmentError), so a
clean run proves that nothing tried."""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pytestmark = pytest.mark.server

ROOT = Path(__file__).resolve().parents[1]
NO_TRITON = "/nonexistent/arena-triton-env"


def _pytest(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "ARENA_TRITON_ENV": NO_TRITON,
        # Its own database: the outer session's test database is in use.
        "DATABASE_URL": f"sqlite:///{tmp_path / 'subsession.sqlite3'}",
    }
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-q",
            "-c",
            str(ROOT / "pyproject.toml"),
            "--rootdir",
            str(ROOT),
            *args,
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


# Modules that mix tests that generate answers (marked) with tests that do not, plus one that is all
# Triton: the base fixtures (acme, globex, alice, bob, charlie) run in the unmarked ones.
MIXED = ["tests/raters/test_tenancy.py", "tests/battles/test_caps.py", "tests/serving/test_server.py"]


def test_not_triton_runs_the_base_world_without_starting_triton(tmp_path):
    # The sub-session's database made from the models (--nomigrations: under a second, where the migrations
    # take seconds): what it proves is which tests ran and that nothing started Triton, not the migrations,
    # which every other session of the suite runs.
    result = _pytest(tmp_path, "-m", "not triton", "--nomigrations", *MIXED)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    summary = result.stdout.strip().splitlines()[-1]
    assert " passed" in summary and " deselected" in summary, summary
    assert "error" not in summary


def test_a_triton_test_in_the_same_run_would_have_tried_to_start_it(tmp_path):
    """The control: the same set-up does catch a start (so the run above proves something)."""
    result = _pytest(tmp_path, "-m", "triton", "tests/serving/test_server.py::test_session_server_is_ready_on_loopback")
    assert result.returncode != 0
    assert f"no Triton environment at {NO_TRITON}" in result.stdout


def test_using_the_triton_server_without_the_marker_fails_collection(tmp_path):
    def probe(name: str, source: str) -> Path:
        folder = tmp_path / name
        folder.mkdir()
        (folder / "conftest.py").write_text("from tests.conftest import *  # noqa: F403\n")
        (folder / "test_probe.py").write_text(source)
        return folder / "test_probe.py"

    mixed = probe(
        "mixed",
        "import pytest\n\n"
        "def test_unmarked(triton_server):\n    pass\n\n"
        "@pytest.mark.triton\n"
        "def test_marked(triton_server):\n    pass\n",
    )
    marked = probe("marked", "import pytest\n\n@pytest.mark.triton\ndef test_marked(triton_server):\n    pass\n")
    # The two sub-sessions are independent (a folder each): they run at once.
    with ThreadPoolExecutor(max_workers=2) as pool:
        # Even when the unmarked test would be deselected: the check sees every collected test.
        refused = pool.submit(_pytest, mixed.parent, "--collect-only", "-m", "not triton", str(mixed))
        accepted = pool.submit(_pytest, marked.parent, "--collect-only", str(marked))
    result = refused.result()
    assert result.returncode == pytest.ExitCode.USAGE_ERROR
    assert "lack the `triton` marker" in result.stderr and "test_unmarked" in result.stderr
    assert "test_marked" not in result.stderr

    result = accepted.result()
    assert result.returncode == 0, result.stdout + result.stderr
