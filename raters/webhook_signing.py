"""Webhook signatures: how the platform signs a delivery and how a receiver checks it.

Stripe's scheme. The platform sends ``X-Arena-Signature: t=<unix seconds>,v1=<hex>`` where the hex is
``HMAC-SHA256(secret, f"{t}.{body}")`` over the raw request body, exactly as sent. A receiver recomputes
it with its endpoint's secret, compares in constant time, and refuses a timestamp older (or newer)
than a few minutes, so a captured request cannot be replayed later. Several ``v1=`` values may appear
(one per secret while a secret is being replaced); any one matching is enough.

Pure Python, no Django: receivers may copy this file as it is (docs/api/webhooks.md).
"""

from __future__ import annotations

import hashlib
import hmac
import time

__all__ = ["SignatureInvalid", "signature_header", "signature_compute", "verify_signature"]

DEFAULT_TOLERANCE_S = 300


class SignatureInvalid(ValueError):
    """The request is not one the platform signed with this secret, or it is too old."""


def signature_compute(secret: str, timestamp: int, body: bytes) -> str:
    message = str(timestamp).encode() + b"." + body
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def signature_header(secret: str, body: bytes, *, timestamp: int | None = None) -> str:
    """The ``X-Arena-Signature`` value for ``body`` signed now (or at ``timestamp``)."""
    t = int(time.time()) if timestamp is None else timestamp
    return f"t={t},v1={signature_compute(secret, t, body)}"


def verify_signature(
    secret: str, body: bytes, header: str, tolerance_s: int = DEFAULT_TOLERANCE_S, *, now: float | None = None
) -> int:
    """Check an ``X-Arena-Signature`` header against the raw ``body``; return its timestamp.

    Raises ``SignatureInvalid`` when the header is malformed, no ``v1`` signature matches, or the
    timestamp is more than ``tolerance_s`` seconds away from ``now`` (default: the clock)."""
    timestamp: int | None = None
    signatures: list[str] = []
    for item in (header or "").split(","):
        key, _, value = item.strip().partition("=")
        if key == "t":
            try:
                timestamp = int(value)
            except ValueError:
                raise SignatureInvalid("the signature's timestamp is not an integer") from None
        elif key == "v1":
            signatures.append(value)
    if timestamp is None or not signatures:
        raise SignatureInvalid("the signature header needs t=<unix seconds> and v1=<hex>")
    current = time.time() if now is None else now
    if abs(current - timestamp) > tolerance_s:
        raise SignatureInvalid(f"the signature's timestamp is more than {tolerance_s} s away from now")
    expected = signature_compute(secret, timestamp, body)
    if not any(hmac.compare_digest(expected, candidate) for candidate in signatures):
        raise SignatureInvalid("no signature matches the body")
    return timestamp
