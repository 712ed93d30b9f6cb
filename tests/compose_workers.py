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


def worker_environment(service: str, variables: Mapping[str, str] | None = None) -> dict[str, str]:
    """What the service's environment sets differently from the web's (the workers' DB_POOL_MAX_SIZE=0):
    a test's worker gets these on top of the test's own environment, as the compose file gives them."""
    services = yaml.safe_load(COMPOSE.read_text())["services"]
    values = dict(variables or {})
    web, own = services["web"].get("environment") or {}, services[service].get("environment") or {}
    return {
        name: _VARIABLE.sub(lambda m: values.get(m.group(1), m.group(2)), str(value))
        for name, value in own.items()
        if web.get(name) != value
    }


def worker_argv(service: str, variables: Mapping[str, str] | None = None, *, hostname: str = "") -> list[str]:
    """The service's command for this interpreter, exactly (its options included): ``${NAME:-default}``
    takes ``variables[NAME]`` (else the default); ``hostname`` names the worker (many tests' workers share
    a broker)."""
    values = dict(variables or {})
    command = [_VARIABLE.sub(lambda m: values.get(m.group(1), m.group(2)), part) for part in worker_services()[service]]
    return [sys.executable, "-m", *command, *([f"--hostname={hostname}"] if hostname else [])]


def broker_purge() -> None:
    """Empty every queue of the platform (core/queues.py) on the broker, so that no task left by an
    earlier run reaches a worker this test starts (``app.control.purge()`` empties the default one only)."""
    from arena.celery import app
    from core import queues

    with app.connection_for_write() as connection:
        channel = connection.default_channel
        for queue in queues.ALL:
            channel.queue_purge(queue)  # type: ignore[attr-defined]  # kombu.transport.redis.Channel has it
