"""Triton runs from its own virtual environment (nvidia-pytriton, numpy<2), never from the app's.

Only the test that asks a running model which interpreter it runs on needs the server; the others
inspect the environment or fail to find one, and start nothing."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import venv
from pathlib import Path

import numpy as np
import pytest
from django.conf import settings

from serving.triton.client import EndpointSpec, SamplingParams, generate
from serving.triton.server import (
    TRITON_ENV_VARIABLE,
    TritonEnvironment,
    TritonEnvironmentError,
    TritonServer,
    default_triton_environment,
)

ROOT = Path(__file__).resolve().parents[2]
MODEL_REPOSITORY = ROOT / "serving" / "model_repository"


def _free_ports(n: int) -> list[int]:
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in sockets]
    finally:
        for s in sockets:
            s.close()


def test_the_app_environment_is_on_numpy_2_without_the_triton_wheel():
    assert int(np.__version__.split(".")[0]) >= 2
    assert importlib.util.find_spec("pytriton") is None


def test_the_environment_is_a_setting_with_a_default_in_the_repository(monkeypatch, tmp_path):
    if TRITON_ENV_VARIABLE not in os.environ:
        assert settings.ARENA_TRITON_ENV == ROOT / ".venv-triton"
    monkeypatch.delenv(TRITON_ENV_VARIABLE, raising=False)
    assert default_triton_environment() == ROOT / ".venv-triton"
    monkeypatch.setenv(TRITON_ENV_VARIABLE, str(tmp_path / "elsewhere"))
    assert default_triton_environment() == tmp_path / "elsewhere"
    assert TritonServer([MODEL_REPOSITORY]).environment_root == tmp_path / "elsewhere"


def test_the_triton_environment_has_what_the_server_needs():
    env = TritonEnvironment.locate(settings.ARENA_TRITON_ENV)
    assert env.root == settings.ARENA_TRITON_ENV.absolute()
    assert env.tritonserver.is_file() and os.access(env.tritonserver, os.X_OK)
    assert env.stub.is_file()
    assert env.libs.is_dir()
    assert env.libdir is not None and any(env.libdir.glob(f"libpython{env.python_version}*.so*"))


def test_the_server_process_gets_the_triton_environment_first(monkeypatch):
    monkeypatch.setenv("LD_LIBRARY_PATH", "/opt/elsewhere/lib")
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    server = TritonServer([MODEL_REPOSITORY], environment=settings.ARENA_TRITON_ENV)
    server._environment = env = TritonEnvironment.locate(settings.ARENA_TRITON_ENV)
    process_env = server._process_environment()
    assert env.libdir is not None
    assert process_env["LD_LIBRARY_PATH"].split(":") == [str(env.libdir), str(env.libs), "/opt/elsewhere/lib"]
    assert process_env["PATH"].split(":")[0] == str(env.root / "bin")
    assert process_env["VIRTUAL_ENV"] == str(env.root)
    assert "PYTHONPATH" not in process_env  # the app's packages must not shadow the environment's


def test_a_missing_environment_fails_with_a_clear_message(tmp_path):
    server = TritonServer([MODEL_REPOSITORY], environment=tmp_path / "nowhere")
    with pytest.raises(TritonEnvironmentError) as caught:
        server.start()
    message = str(caught.value)
    assert f"no Triton environment at {tmp_path / 'nowhere'}" in message
    assert "scripts/bootstrap" in message and TRITON_ENV_VARIABLE in message
    assert not server.is_running()


def test_an_environment_without_the_wheel_fails_with_a_clear_message(tmp_path):
    venv.create(tmp_path / "bare", with_pip=False)
    with pytest.raises(TritonEnvironmentError, match="has no nvidia-pytriton: create it with scripts/bootstrap"):
        TritonEnvironment.locate(tmp_path / "bare")


@pytest.mark.server
def test_triton_serve_says_where_it_looked_when_the_environment_is_missing(tmp_path):
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "arena.settings.local", TRITON_ENV_VARIABLE: str(tmp_path / "gone")}
    result = subprocess.run(
        [sys.executable, "manage.py", "triton_serve"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 1
    assert f"Triton did not start: no Triton environment at {tmp_path / 'gone'}" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.triton
def test_models_run_on_the_triton_environments_interpreter_and_numpy(triton_server):
    answer = generate(
        EndpointSpec(triton_server.grpc_url, "grpc", "delay-fast"),
        "which python?",
        SamplingParams(temperature=1.0, top_p=1.0, max_tokens=8),
    )
    assert answer.ok, answer.error
    runtime = json.loads(answer.text)["_runtime"]
    assert Path(runtime["prefix"]).resolve() == Path(settings.ARENA_TRITON_ENV).resolve()
    assert int(runtime["numpy"].split(".")[0]) < 2  # the wheel's pin, while the app runs numpy 2


@pytest.mark.triton
@pytest.mark.server
def test_the_triton_environment_alone_runs_the_server_on_every_interface_as_its_container_does(tmp_path):
    """docker/Dockerfile.triton: the Triton environment's own interpreter runs `serving.triton.server`
    (standard library only) with `--address 0.0.0.0`."""
    repository = tmp_path / "repo"
    shutil.copytree(MODEL_REPOSITORY / "zen-bigram", repository / "zen-bigram")
    shutil.copy2(MODEL_REPOSITORY / "arena_ngram.py", repository / "arena_ngram.py")
    http_port, grpc_port = _free_ports(2)
    python = Path(settings.ARENA_TRITON_ENV) / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    process = subprocess.Popen(
        [
            str(python),
            "-m",
            "serving.triton.server",
            "--address",
            "0.0.0.0",
            "--http-port",
            str(http_port),
            "--grpc-port",
            str(grpc_port),
            "--model-repository",
            str(repository),
            "--environment",
            str(settings.ARENA_TRITON_ENV),
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert process.stdout is not None
        output = ""
        deadline = time.monotonic() + 90
        while "grpc:" not in output and time.monotonic() < deadline and process.poll() is None:
            output += process.stdout.readline()
        assert "Triton ready" in output, output + process.stdout.read() if process.poll() is not None else output
        # 127.0.0.2 is loopback too, but a socket bound to 127.0.0.1 alone does not answer there.
        with urllib.request.urlopen(f"http://127.0.0.2:{http_port}/v2/models/zen-bigram/ready", timeout=5) as r:
            assert r.status == 200
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
