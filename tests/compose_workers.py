"""The Celery workers exactly as docker/compose.yaml runs them (one service per queue), as processes of
this machine: the tests of background work under load start these, so they test the deployment's layout
rather than a worker of their own making."""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from pathlib import Path

import yaml

COMPOSE = Path(__file__).resolve().parents[1] / "docker" / "compose.yaml"
_VARIABLE = re.compile(r"\$\{(\w+):-([^}]*)\}")


def worker_services() -> dict[str, list[str]]:
    """Each worker service's command (``celery -A arena worker ...``), as the compose file writes it."""
    services = yaml.safe_load(COMPOSE.read_text())["services"]
    return {
        name: list(service["command"])
        for name, service in services.items()
        if list(service.get("command") or [])[:4] == ["celery", "-A", "arena", "worker"]
    }


def worker_argv(service: str, variables: Mapping[str, str] | None = None, *, hostname: str = "") -> list[str]:
    """The service's command for this interpreter: ``${NAME:-default}`` takes ``variables[NAME]`` (else the
    default), and the options a test needs (no gossip, mingle or heartbeat: a quick start) are added."""
    values = dict(variables or {})
    command = [_VARIABLE.sub(lambda m: values.get(m.group(1), m.group(2)), part) for part in worker_services()[service]]
    extra = ["--without-gossip", "--without-mingle", "--without-heartbeat"]
    if hostname:
        extra.append(f"--hostname={hostname}")
    return [sys.executable, "-m", *command, *extra]


def broker_purge() -> None:
    """Empty every queue of the platform (core/queues.py) on the broker, so that no task left by an
    earlier run reaches a worker this test starts (``app.control.purge()`` empties the default one only)."""
    from arena.celery import app
    from core import queues

    with app.connection_for_write() as connection:
        channel = connection.default_channel
        for queue in queues.ALL:
            channel.queue_purge(queue)  # type: ignore[attr-defined]  # kombu.transport.redis.Channel has it
