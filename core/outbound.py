"""Which addresses the platform may call on behalf of a tenant: the rule against server-side request forgery.

A tenant manager types a model server's address (and, later, webhook URLs); every battle then makes
the server call it. Left open, that is a port scanner and a request forger aimed at the platform's own
network: its Redis, its database, its own web port, a cloud metadata service. Which internal servers
may be called is an operator decision, so the rule is:

- an address the operator lists (a host name, an IP address or a network, optionally with a port) is
  allowed;
- any other host is resolved, and *every* address it resolves to must be a global (public) unicast
  address: loopback, private, link-local, carrier-grade NAT, multicast, reserved and unspecified
  addresses are refused (an attacker controls the DNS of their own name, so one record pointing at
  127.0.0.1 among public ones must not slip through).

The check runs where an address is entered (model validation) and again right before each call, which
narrows DNS rebinding to the moment between the check and the connection. Pure Python, no Django:
the caller passes the allow-list (``settings.ARENA_MODEL_HOSTS``, ``settings.ARENA_WEBHOOK_HOSTS``).
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

__all__ = [
    "AddressRefused",
    "AllowEntry",
    "address_check",
    "allow_list_parse",
    "host_port_split",
    "url_check",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver = Callable[[str, int], Sequence[str]]

_HOST_PORT = re.compile(r"^(?:\[(?P<v6>[0-9A-Fa-f:.]+)\]|(?P<host>[A-Za-z0-9._-]+))(?::(?P<port>[0-9]{1,5}))?$")


class AddressRefused(ValueError):
    """The address may not be called. The message is safe to show to the manager who entered it."""


@dataclass(frozen=True)
class AllowEntry:
    """One item of an operator's allow-list: a host name or a network, and optionally one port."""

    name: str | None
    network: IPNetwork | None
    port: int | None

    def allows_name(self, host: str, port: int) -> bool:
        return self.name is not None and self.name == host.lower().rstrip(".") and self.port in (None, port)

    def allows_address(self, address: IPAddress, port: int) -> bool:
        return self.network is not None and address in self.network and self.port in (None, port)


def _port(raw: str | None, where: str) -> int | None:
    if raw is None:
        return None
    port = int(raw)
    if not 1 <= port <= 65535:
        raise ValueError(f"{where}: port {port} is out of range")
    return port


def host_port_split(value: str) -> tuple[str, int | None]:
    """``host:port``, ``[v6]:port``, ``host`` → (host, port). Raises ValueError on anything else."""
    match = _HOST_PORT.match(value.strip())
    if match is None:
        raise ValueError(f"{value!r} is not host:port")
    return (match["v6"] or match["host"]), _port(match["port"], value)


def allow_list_parse(items: Iterable[str]) -> tuple[AllowEntry, ...]:
    """Entries such as ``triton``, ``triton:8001``, ``10.0.5.0/24``, ``127.0.0.1:8501``, ``[::1]:8001``.
    A network (CIDR) entry takes no port. Raises ValueError naming the malformed entry."""
    entries = []
    for raw in items:
        item = raw.strip()
        if "/" in item:
            try:
                network = ipaddress.ip_network(item, strict=False)
            except ValueError:
                raise ValueError(f"{item!r} is not a network (CIDR) such as 10.0.5.0/24") from None
            entries.append(AllowEntry(None, network, None))
            continue
        host, port = host_port_split(item)
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            entries.append(AllowEntry(host.lower().rstrip("."), None, port))
        else:
            entries.append(AllowEntry(None, ipaddress.ip_network(address), port))
    return tuple(entries)


def _resolve(host: str, port: int) -> Sequence[str]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return sorted({str(info[4][0]) for info in infos})


def _normalised(address: IPAddress) -> IPAddress:
    # ::ffff:127.0.0.1 reaches 127.0.0.1: judge the IPv4 address it carries.
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def address_check(host: str, port: int, *, allowed: Sequence[AllowEntry], resolver: Resolver = _resolve) -> None:
    """Raise ``AddressRefused`` unless the operator allows ``host:port`` or every address it resolves to
    is a public one (see the module's docstring)."""
    if any(entry.allows_name(host, port) for entry in allowed):
        return
    try:
        literal: IPAddress | None = ipaddress.ip_address(host)
    except ValueError:
        literal = None
    if literal is not None:
        addresses = [literal]
    else:
        try:
            addresses = [ipaddress.ip_address(a.split("%", 1)[0]) for a in resolver(host, port)]
        except (OSError, UnicodeError, ValueError):
            raise AddressRefused(f"{host} does not resolve to an address.") from None
        if not addresses:
            raise AddressRefused(f"{host} does not resolve to an address.")
    for address in map(_normalised, addresses):
        if any(entry.allows_address(address, port) for entry in allowed):
            continue
        if not address.is_global or address.is_multicast:
            shown = host if literal is not None else f"{host} (resolves to {address})"
            raise AddressRefused(
                f"{shown}:{port} is an internal address that the operator has not allowed for model servers "
                "or webhooks. Ask the operator to add it to the allow-list, or use an allowed host."
            )


def url_check(
    url: str, *, allowed: Sequence[AllowEntry], schemes: tuple[str, ...] = ("https",), resolver: Resolver = _resolve
) -> None:
    """The same rule for a URL (webhooks): a scheme from ``schemes``, a host, the port it implies."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise AddressRefused("Enter a valid URL.") from None
    if parts.scheme not in schemes or not parts.hostname:
        raise AddressRefused(f"Enter a URL starting with {' or '.join(s + '://' for s in schemes)}.")
    if parts.username or parts.password:
        raise AddressRefused("A URL with a user name or password is not accepted.")
    address_check(parts.hostname, port or (443 if parts.scheme == "https" else 80), allowed=allowed, resolver=resolver)
