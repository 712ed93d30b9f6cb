"""Run the `tritonserver` binary shipped in the `nvidia-pytriton` wheel as a child process.

The server runs from its own virtual environment (`.venv-triton` at the repository root, created by
`scripts/bootstrap`; elsewhere with `ARENA_TRITON_ENV`), never from the app's: the wheel pins
numpy<2, and the Python-backend models run on that environment's interpreter and packages, just as
they run inside Triton's own container in production. This module only needs the standard library
to start it; the environment is inspected by asking its interpreter (`TritonEnvironment.locate`).

Why not `pytriton.triton.Triton`? PyTriton serves Python callables through its own proxy models;
Arena wants an ordinary Triton model repository (`config.pbtxt` + `1/model.py`) served exactly the
way a GPU deployment serves one, so that the client code is the same against both. This module does
the few things PyTriton does to make its bundled binary work, and nothing more:

* The Python-backend stub is shipped per Python version (`python_backend_stubs/3.X/`); Triton looks
  for it next to `libtriton_python.so`, so a private copy of the backends folder is assembled in a
  temporary workspace with the stub matching the Triton environment's interpreter.
* The stub links `libpython3.X.so` dynamically. That interpreter's own `LIBDIR` must come first on
  `LD_LIBRARY_PATH`, or the stub may pick up a different patch release of libpython from the system
  and fail while loading a model (`'_thread.RLock' object has no attribute '_recursion_count'`).
  The wheel's `nvidia_pytriton.libs` comes next because the copied stub's `$ORIGIN` rpath no longer
  points at it.
* The embedded interpreter locates its prefix by searching `PATH` for `python3`, so the Triton
  environment's `bin/` goes first on `PATH`; that is how models see that environment's packages
  (its numpy, not the app's).

Everything binds to 127.0.0.1 by default: the server is for this machine only. The Triton container
(docker/Dockerfile.triton) runs this same module with `--address 0.0.0.0`, because there the
container's private network is the boundary.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import ctypes.util
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

__all__ = [
    "TRITON_ENV_VARIABLE",
    "TritonEnvironment",
    "TritonEnvironmentError",
    "TritonServer",
    "TritonServerError",
    "default_triton_environment",
    "main",
]

# Python backend shared-memory sizes, as PyTriton sets them: the backend's 64 MiB default region per
# model instance is wasteful for text models; the region grows on demand.
_SHM_DEFAULT_BYTES = 4 * 1024 * 1024
_SHM_GROWTH_BYTES = 1024 * 1024


# Logged on every start on a machine without a GPU; not a reason for anything to fail.
_BENIGN_ERRORS = ("CudaDriverHelper has not been initialized",)


class TritonServerError(RuntimeError):
    """The server could not be started (or died while starting); the message holds its log tail."""


class TritonEnvironmentError(TritonServerError):
    """The Triton environment is missing or incomplete; the message says what to do."""


TRITON_ENV_VARIABLE = "ARENA_TRITON_ENV"
_REPOSITORY_ROOT = Path(__file__).resolve().parents[2]
_SETUP_HINT = (
    f"create it with scripts/bootstrap, or point {TRITON_ENV_VARIABLE} at a virtual environment holding nvidia-pytriton"
)

# Run by the Triton environment's interpreter: where its libpython and the pytriton package are.
# find_spec, not import: importing pytriton pulls in its whole client stack for nothing.
_PROBE = """
import importlib.util, json, sys, sysconfig
spec = importlib.util.find_spec("pytriton")
print(json.dumps({
    "version": "%d.%d" % sys.version_info[:2],
    "libdir": sysconfig.get_config_var("LIBDIR") or "",
    "pytriton": list(spec.submodule_search_locations) if spec and spec.submodule_search_locations else [],
}))
"""


def default_triton_environment() -> Path:
    """`$ARENA_TRITON_ENV`, else `.venv-triton` at the repository root (where scripts/bootstrap puts it)."""
    raw = os.environ.get(TRITON_ENV_VARIABLE, "").strip()
    return Path(raw).expanduser() if raw else _REPOSITORY_ROOT / ".venv-triton"


@dataclass(frozen=True)
class TritonEnvironment:
    """A virtual environment holding nvidia-pytriton: its interpreter and the server's files."""

    root: Path
    python: Path
    python_version: str  # "3.11": picks the matching Python-backend stub
    libdir: Path | None  # the interpreter's sysconfig LIBDIR, where its libpython3.X.so lives
    dist: Path  # .../site-packages/pytriton/tritonserver (bin/, backends/, caches/, stubs)

    @property
    def libs(self) -> Path:
        """The wheel's bundled shared libraries (`nvidia_pytriton.libs`, next to the package)."""
        return self.dist.parent.parent / "nvidia_pytriton.libs"

    @property
    def tritonserver(self) -> Path:
        return self.dist / "bin" / "tritonserver"

    @property
    def stub(self) -> Path:
        return self.dist / "python_backend_stubs" / self.python_version / "triton_python_backend_stub"

    @classmethod
    def locate(cls, root: Path | str | None = None) -> TritonEnvironment:
        """Inspect the environment at `root` (default: `default_triton_environment()`); raises
        TritonEnvironmentError, saying what is missing and how to create it, when it is not usable."""
        root = Path(root).expanduser() if root is not None else default_triton_environment()
        root = root.absolute()  # not resolve(): a venv's bin/python is a symlink out of the venv
        python = root / "bin" / "python"
        if not (python.is_file() and os.access(python, os.X_OK)):
            raise TritonEnvironmentError(f"no Triton environment at {root} (no {python}): {_SETUP_HINT}")
        try:
            # -I: the probe must see the Triton environment alone, not the caller's PYTHONPATH.
            probe = subprocess.run(
                [str(python), "-I", "-c", _PROBE], capture_output=True, text=True, timeout=60, check=True
            )
            facts = json.loads(probe.stdout)
        except (OSError, subprocess.SubprocessError, ValueError) as exc:
            detail = getattr(exc, "stderr", None) or exc
            raise TritonEnvironmentError(f"the Triton environment's interpreter {python} failed: {detail}") from exc
        if not facts["pytriton"]:
            raise TritonEnvironmentError(f"the Triton environment {root} has no nvidia-pytriton: {_SETUP_HINT}")
        env = cls(
            root=root,
            python=python,
            python_version=facts["version"],
            libdir=Path(facts["libdir"]) if facts["libdir"] else None,
            dist=Path(facts["pytriton"][0]) / "tritonserver",
        )
        if not env.tritonserver.is_file():
            raise TritonEnvironmentError(f"{env.tritonserver} is missing: nvidia-pytriton in {root} is incomplete")
        if not env.stub.is_file():
            raise TritonEnvironmentError(
                f"nvidia-pytriton ships no Python-backend stub for Python {env.python_version} "
                f"(the interpreter of {root}): recreate it with another Python (PYTHON=python3.X scripts/bootstrap)"
            )
        return env


