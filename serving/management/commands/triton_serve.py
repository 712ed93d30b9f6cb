"""``manage.py triton_serve``: run the Triton server (nvidia-pytriton's binary) on loopback ports.

Waits for readiness, prints the addresses, and stops cleanly on Ctrl-C or SIGTERM."""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand

from serving.triton.server import TritonServer


class Command(BaseCommand):
    help = "Serve the model repository with a local Triton server until interrupted."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--model-repository", action="append", type=Path,
                            help="Repeatable; default: the shipped serving/model_repository.")
        parser.add_argument("--http-port", type=int, default=settings.ARENA_TRITON_HTTP_PORT)
        parser.add_argument("--grpc-port", type=int, default=settings.ARENA_TRITON_GRPC_PORT)

    def handle(self, *args: Any, **options: Any) -> None:
        repositories = options["model_repository"] or [Path(settings.ARENA_MODEL_REPOSITORY)]
        server = TritonServer(repositories, http_port=options["http_port"], grpc_port=options["grpc_port"])
        # Ctrl-C and SIGTERM only set a flag: whenever they arrive (even while the server is still
        # starting), the `with` below is what stops the server, never an exception from a random line.
        stop = threading.Event()
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: stop.set())
        with server:
            self.stdout.write(self.style.SUCCESS(
                f"Triton ready: grpc {server.grpc_url}, http {server.http_url} (Ctrl-C stops it)"))
            while not stop.is_set() and server.is_running():
                stop.wait(0.5)
            if stop.is_set():
                self.stdout.write("Stopping Triton ...")
                return
            code = server.wait()
        self.stderr.write(f"Triton exited on its own with status {code}:\n{server.log_tail()}")
        raise SystemExit(code or 1)
