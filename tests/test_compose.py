"""The compose file's network shape: nobody reaches web without passing the proxy.

Why: web believes X-Forwarded-For only from the proxy (``ARENA_TRUSTED_PROXIES``, ``core.http.client_ip``).
If web published its port, a client could connect to it from outside, and if another service shared the
proxy's network, that service could speak for any client. Docker is not available where the suite runs, so
this reads ``docker/compose.yaml`` as Compose would (YAML with merge keys, ``${VAR:-default}`` taken at its
default) and checks the shape; the stack itself is started by a deployment, not by this test.
"""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = ROOT / "docker" / "compose.yaml"
_DEFAULT = re.compile(r"\$\{[A-Z0-9_]+:-([^}]*)\}")


def _compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE.read_text())  # type: ignore[no-any-return]


def _default(value: str) -> str:
    """``${VAR:-default}`` as Compose reads it with VAR unset."""
    return _DEFAULT.sub(lambda m: m.group(1), value)


def _networks(service: dict[str, Any]) -> set[str]:
    networks = service.get("networks", ["default"])
    return set(networks if isinstance(networks, list) else networks.keys())


def test_web_publishes_no_port_and_only_the_proxy_does():
    services = _compose()["services"]
    assert "ports" not in services["web"] and "network_mode" not in services["web"]
    published = {name for name, service in services.items() if service.get("ports")}
    assert published == {"proxy"}
    assert {_default(p).split(":")[-1] for p in services["proxy"]["ports"]} == {"80", "443"}


def test_the_proxy_network_is_internal_and_holds_only_the_proxy_and_web():
    compose = _compose()
    services, networks = compose["services"], compose["networks"]
    assert networks["proxy"]["internal"] is True
    on_it = {name for name, service in services.items() if "proxy" in _networks(service)}
    assert on_it == {"proxy", "web"}
    assert "default" not in _networks(services["proxy"])  # no business with the database, Redis or Triton


def test_web_trusts_x_forwarded_for_from_the_proxy_network_exactly():
    compose = _compose()
    subnet = _default(compose["networks"]["proxy"]["ipam"]["config"][0]["subnet"])
    trusted = _default(compose["services"]["web"]["environment"]["ARENA_TRUSTED_PROXIES"])
    assert [ipaddress.ip_network(item) for item in trusted.split(",")] == [ipaddress.ip_network(subnet)]
    assert "ARENA_TRUSTED_PROXY_COUNT" not in compose["services"]["web"]["environment"]
    # The proxy passes requests to web, where the app listens.
    caddyfile = (ROOT / "docker" / "Caddyfile").read_text()
    assert re.search(r"^\s*reverse_proxy web:8000\s*$", caddyfile, re.MULTILINE)
    assert compose["services"]["proxy"]["volumes"][0].startswith("./Caddyfile:/etc/caddy/Caddyfile")
