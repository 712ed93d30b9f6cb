"""Login throttling behind the TLS proxy: per real client address and per account.

The attack: behind the documented proxy every request arrives from the proxy's address, so ten failed
logins for random e-mails from one attacker locked every other user out. With the proxy listed
(``ARENA_TRUSTED_PROXIES``), the client address comes from X-Forwarded-For, read from the right past our
own proxies (entries the client wrote itself are ignored), and failed logins on one account lock that
account from any address. The header is believed only from a listed proxy: a client that reaches the web
port directly and writes a fresh X-Forwarded-For on every attempt is throttled at its own address (with a
proxy *count* it was never throttled: 12 of 12 failed logins went through)."""

from __future__ import annotations

import uuid

import pytest
from django.core.cache import cache
from django.test import Client, RequestFactory

from core.http import client_ip
from tests.factories import PASSWORD

pytestmark = pytest.mark.django_db

PROXY = "10.20.0.2"  # REMOTE_ADDR of every request: the TLS proxy in front of the app
PROXY_NETWORK = "10.20.0.0/24"  # the compose file's proxy network: only the proxy and web are on it


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
    settings.ARENA_TRUSTED_PROXIES = [PROXY]
    _attack_from_one_address()
    # The attacker is throttled (writing random addresses to the left does not help) ...
    assert not _login(bob.email, PASSWORD, client_address="203.0.113.66", spoofed="192.0.2.1")
    # ... and bob, behind the same proxy, logs in.
    assert _login(bob.email, PASSWORD, client_address="198.51.100.7")


def test_without_the_proxy_setting_everyone_shares_the_proxy_address(settings, bob):
    """Why the setting exists: trusting no proxy, the attack above locks bob out."""
    settings.ARENA_TRUSTED_PROXIES = []
    _attack_from_one_address()
    assert not _login(bob.email, PASSWORD, client_address="198.51.100.7")


def test_failed_logins_on_one_account_lock_it_from_any_address(settings, alice, bob):
    settings.ARENA_TRUSTED_PROXIES = [PROXY_NETWORK]
    for i in range(5):
        assert not _login(alice.email, "wrong-password", client_address=f"203.0.113.{10 + i}")
    # The right password from a fresh address does not open the account now ...
    assert not _login(alice.email, PASSWORD, client_address="198.51.100.99")
    # ... while other accounts are untouched.
    assert _login(bob.email, PASSWORD, client_address="203.0.113.10")


def test_a_client_reaching_the_web_port_directly_cannot_spoof_its_address(settings, bob):
    """The attack of issue 21.8: one trusted proxy configured, the attacker bypasses it and writes a fresh
    X-Forwarded-For on each of 12 failed logins. Known truth: all 12 come from 203.0.113.66, so the
    throttle (10 a minute per address) binds from the 11th on, even with the right password."""
    settings.ARENA_TRUSTED_PROXIES = [PROXY]
    attacker = "203.0.113.66"

    def direct(email: str, password: str, spoofed: str) -> str:
        client = Client(REMOTE_ADDR=attacker, HTTP_X_FORWARDED_FOR=spoofed)
        response = client.post("/accounts/login/", {"login": email, "password": password})
        if response.status_code == 302:
            return "in"
        return "throttled" if "Too many failed login attempts" in response.content.decode() else "refused"

    first = [direct(f"{uuid.uuid4().hex}@random.test", "wrong", f"198.51.100.{i}, {PROXY}") for i in range(10)]
    assert first == ["refused"] * 10
    later = [direct(f"{uuid.uuid4().hex}@random.test", "wrong", f"192.0.2.{i}") for i in range(2)]
    assert later == ["throttled"] * 2
    assert direct(bob.email, PASSWORD, "192.0.2.77") == "throttled"  # bob's password does not get the attacker in
    # ... while bob, through the proxy, is not affected.
    assert _login(bob.email, PASSWORD, client_address="198.51.100.7")


@pytest.mark.parametrize(
    "trusted, remote, forwarded, expected",
    [
        ([], PROXY, "1.1.1.1", PROXY),  # no trusted proxy: the header is ignored
        ([PROXY], PROXY, "1.1.1.1", "1.1.1.1"),
        ([PROXY], PROXY, "6.6.6.6, 1.1.1.1", "1.1.1.1"),  # the client's own entries are ignored
        ([PROXY], "203.0.113.66", "1.1.1.1", "203.0.113.66"),  # not from a proxy: the header is not believed
        ([PROXY], "203.0.113.66", f"1.1.1.1, {PROXY}", "203.0.113.66"),
        ([PROXY_NETWORK], PROXY, "6.6.6.6, 1.1.1.1, 10.20.0.1", "1.1.1.1"),  # two proxies of ours
        ([PROXY_NETWORK], PROXY, "10.20.0.1, 10.20.0.5", "10.20.0.1"),  # only proxies: the farthest one
        ([PROXY, "10.20.0.1"], PROXY, "1.1.1.1, 10.20.0.1", "1.1.1.1"),
        ([PROXY], PROXY, "", PROXY),  # through the proxy without a header
        ([PROXY], PROXY, "1.1.1.1:5555", "1.1.1.1"),
        ([PROXY], PROXY, "[2001:db8::1]:443", "2001:db8::1"),
        ([PROXY], PROXY, "2001:db8::1", "2001:db8::1"),
        ([PROXY], PROXY, "not-an-address", PROXY),
        ([PROXY_NETWORK], PROXY, "1.1.1.1, not-an-address, 10.20.0.1", "10.20.0.1"),  # garbage ends the walk
        ([PROXY], f"::ffff:{PROXY}", "1.1.1.1", "1.1.1.1"),  # a dual-stack socket's form of the proxy
        (["fd00:20::/64"], "fd00:20::2", "1.1.1.1", "1.1.1.1"),
    ],
)
def test_client_address_is_the_right_most_entry_not_ours(settings, trusted, remote, forwarded, expected):
    settings.ARENA_TRUSTED_PROXIES = trusted
    request = RequestFactory().get("/", REMOTE_ADDR=remote, HTTP_X_FORWARDED_FOR=forwarded)
    assert client_ip(request) == expected
