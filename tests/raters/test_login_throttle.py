"""Login throttling behind the TLS proxy: per real client address and per account.

The attack: behind the documented proxy every request arrives from the proxy's address, so ten failed
logins for random e-mails from one attacker locked every other user out. With the proxy depth set,
the client address comes from X-Forwarded-For at that depth only (entries the client wrote itself are
ignored), and failed logins on one account lock that account from any address."""

from __future__ import annotations

import uuid

import pytest
from django.core.cache import cache
from django.test import Client, RequestFactory

from core.http import client_ip
from tests.factories import PASSWORD

pytestmark = pytest.mark.django_db

PROXY = "10.20.0.2"  # REMOTE_ADDR of every request: the TLS proxy in front of the app


@pytest.fixture(autouse=True)
def _fresh_throttle():
    cache.clear()
    yield
    cache.clear()


def _login(email: str, password: str, *, client_address: str, spoofed: str | None = None) -> bool:
    """One login through the proxy, from ``client_address``; True if it logged in."""
    forwarded = f"{spoofed}, {client_address}" if spoofed else client_address
    response = Client(REMOTE_ADDR=PROXY, HTTP_X_FORWARDED_FOR=forwarded).post(
        "/accounts/login/", {"login": email, "password": password}
    )
    return response.status_code == 302


def _attack_from_one_address() -> None:
    for _ in range(10):
        assert not _login(
            f"{uuid.uuid4().hex}@random.test",
            "wrong-password",
            client_address="203.0.113.66",
            spoofed=f"198.51.100.{uuid.uuid4().int % 250}",
        )


def test_failed_logins_from_one_client_do_not_lock_out_another(settings, bob):
    settings.ARENA_TRUSTED_PROXY_COUNT = 1
    _attack_from_one_address()
    # The attacker is throttled (writing random addresses to the left does not help) ...
    assert not _login(bob.email, PASSWORD, client_address="203.0.113.66", spoofed="192.0.2.1")
    # ... and bob, behind the same proxy, logs in.
    assert _login(bob.email, PASSWORD, client_address="198.51.100.7")


def test_without_the_proxy_setting_everyone_shares_the_proxy_address(settings, bob):
    """Why the setting exists: trusting no proxy, the attack above locks bob out."""
    settings.ARENA_TRUSTED_PROXY_COUNT = 0
    _attack_from_one_address()
    assert not _login(bob.email, PASSWORD, client_address="198.51.100.7")


def test_failed_logins_on_one_account_lock_it_from_any_address(settings, alice, bob):
    settings.ARENA_TRUSTED_PROXY_COUNT = 1
    for i in range(5):
        assert not _login(alice.email, "wrong-password", client_address=f"203.0.113.{10 + i}")
    # The right password from a fresh address does not open the account now ...
    assert not _login(alice.email, PASSWORD, client_address="198.51.100.99")
    # ... while other accounts are untouched.
    assert _login(bob.email, PASSWORD, client_address="203.0.113.10")


@pytest.mark.parametrize(
    "depth, forwarded, expected",
    [
        (0, "1.1.1.1", PROXY),  # no trusted proxy: the header is ignored
        (1, "1.1.1.1", "1.1.1.1"),
        (1, "6.6.6.6, 1.1.1.1", "1.1.1.1"),  # the client's own entries are ignored
        (2, "6.6.6.6, 1.1.1.1, 10.20.0.1", "1.1.1.1"),
        (2, "1.1.1.1", PROXY),  # did not pass all proxies: the connecting address
        (1, "1.1.1.1:5555", "1.1.1.1"),
        (1, "[2001:db8::1]:443", "2001:db8::1"),
        (1, "not-an-address", PROXY),
        (1, "", PROXY),
    ],
)
def test_client_address_at_the_configured_depth(settings, depth, forwarded, expected):
    settings.ARENA_TRUSTED_PROXY_COUNT = depth
    request = RequestFactory().get("/", REMOTE_ADDR=PROXY, HTTP_X_FORWARDED_FOR=forwarded)
    assert client_ip(request) == expected
