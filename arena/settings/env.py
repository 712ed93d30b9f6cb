"""Typed readers for settings that come from the environment.

A malformed value stops the process with the variable's name in the message: a typo in
``DEBUG=ture`` must not silently mean False in production.
"""

from __future__ import annotations

import ipaddress
import os
import re
from pathlib import Path

from core.outbound import allow_list_parse


class ImproperEnvironment(RuntimeError):
    pass


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str) -> str:
    return os.environ.get(name, default)


_RATE = re.compile(r"[1-9][0-9]{0,6}/[0-9]*[smhd]")


def env_rate(name: str, default: str) -> str:
    """A django-ratelimit rate, ``<count>/<period>`` (``30/m``, ``500/h``, ``10/5m``); empty: no limit."""
    raw = os.environ.get(name, default).strip()
    if raw and not _RATE.fullmatch(raw):
        raise ImproperEnvironment(f"{name}={raw!r} is not a rate (use <count>/<s|m|h|d>, such as 30/m)")
    return raw


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperEnvironment(f"{name}={raw!r} is not a boolean (use one of 1/0, true/false, yes/no, on/off)")


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise ImproperEnvironment(f"{name}={raw!r} is not an integer") from None
    if minimum is not None and value < minimum:
        raise ImproperEnvironment(f"{name}={value} is below the minimum {minimum}")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    items = [item.strip() for item in raw.split(",")]
    if any(not item for item in items):
        raise ImproperEnvironment(f"{name}={raw!r} has an empty item; use a comma-separated list")
    return items


def env_url(name: str, default: str | None, *, schemes: tuple[str, ...]) -> str | None:
    raw = os.environ.get(name) or default  # set but empty means "use the default"
    if not raw:
        return None
    scheme = raw.split("://", 1)[0] if "://" in raw else ""
    if scheme not in schemes:
        raise ImproperEnvironment(f"{name}={raw!r} must be a URL with one of the schemes {', '.join(schemes)}")
    return raw


def env_hosts(name: str, default: list[str]) -> list[str]:
    """A comma-separated allow-list of hosts, addresses and networks (``triton``, ``triton:8001``,
    ``10.0.5.0/24``, ``[::1]:8001``); a malformed entry stops start-up with the variable's name."""
    raw = os.environ.get(name)
    items = [] if raw is not None and not raw.strip() else env_list(name, default)  # set but empty: none
    try:
        allow_list_parse(items)
    except ValueError as exc:
        raise ImproperEnvironment(f"{name}: {exc}") from None
    return items


def env_networks(name: str, default: list[str]) -> list[str]:
    """A comma-separated list of IP addresses and networks (``10.20.0.2``, ``172.31.240.0/24``,
    ``fd00::/8``); a malformed entry stops start-up with the variable's name. Set but empty: none."""
    raw = os.environ.get(name)
    items = [] if raw is not None and not raw.strip() else env_list(name, default)
    for item in items:
        try:
            ipaddress.ip_network(item, strict=False)
        except ValueError:
            raise ImproperEnvironment(f"{name}: {item!r} is not an IP address or network such as 10.0.0.0/24") from None
    return items


def env_path(name: str, default: Path) -> Path:
    """A filesystem path (``~`` expanded; relative paths are taken from the working directory). Set but
    empty means the default."""
    raw = os.environ.get(name, "").strip()
    return Path(raw).expanduser() if raw else default