def _free_port(avoid: int | None = None) -> int:
    """A port nothing listens on now (another process may still take it before Triton does: start()
    retries on that clash). ``avoid``: a port just picked, which the kernel may hand out again."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        if port != avoid:
            return port


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    # PR_SET_PDEATHSIG: if the Python process that started the server dies without stopping it (a
    # crashed test run), the kernel sends the server SIGTERM instead of leaving it bound to ports.
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    libc.prctl(1, signal.SIGTERM)


def _group_members_alive(pgid: int) -> bool:
    """Whether any process of the group still runs (zombies awaiting their reaper do not count)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # exited while we looked
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            return True
    return False


def _wait_group_gone(pgid: int, *, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while _group_members_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.05)


class TritonServer:
    """One `tritonserver` process serving the given model repositories on 127.0.0.1.

    Ports left as None are picked free at start. Metrics are disabled unless `metrics_port` is given.
    Use as a context manager, or call `start()` / `stop()`. Close every client before `stop()`:
    Triton waits for open connections and in-flight requests (up to `exit_timeout_s`) when it exits.

    The server gets SIGTERM from the kernel when the *thread* that started it exits (see
    `_die_with_parent`), so start it from a long-lived thread (the main thread, normally).

    `environment` is the Triton virtual environment (default: `default_triton_environment()`); a
    missing or incomplete one makes `start()` raise TritonEnvironmentError. `address` is the one
    the server binds to; the URLs below always use loopback, which reaches it either way.
    """

    def __init__(
        self,
        model_repositories: Sequence[Path | str],
        http_port: int | None = None,
        grpc_port: int | None = None,
        metrics_port: int | None = None,
        log_verbose: int = 0,
        *,
        startup_timeout_s: float = 60.0,
        exit_timeout_s: int = 5,
        stop_grace_s: float = 10.0,
        environment: Path | str | None = None,
        address: str = "127.0.0.1",
    ) -> None:
        if not model_repositories:
            raise ValueError("at least one model repository is required")
        self.model_repositories = [Path(p).resolve() for p in model_repositories]
        for repo in self.model_repositories:
            if not repo.is_dir():
                raise ValueError(f"model repository {repo} is not a directory")
        self._requested_ports = (http_port, grpc_port, metrics_port)
        self.http_port: int | None = http_port
        self.grpc_port: int | None = grpc_port
        self.metrics_port: int | None = metrics_port
        self.log_verbose = log_verbose
        self.startup_timeout_s = startup_timeout_s
        self.exit_timeout_s = exit_timeout_s
        self.stop_grace_s = stop_grace_s
        # Located at start (it runs the environment's interpreter once); None: the default place.
        self.environment_root = Path(environment) if environment is not None else default_triton_environment()
        self._environment: TritonEnvironment | None = None
        self.address = address
        self._process: subprocess.Popen[bytes] | None = None
        self._workspace: Path | None = None
        self._log_file: Path | None = None
        self._shm_prefix: str | None = None
        self._lock = threading.Lock()

    # -- addresses -------------------------------------------------------------------------------

    @property
    def http_url(self) -> str:
        """`127.0.0.1:PORT`, the form `tritonclient.http` expects."""
        if self.http_port is None:
            raise RuntimeError("server not started")
        return f"127.0.0.1:{self.http_port}"

    @property
    def grpc_url(self) -> str:
        """`127.0.0.1:PORT`, the form `tritonclient.grpc` expects."""
        if self.grpc_port is None:
            raise RuntimeError("server not started")
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def metrics_url(self) -> str | None:
        return None if self.metrics_port is None else f"http://127.0.0.1:{self.metrics_port}/metrics"

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    @property
    def log_path(self) -> Path | None:
        """The server's combined stdout/stderr while it runs (removed by `stop()`)."""
        return self._log_file

    def is_running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def log_tail(self, max_chars: int = 4000) -> str:
        """The end of the server's combined stdout/stderr (useful in error messages)."""
        if self._log_file is None or not self._log_file.exists():
            return ""
        data = self._log_file.read_bytes()[-max_chars:]
        return data.decode("utf-8", errors="replace")

    def failure_report(self, max_lines: int = 30) -> str:
        """The log's error lines (model load failures) and its last lines, for a start-up error.

        Triton prints wide padded tables, so a plain tail would be mostly spaces; the error lines
        (`E...`, protobuf parse errors, UNAVAILABLE rows of the model table) name the culprit.
        """
        lines = [" ".join(line.split()) for line in self.log_tail(1_000_000).splitlines()]
        errors = [
            line
            for line in lines
            if (re.match(r"E\d{4} ", line) or "ERROR" in line or "UNAVAILABLE" in line or "error:" in line)
            and not any(noise in line for noise in _BENIGN_ERRORS)
        ]
        tail = [line for line in lines if line.strip("+-| ")][-max_lines:]
        return "errors:\n" + "\n".join(errors[-max_lines:]) + "\nlog tail:\n" + "\n".join(tail)

    # -- life cycle ------------------------------------------------------------------------------

    def start(self) -> TritonServer:
        """Start the server and block until `/v2/health/ready` answers 200 (all models loaded)."""
        with self._lock:
            if self.is_running():
                raise RuntimeError(f"server already running (pid {self.pid})")
            if self._environment is None:
                self._environment = TritonEnvironment.locate(self.environment_root)
            attempts = 1 if all(p is not None for p in self._requested_ports[:2]) else 3
            for attempt in range(attempts):
                try:
                    self._start_once()
                    return self
                except TritonServerError as exc:
                    # A port picked free may have been taken before Triton bound it; try new ones.
                    port_clash = "already in use" in str(exc).lower()
                    self._stop_locked()
                    if not port_clash or attempt == attempts - 1:
                        raise
                except BaseException:  # Ctrl-C while waiting, say: leave no server behind
                    self._stop_locked()
                    raise
            raise AssertionError("unreachable")

    def _start_once(self) -> None:
        http_port, grpc_port, metrics_port = self._requested_ports
        self.http_port = http_port if http_port is not None else _free_port()
        self.grpc_port = grpc_port if grpc_port is not None else _free_port(avoid=self.http_port)
        self.metrics_port = metrics_port

        self._workspace = Path(tempfile.mkdtemp(prefix="arena-triton-"))
        # Shared-memory region names must not collide between servers on one machine.
        self._shm_prefix = f"arena{os.getpid()}_{self._workspace.name}_"
        backends_dir = self._prepare_backends(self._workspace)
        self._log_file = self._workspace / "tritonserver.log"
        cmd = self._command(backends_dir)
        with open(self._log_file, "wb") as log:
            self._process = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self._process_environment(),
                cwd=self._workspace,
                # Own session and process group: a Ctrl-C in the terminal reaches only us (and we
                # stop the server), and stop() can signal the server's model stubs as one group.
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        self._wait_ready()

    def _prepare_backends(self, workspace: Path) -> Path:
        assert self._environment is not None
        backends = workspace / "backends"
        shutil.copytree(self._environment.dist / "backends", backends, ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copy2(self._environment.stub, backends / "python" / "triton_python_backend_stub")
        return backends

    def _command(self, backends_dir: Path) -> list[str]:
        assert self._workspace is not None and self._environment is not None
        dist = self._environment.dist
        cmd = [
            str(self._environment.tritonserver),
            "--model-control-mode=none",
            "--strict-readiness=true",
            "--exit-on-error=true",
            f"--exit-timeout-secs={self.exit_timeout_s}",
            f"--log-verbose={self.log_verbose}",
            f"--backend-directory={backends_dir}",
            f"--cache-directory={dist / 'caches'}",
            "--allow-http=true",
            f"--http-address={self.address}",
            f"--http-port={self.http_port}",
            "--allow-grpc=true",
            f"--grpc-address={self.address}",
            f"--grpc-port={self.grpc_port}",
            f"--backend-config=python,shm-region-prefix-name={self._shm_prefix}",
            f"--backend-config=python,shm-default-byte-size={_SHM_DEFAULT_BYTES}",
            f"--backend-config=python,shm-growth-byte-size={_SHM_GROWTH_BYTES}",
        ]
        if self.metrics_port is None:
            cmd.append("--allow-metrics=false")
        else:
            cmd += [
                "--allow-metrics=true",
                "--allow-gpu-metrics=false",
                f"--metrics-address={self.address}",
                f"--metrics-port={self.metrics_port}",
            ]
        cmd += [f"--model-repository={repo}" for repo in self.model_repositories]
        return cmd

    def _process_environment(self) -> dict[str, str]:
        assert self._environment is not None
        triton = self._environment
        env = os.environ.copy()
        first = [str(p) for p in (triton.libdir, triton.libs) if p is not None]
        rest = env.get("LD_LIBRARY_PATH", "")
        env["LD_LIBRARY_PATH"] = ":".join(first + ([rest] if rest else []))
        env["PATH"] = f"{triton.root / 'bin'}:{env.get('PATH', '')}"
        env["VIRTUAL_ENV"] = str(triton.root)
        # The models' interpreter must see the Triton environment alone: a PYTHONPATH or PYTHONHOME
        # of the caller (the app's environment, numpy 2) would shadow its packages.
        env.pop("PYTHONPATH", None)
        env.pop("PYTHONHOME", None)
        # Models must not write __pycache__ into the model repositories: a stray folder at a
        # repository's top level would be taken for a model and fail the next start.
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        return env

    def _wait_ready(self) -> None:
        assert self._process is not None
        url = f"http://{self.http_url}/v2/health/ready"
        deadline = time.monotonic() + self.startup_timeout_s
        while True:
            code = self._process.poll()
            if code is not None:
                raise TritonServerError(f"tritonserver exited with code {code} while starting; {self.failure_report()}")
            try:
                with urllib.request.urlopen(url, timeout=1.0) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass  # not listening yet, or listening but not ready (HTTP 400)
            if time.monotonic() > deadline:
                raise TritonServerError(
                    f"tritonserver not ready after {self.startup_timeout_s:.0f} s; {self.failure_report()}"
                )
            time.sleep(0.1)

    def stop(self) -> None:
        """SIGTERM, wait for a clean exit, SIGKILL after `exit_timeout_s + stop_grace_s`."""
        with self._lock:
            self._stop_locked()

    def _stop_locked(self) -> None:
        process, self._process = self._process, None
        if process is not None:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(timeout=self.exit_timeout_s + self.stop_grace_s)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(timeout=10)
            # When Triton gives up on an in-flight request at exit, that model's Python-backend stub
            # is orphaned and never exits. The stubs share the server's process group (its own
            # session, see start), so one signal to the group ends them.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
            # SIGKILL is delivered asynchronously: wait until no member of the group still runs, so
            # that a stopped server has really released its processes, ports and shared memory.
            _wait_group_gone(process.pid, timeout_s=10.0)
        if self._shm_prefix is not None:
            for region in Path("/dev/shm").glob(f"{self._shm_prefix}*"):
                with contextlib.suppress(OSError):
                    region.unlink()
            self._shm_prefix = None
        if self._workspace is not None:
            shutil.rmtree(self._workspace, ignore_errors=True)
            self._workspace = None
            self._log_file = None

    def __enter__(self) -> TritonServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def wait(self) -> int:
        """Block until the server process exits; returns its exit code."""
        process = self._process
        if process is None:
            raise RuntimeError("server not started")
        return process.wait()


def main(argv: Sequence[str] | None = None) -> int:
    """Run a server in the foreground until SIGTERM/SIGINT: `python -m serving.triton.server`."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--model-repository",
        action="append",
        type=Path,
        default=None,
        help="model repository folder; repeat for several (default: the shipped serving/model_repository)",
    )
    parser.add_argument("--http-port", type=int, default=None, help="default: a free port")
    parser.add_argument("--grpc-port", type=int, default=None, help="default: a free port")
    parser.add_argument("--metrics-port", type=int, default=None, help="default: metrics disabled")
    parser.add_argument("--log-verbose", type=int, default=0)
    parser.add_argument("--address", default="127.0.0.1", help="bind address (default: loopback only)")
    parser.add_argument(
        "--environment",
        type=Path,
        default=None,
        help=f"the Triton virtual environment (default: ${TRITON_ENV_VARIABLE}, else .venv-triton in the repository)",
    )
    args = parser.parse_args(argv)
    repositories = args.model_repository or [Path(__file__).resolve().parents[1] / "model_repository"]

    stopping = threading.Event()

    def _request_stop(signum: int, _frame: object) -> None:
        stopping.set()

    signal.signal(signal.SIGTERM, _request_stop)
    signal.signal(signal.SIGINT, _request_stop)

    server = TritonServer(
        repositories,
        http_port=args.http_port,
        grpc_port=args.grpc_port,
        metrics_port=args.metrics_port,
        log_verbose=args.log_verbose,
        environment=args.environment,
        address=args.address,
    )
    try:
        server.start()
    except TritonServerError as exc:
        print(exc, file=sys.stderr)
        return 1
    try:
        print(f"Triton ready (pid {server.pid})", flush=True)
        print(f"  http:    {server.http_url}", flush=True)
        print(f"  grpc:    {server.grpc_url}", flush=True)
        if server.metrics_url:
            print(f"  metrics: {server.metrics_url}", flush=True)
        print(f"  log:     {server.log_path}", flush=True)
        while not stopping.wait(0.5):
            if not server.is_running():
                print(f"tritonserver exited unexpectedly; {server.failure_report()}", file=sys.stderr)
                return 1
        print("stopping Triton", flush=True)
        return 0
    finally:
        with contextlib.suppress(Exception):
            server.stop()


if __name__ == "__main__":
    raise SystemExit(main())
