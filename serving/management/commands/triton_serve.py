"""``manage.py triton_serve``: run the Triton server (nvidia-pytriton's binary, from the Triton
environment ``ARENA_TRITON_ENV``) on loopback ports.

Waits for readiness, prints the addresses, and stops cleanly on Ctrl-C or SIGTERM."""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from serving.triton.server import TritonServer, TritonServerError


class Command(BaseCommand):
    help = "Serve the model repository with a local Triton server until interrupted."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--model-repository",
            action="append",
            type=Path,
            help="Repeatable; default: the shipped serving/model_repository (and serving/llm_model_repository "
            "when ARENA_REAL_MODELS is on).",
        )
        parser.add_argument("--http-port", type=int, default=settings.ARENA_TRITON_HTTP_PORT)
        parser.add_argument("--grpc-port", type=int, default=settings.ARENA_TRITON_GRPC_PORT)
        parser.add_argument(
            "--environment",
            type=Path,
            default=settings.ARENA_TRITON_ENV,
            help="The Triton virtual environment; default: ARENA_TRITON_ENV, else .venv-triton.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        default = [Path(settings.ARENA_MODEL_REPOSITORY)]
        if settings.ARENA_REAL_MODELS:
            default.append(Path(settings.ARENA_LLM_MODEL_REPOSITORY))
        repositories = options["model_repository"] or default
        server = TritonServer(
            repositories,
            http_port=options["http_port"],
            grpc_port=options["grpc_port"],
            environment=options["environment"],
        )
        # Ctrl-C and SIGTERM only set a flag: whenever they arrive (even while the server is still
        # starting), the `with` below is what stops the server, never an exception from a random line.
        stop = threading.Event()
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: stop.set())
        try:
            with server:
                self.stdout.write(
                    self.style.SUCCESS(
                        f"Triton ready: grpc {server.grpc_url}, http {server.http_url} (Ctrl-C stops it)"
                    )
                )
                while not stop.is_set() and server.is_running():
                    stop.wait(0.5)
                if stop.is_set():
                    self.stdout.write("Stopping Triton ...")
                    return
                code = server.wait()
                report = server.failure_report()  # before stop() removes the log with the workspace
        except TritonServerError as exc:  # raised by start(): a missing environment, a model that fails
            raise CommandError(f"Triton did not start: {exc}") from exc
        self.stderr.write(f"Triton exited on its own with status {code}:\n{report}")
        raise SystemExit(code or 1)
