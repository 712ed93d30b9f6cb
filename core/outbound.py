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
  127.0.0.1 among public ones must not slip through);
- an IPv6 address that carries an IPv4 address is judged by that IPv4 address too, since the network
  delivers it there: IPv4-mapped ``::ffff:a.b.c.d``, IPv4-compatible ``::a.b.c.d``, IPv4-translated
  ``::ffff:0:a.b.c.d``, NAT64 ``64:ff9b::/96``, 6to4 ``2002::/16`` (the IPv4 after the prefix) and
  Teredo ``2001::/32`` (its server and its client). ``[::127.0.0.1]`` and ``[64:ff9b::7f00:1]`` are
  loopback, whatever Python's ``is_global`` says of the IPv6 form; NAT64 of a public address
  (``64:ff9b::808:808``, what DNS64 hands an IPv6-only network) passes. The local-use NAT64 prefix
  ``64:ff9b:1::/48`` (RFC 8215) is never public.

The check runs where an address is entered (model validation) and again right before each call, and
``address_approve`` returns the addresses it approved: the caller connects to one of those, never to
the name resolved a second time, so a name that resolves to a public address at the check and to
127.0.0.1 a moment later (DNS rebinding) cannot slip in between. Pure Python, no Django: the caller
passes the allow-list (``settings.ARENA_MODEL_HOSTS``, ``settings.ARENA_WEBHOOK_HOSTS``).
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
    "address_approve",
    "address_check",
    "address_judged",
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
    # The resolver's order (RFC 6724 preference), without repeats: callers connect to the first.
    return tuple(dict.fromkeys(str(info[4][0]) for info in infos))


def _normalised(address: IPAddress) -> IPAddress:
    # ::ffff:127.0.0.1 is 127.0.0.1 on the wire: judge (and allow-list) the IPv4 address it carries.
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


_COMPATIBLE = ipaddress.IPv6Network("::/96")  # IPv4-compatible (deprecated): ::a.b.c.d
_TRANSLATED = ipaddress.IPv6Network("::ffff:0:0:0/96")  # IPv4-translated (SIIT, RFC 2765)
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")  # NAT64 well-known prefix (RFC 6052)
_NAT64_LOCAL = ipaddress.IPv6Network("64:ff9b:1::/48")  # local-use NAT64 (RFC 8215): never public


def address_judged(address: IPAddress) -> tuple[IPAddress, ...]:
    """The address and every IPv4 address it carries (module docstring), each of which must be public."""
    if not isinstance(address, ipaddress.IPv6Address):
        return (address,)
    if address.ipv4_mapped is not None:
        return (address.ipv4_mapped,)
    low32 = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address in _COMPATIBLE or address in _TRANSLATED or address in _NAT64:
        return (address, low32)
    if address.sixtofour is not None:
        return (address, address.sixtofour)
    if address.teredo is not None:
        return (address, *address.teredo)
    return (address,)


def _public(address: IPAddress) -> bool:
    if isinstance(address, ipaddress.IPv6Address) and address in _NAT64_LOCAL:
        return False
    return address.is_global and not address.is_multicast


def address_approve(
    host: str, port: int, *, allowed: Sequence[AllowEntry], resolver: Resolver | None = None
) -> tuple[str, ...]:
    """The addresses ``host:port`` may be reached at, in the resolver's order, to connect to (the caller
    connects to these, never to the name resolved again); ``()`` where the operator allows the host by
    name (it is then resolved by the connection). Raise ``AddressRefused`` unless the operator allows
    ``host:port`` or every address it resolves to is a public one (see the module's docstring)."""
    if any(entry.allows_name(host, port) for entry in allowed):
        return ()
    try:
        literal: IPAddress | None = ipaddress.ip_address(host)
    except ValueError:
        literal = None
    if literal is not None:
        addresses = [literal]
    else:
        try:
            addresses = [ipaddress.ip_address(a.split("%", 1)[0]) for a in (resolver or _resolve)(host, port)]
        except (OSError, UnicodeError, ValueError):
            raise AddressRefused(f"{host} does not resolve to an address.") from None
        if not addresses:
            raise AddressRefused(f"{host} does not resolve to an address.")
    for address in addresses:
        if any(entry.allows_address(_normalised(address), port) for entry in allowed):
            continue
        refused = next((a for a in address_judged(address) if not _public(a)), None)
        if refused is not None:
            carried = "" if refused == _normalised(address) else f" (carries {refused})"
            shown = f"{host}{carried}" if literal is not None else f"{host} (resolves to {address}{carried})"
            raise AddressRefused(
                f"{shown}:{port} is an internal address that the operator has not allowed for model servers "
                "or webhooks. Ask the operator to add it to the allow-list, or use an allowed host."
            )
    return tuple(dict.fromkeys(str(address) for address in addresses))


def address_check(host: str, port: int, *, allowed: Sequence[AllowEntry], resolver: Resolver = _resolve) -> None:
    """Raise ``AddressRefused`` unless the operator allows ``host:port`` or every address it resolves to
    is a public one (``address_approve``, which also says where to connect)."""
    address_approve(host, port, allowed=allowed, resolver=resolver)


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
