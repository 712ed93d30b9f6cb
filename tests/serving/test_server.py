"""TritonServer life cycle: start, addresses, errors with the log tail, stop, foreground command."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from serving.triton.client import EndpointSpec, SamplingParams, generate
from serving.triton.server import TritonServer, TritonServerError

pytestmark = pytest.mark.triton

PROJECT_ROOT = Path(__file__).resolve().parents[2]
TEST_REPOSITORY = PROJECT_ROOT / "tests" / "serving" / "model_repository"


def _ready(url: str) -> int:
    with urllib.request.urlopen(f"http://{url}/v2/health/ready", timeout=2) as response:
        return int(response.status)


def _live_processes_in_group(pgid: int) -> list[int]:
    """Processes of a process group that are still running (zombies awaiting reaping excluded)."""
    live = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # exited while we looked
        state, pgrp = fields[0], int(fields[2])
        if pgrp == pgid and state not in ("Z", "X"):
            live.append(int(stat.parent.name))
    return live


def test_session_server_is_ready_on_loopback(triton_server):
    assert triton_server.metrics_url is None  # metrics are off unless a port is given
    assert triton_server.is_running()
    assert triton_server.http_url.startswith("127.0.0.1:")
    assert triton_server.grpc_url.startswith("127.0.0.1:")
    assert triton_server.http_url != triton_server.grpc_url
    assert _ready(triton_server.http_url) == 200
    with urllib.request.urlopen(f"http://{triton_server.http_url}/v2/models/zen-bigram/ready") as response:
        assert response.status == 200


def _metrics(url: str) -> bytes:
    # Triton opens its metrics port shortly after it reports ready: a refused connection is retried a while.
    deadline = time.monotonic() + 10
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                return bytes(response.read())
        except urllib.error.URLError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_start_stop_releases_processes_workspace_and_shared_memory(tmp_path):
    repository = tmp_path / "repo"
    for model in ("delay-fast", "sleepy"):
        shutil.copytree(TEST_REPOSITORY / model, repository / model)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        metrics_port = int(sock.getsockname()[1])
    with TritonServer([repository], metrics_port=metrics_port, exit_timeout_s=2) as server:
        pid = server.pid
        workspace = server._workspace
        shm_prefix = server._shm_prefix
        assert pid is not None and workspace is not None and workspace.is_dir()
        assert _ready(server.http_url) == 200
        assert server.metrics_url == f"http://127.0.0.1:{metrics_port}/metrics"
        assert b"nv_inference_request_success" in _metrics(server.metrics_url)
        # Leave requests in flight (one executing, one queued): Triton's exit timeout expires and
        # it exits without them, orphaning the sleepy model's stub unless stop() ends it.
        params = SamplingParams(temperature=1.0, top_p=1.0, max_tokens=4)
        for protocol, url in (("grpc", server.grpc_url), ("http", server.http_url)):
            assert not generate(EndpointSpec(url, protocol, "sleepy", timeout_s=0.5), "x", params).ok  # type: ignore[arg-type]
        assert list(Path("/dev/shm").glob(f"{shm_prefix}*"))
    assert not server.is_running()
    assert not workspace.exists()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert _live_processes_in_group(pid) == []  # no model stub survives the server
    assert not list(Path("/dev/shm").glob(f"{shm_prefix}*"))


def test_broken_repository_fails_with_the_log_tail(tmp_path):
    model = tmp_path / "repo" / "bad-model"
    (model / "1").mkdir(parents=True)
    (model / "config.pbtxt").write_text('backend: "python"\nthis is not protobuf text\n')
    server = TritonServer([tmp_path / "repo"], startup_timeout_s=30)
    with pytest.raises(TritonServerError, match="exited with code") as info:
        server.start()
    assert "bad-model" in str(info.value)  # the log tail names the culprit
    assert not server.is_running()


def test_missing_repository_is_rejected_before_starting(tmp_path):
    with pytest.raises(ValueError, match="not a directory"):
        TritonServer([tmp_path / "nowhere"])


def test_foreground_command_prints_urls_and_stops_on_sigterm(tmp_path):
    repository = tmp_path / "repo"
    shutil.copytree(TEST_REPOSITORY / "delay-fast", repository / "delay-fast")
    process = subprocess.Popen(
        [sys.executable, "-m", "serving.triton.server", "--model-repository", str(repository)],
        cwd=PROJECT_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        lines = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = process.stdout.readline()  # type: ignore[union-attr]
            if not line:
                break
            lines.append(line)
            if line.strip().startswith("grpc:"):
                break
        output = "".join(lines)
        http_line = next(line for line in lines if line.strip().startswith("http:"))
        assert _ready(http_line.split()[-1]) == 200, output
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
