"""Where a webhook may be sent, and the one HTTP POST that sends it.

The rule is the platform's outbound rule (core/outbound.py) with ``settings.ARENA_WEBHOOK_HOSTS`` as the
operator's allow-list: a URL whose host resolves to loopback, private, link-local or other internal
addresses is refused unless the operator lists it. ``https://`` is required; plain ``http://`` is
accepted only for hosts the operator lists (an internal receiver on a trusted network), since a
public receiver reached over plain HTTP would expose the payloads and the signatures on the way.

The check runs where a URL is entered (the model's ``clean``) and again right before each send, and
the send connects to the very address that check approved (the name is not resolved a second time),
so a name that resolved to a public address at creation and to 127.0.0.1 later (DNS rebinding) is
refused, and cannot slip in between the check and the connection either. TLS still verifies the
certificate against the host name. Redirects are not followed (a 3xx is a failed attempt), and the
response is read up to a cap.
"""

from __future__ import annotations

import http.client
import ipaddress
import socket
import ssl
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import urlsplit

from django.conf import settings

from core.outbound import AddressRefused, AllowEntry, Resolver, allow_list_parse, url_check

__all__ = ["PostResult", "Target", "webhook_post", "webhook_target", "webhook_url_check"]

EXCERPT_CHARS = 500


@lru_cache(maxsize=8)
def _webhook_hosts(items: tuple[str, ...]) -> tuple[AllowEntry, ...]:
    return allow_list_parse(items)


def _resolve(host: str, port: int) -> Sequence[str]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return sorted({str(info[4][0]) for info in infos})


@dataclass(frozen=True)
class Target:
    """A checked URL: what to connect to. ``addresses`` are the approved addresses, tried in order;
    empty where the operator allows the host by name (it is then resolved by the connection)."""

    scheme: str
    host: str
    port: int
    path: str
    addresses: tuple[str, ...]


def _allowed_by_operator(host: str, port: int, addresses: Sequence[str], allowed: Sequence[AllowEntry]) -> bool:
    if any(entry.allows_name(host, port) for entry in allowed):
        return True
    if not addresses:
        return False
    for raw in addresses:
        address = ipaddress.ip_address(raw.split("%", 1)[0])
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        if not any(entry.allows_address(address, port) for entry in allowed):
            return False
    return True


def webhook_target(url: str, *, resolver: Resolver | None = None) -> Target:
    """Check ``url`` against the rule (module docstring) and say where to connect; raise
    ``AddressRefused`` (a ValueError whose message is for the person who entered the URL)."""
    resolve = resolver or _resolve
    seen: list[str] = []

    def recording(host: str, port: int) -> Sequence[str]:
        addresses = list(resolve(host, port))
        seen.extend(addresses)
        return addresses

    allowed = _webhook_hosts(tuple(settings.ARENA_WEBHOOK_HOSTS))
    url_check(url, allowed=allowed, schemes=("https", "http"), resolver=recording)
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        ipaddress.ip_address(host)
        literal = True
    except ValueError:
        literal = False
    judged = [host] if literal else seen
    if parts.scheme == "http" and not _allowed_by_operator(host, port, judged, allowed):
        raise AddressRefused(
            "Webhook URLs must start with https:// (plain http:// is accepted only for hosts the operator "
            "lists in ARENA_WEBHOOK_HOSTS)."
        )
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    # ``seen`` is empty when the host is allowed by name (not resolved by the check): connect by name.
    addresses = () if literal else tuple(dict.fromkeys(seen))
    return Target(scheme=parts.scheme, host=host, port=port, path=path, addresses=addresses)


def webhook_url_check(url: str, *, resolver: Resolver | None = None) -> None:
    """Raise ``AddressRefused`` unless a webhook may be sent to ``url``."""
    webhook_target(url, resolver=resolver)


def _connect(target: Target, timeout: float) -> socket.socket:
    """A connection to one of the approved addresses (the first that answers), or to the host by name
    where the operator allows that name."""
    if not target.addresses:
        return socket.create_connection((target.host, target.port), timeout)
    error: OSError | None = None
    for address in target.addresses:
        try:
            return socket.create_connection((address.split("%", 1)[0], target.port), timeout)
        except OSError as exc:
            error = exc
    assert error is not None
    raise error


class _PinnedHTTPConnection(http.client.HTTPConnection):
    def __init__(self, target: Target, timeout: float) -> None:
        super().__init__(target.host, target.port, timeout=timeout)
        self._target = target

    def connect(self) -> None:
        self.sock = _connect(self._target, self.timeout)  # type: ignore[arg-type]  # always a float here


def _tls_context() -> ssl.SSLContext:
    # The system's trust store, or the operator's bundle for receivers with a private CA.
    return ssl.create_default_context(cafile=settings.ARENA_WEBHOOK_CA_FILE or None)


class _PinnedHTTPSConnection(http.client.HTTPSConnection):
    def __init__(self, target: Target, timeout: float) -> None:
        self._tls = _tls_context()
        super().__init__(target.host, target.port, timeout=timeout, context=self._tls)
        self._target = target

    def connect(self) -> None:
        sock = _connect(self._target, self.timeout)  # type: ignore[arg-type]
        # The certificate is checked against the URL's host name, not against the address connected to.
        self.sock = self._tls.wrap_socket(sock, server_hostname=self.host)


@dataclass(frozen=True)
class PostResult:
    ok: bool
    status: int | None
    excerpt: str
    error: str
    duration_ms: int


def _sanitised(raw: bytes) -> str:
    text = raw.decode("utf-8", errors="replace")
    text = "".join(ch if ch.isprintable() or ch in "\n\t" else " " for ch in text)
    return text[:EXCERPT_CHARS]


def webhook_post(
    target: Target, *, body: bytes, headers: Mapping[str, str], timeout_s: float, max_response_bytes: int
) -> PostResult:
    """POST ``body`` to ``target``; never raises for what the network or the receiver does."""
    started = time.monotonic()
    connection: http.client.HTTPConnection = (
        _PinnedHTTPSConnection(target, timeout_s)
        if target.scheme == "https"
        else _PinnedHTTPConnection(target, timeout_s)
    )

    def took() -> int:
        return int((time.monotonic() - started) * 1000)

    try:
        connection.request("POST", target.path, body=body, headers=dict(headers))
        response = connection.getresponse()
        raw = response.read(max_response_bytes)
        status = response.status
    except TimeoutError:
        return PostResult(False, None, "", f"Timed out after {timeout_s:g} s.", took())
    except ssl.SSLError as exc:
        return PostResult(False, None, "", f"TLS error: {exc}"[:500], took())
    except (OSError, http.client.HTTPException) as exc:
        return PostResult(False, None, "", f"Connection failed: {exc.__class__.__name__}: {exc}"[:500], took())
    finally:
        connection.close()
    excerpt = _sanitised(raw)
    if 200 <= status < 300:
        return PostResult(True, status, excerpt, "", took())
    if 300 <= status < 400:
        location = _sanitised((response.getheader("Location") or "").encode())[:200]
        return PostResult(False, status, excerpt, f"Redirect to {location!r} not followed.", took())
    return PostResult(False, status, excerpt, f"The receiver answered {status}.", took())
