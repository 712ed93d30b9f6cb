"""``manage.py triton_serve`` starts a real Triton on loopback, answers, and stops on SIGTERM."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

# It starts a real Triton (its own, not the session's): a `triton` test like those that use the fixture.
pytestmark = [pytest.mark.server, pytest.mark.triton]

ROOT = Path(__file__).resolve().parents[2]


def _free_ports(n: int) -> list[int]:
    """n distinct free ports (all held open while choosing, so no two picks can coincide)."""
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def test_triton_serve_command_serves_and_stops_cleanly():
    http_port, grpc_port = _free_ports(2)
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "arena.settings.local", "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        [sys.executable, "manage.py", "triton_serve", "--http-port", str(http_port), "--grpc-port", str(grpc_port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        deadline = time.monotonic() + 90
        while "Triton ready" not in line and time.monotonic() < deadline and process.poll() is None:
            line = process.stdout.readline()
        if f"grpc 127.0.0.1:{grpc_port}" not in line:
            process.kill()
            pytest.fail(f"no ready line; output:\n{line}{process.stdout.read()}")
        with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/v2/models/zen-bigram/ready", timeout=5) as r:
            assert r.status == 200
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0
    finally:
        if process.poll() is None:
            process.kill()
    with socket.socket() as s:  # nothing listens there any more (REUSEADDR: TIME_WAIT does not count)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", http_port))
        s.listen()
