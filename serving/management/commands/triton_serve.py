"""``manage.py triton_serve``: run the Triton server (nvidia-pytriton's binary) on loopback ports.

Waits for readiness, prints the addresses, and stops cleanly on Ctrl-C or SIGTERM."""

from __future__ import annotations

import signal
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
        # SIGTERM ends the wait like Ctrl-C does, so the server is stopped by the `with` below.
        signal.signal(signal.SIGTERM, signal.default_int_handler)
        with server:
            self.stdout.write(self.style.SUCCESS(
                f"Triton ready: grpc {server.grpc_url}, http {server.http_url} (Ctrl-C stops it)"))
            try:
                code = server.wait()
            except KeyboardInterrupt:
                self.stdout.write("Stopping Triton ...")
                return
        if code != 0:
            self.stderr.write(f"Triton exited with status {code}:\n{server.log_tail()}")
            raise SystemExit(code)
