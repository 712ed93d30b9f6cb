"""The error pages with DEBUG off (as in the demo and production): the site's layout, what happened,
and nothing of the exception, the code or the settings."""

from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied
from django.test import Client
from django.urls import reverse

from battles import selectors as battle_selectors

pytestmark = pytest.mark.django_db

LEAKS = ("Traceback", "DEBUG", "Using the URLconf", "SECRET", "RuntimeError", "secret-detail", "battles/views.py")


@pytest.fixture(autouse=True)
def debug_off(settings):  # type: ignore[no-untyped-def]
    settings.DEBUG = False


def _assert_site_page(html: str) -> None:
    assert "arena/arena.css" in html and 'class="brand"' in html  # base.html
    for leak in LEAKS:
        assert leak not in html, leak


def test_404_is_the_sites_page(alice_client: Client) -> None:
    response = alice_client.get(reverse("ranking:leaderboard", args=[987654]))
    assert response.status_code == 404
    html = response.content.decode()
    assert "<h1>Page not found</h1>" in html and "Log out" in html
    _assert_site_page(html)


def test_404_for_someone_logged_out(client: Client) -> None:
    response = client.get("/no/such/page/")
    assert response.status_code == 404
    html = response.content.decode()
    assert "Page not found" in html and "Log in" in html
    _assert_site_page(html)


def test_403_is_the_sites_page(alice_client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise PermissionDenied("secret-detail")

    monkeypatch.setattr(battle_selectors, "campaigns_for_rater", refuse)
    response = alice_client.get(reverse("battles:campaigns"))
    assert response.status_code == 403
    html = response.content.decode()
    assert "<h1>Not allowed</h1>" in html
    _assert_site_page(html)


def test_csrf_failure_is_the_sites_page(alice) -> None:  # type: ignore[no-untyped-def]
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    response = client.post(reverse("account_logout"))
    assert response.status_code == 403
    html = response.content.decode()
    assert "Please try again" in html and "CSRF" not in html
    _assert_site_page(html)


def test_500_is_the_sites_page_and_needs_no_request(alice, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    def crash(*args: object, **kwargs: object) -> None:
        raise RuntimeError("secret-detail")

    monkeypatch.setattr(battle_selectors, "campaigns_for_rater", crash)
    client = Client(raise_request_exception=False)
    client.force_login(alice)
    response = client.get(reverse("battles:campaigns"))
    assert response.status_code == 500
    html = response.content.decode()
    assert "<h1>Something went wrong</h1>" in html
    _assert_site_page(html)


def test_400_is_the_sites_page(client: Client) -> None:
    response = client.get("/", HTTP_HOST="not-an-allowed-host.example")  # DisallowedHost
    assert response.status_code == 400
    html = response.content.decode()
    assert "<h1>Bad request</h1>" in html and "ALLOWED_HOSTS" not in html
    _assert_site_page(html)


def _database_down(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every statement fails as when PostgreSQL is stopped or out of connections (the boundary: the
    database driver, whose error Django raises as OperationalError)."""
    from django.db import OperationalError
    from django.db.backends.utils import CursorWrapper

    def refuse(*args: object, **kwargs: object) -> None:
        raise OperationalError('connection to server at "127.0.0.1", port 5432 failed: Connection refused')

    monkeypatch.setattr(CursorWrapper, "execute", refuse)
    monkeypatch.setattr(CursorWrapper, "executemany", refuse)


def test_a_database_that_cannot_serve_is_a_503_page_with_retry_after(alice, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    client = Client(raise_request_exception=False)
    client.force_login(alice)
    _database_down(monkeypatch)
    response = client.get(reverse("battles:campaigns"))
    assert response.status_code == 503 and response["Retry-After"] == "5"
    assert "no-store" in response["Cache-Control"]
    html = response.content.decode()
    assert "<h1>Briefly unavailable</h1>" in html and "nothing was saved" in html
    _assert_site_page(html)
    assert "5432" not in html and "OperationalError" not in html


def test_an_api_request_the_database_cannot_serve_is_a_503_in_the_apis_body(
    acme, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    from tests.conftest import api_client

    key = api_client(acme.organization).api_key_header
    client = Client(raise_request_exception=False, HTTP_AUTHORIZATION=key)
    _database_down(monkeypatch)
    response = client.get("/api/v1/campaigns/")
    assert response.status_code == 503 and response["Retry-After"] == "5"
    body = response.json()
    assert body["error"]["code"] == "unavailable" and "5432" not in response.content.decode()


def test_a_bug_is_still_a_500_not_a_503(alice, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    from django.db import IntegrityError

    def crash(*args: object, **kwargs: object) -> None:
        raise IntegrityError("a constraint the code should have respected")

    monkeypatch.setattr(battle_selectors, "campaigns_for_rater", crash)
    client = Client(raise_request_exception=False)
    client.force_login(alice)
    response = client.get(reverse("battles:campaigns"))
    assert response.status_code == 500 and "Retry-After" not in response
