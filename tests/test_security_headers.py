"""Headers and enumeration: a Content-Security-Policy with no inline script, HTTPS-only production
defaults that ``manage.py check --deploy`` accepts, and a sign-up that does not tell whether an e-mail
is registered."""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from django.core import mail

from tests.conftest import start_battle

ROOT = Path(__file__).resolve().parents[1]
PRODUCTION_ENV = {
    "DJANGO_SETTINGS_MODULE": "arena.settings.base",
    "SECRET_KEY": secrets.token_urlsafe(50),
    "DATABASE_URL": "postgres://arena_app@127.0.0.1:5432/arena",
    "REDIS_URL": "redis://127.0.0.1:6379/0",
    "ALLOWED_HOSTS": "arena.example.com",
}
INLINE_SCRIPT = re.compile(r"<script(?![^>]*\bsrc=)(?![^>]*type=\"application/json\")[^>]*>", re.IGNORECASE)
EVENT_HANDLER = re.compile(r"<[^>]+\son[a-z]+\s*=", re.IGNORECASE)


def _production(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    # What a deployment's environment would not hold: the suite's own switches (the browser tests set
    # DJANGO_ALLOW_ASYNC_UNSAFE for Playwright), and any security setting a developer exported.
    environment = {
        k: v for k, v in os.environ.items() if not k.startswith(("SECURE_", "ACCOUNT_", "DEBUG", "DJANGO_", "ARENA_"))
    }
    environment.update(PRODUCTION_ENV, **env)
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=120
    )


def _policy(response) -> dict[str, str]:  # type: ignore[no-untyped-def]
    header = response["Content-Security-Policy"]
    return {part.split()[0]: part.strip() for part in header.split(";") if part.strip()}


@pytest.mark.django_db
@pytest.mark.triton
def test_every_page_carries_a_policy_without_inline_script(triton_server, acme, bob_client, alice_client, client):
    battle, page = start_battle(bob_client, acme.campaign)
    pages = {
        "battle": page,
        "campaigns": bob_client.get("/"),
        "login": client.get("/accounts/login/"),
        "signup": client.get("/accounts/signup/"),
        "console": alice_client.get("/admin/"),
        "leaderboard": alice_client.get(f"/leaderboard/{acme.campaign.pk}/"),
        "campaign form": alice_client.get(f"/admin/battles/campaign/{acme.campaign.pk}/change/"),
        "endpoint form": alice_client.get("/admin/serving/modelendpoint/add/"),
    }
    for name, response in pages.items():
        assert response.status_code == 200, name
        policy = _policy(response)
        assert policy["script-src"] == "script-src 'self'", name
        assert "'unsafe-inline'" not in policy["default-src"]
        assert "'unsafe-eval'" not in response["Content-Security-Policy"]
        assert policy["object-src"] == "object-src 'none'" and policy["frame-ancestors"] == "frame-ancestors 'none'"
        html = response.content.decode()
        assert not INLINE_SCRIPT.search(html), f"{name}: inline script"
        assert not EVENT_HANDLER.search(html), f"{name}: inline event handler"
    assert '<script src="/static/arena/battle.js">' in page.content.decode()


def test_no_template_has_an_inline_script_or_style_block():
    for template in (ROOT / "templates").rglob("*.html"):
        text = template.read_text()
        assert not INLINE_SCRIPT.search(text), template
        assert not EVENT_HANDLER.search(text), template
        assert "<style" not in text.lower(), template


@pytest.mark.server
def test_production_defaults_are_https_only_and_pass_check_deploy():
    # One process per environment: the settings it loads, then `manage.py check --deploy` on them, as
    # manage.py runs it (execute_from_command_line), rather than a process for each.
    code = (
        "import django; django.setup(); from django.conf import settings as s; "
        "print(s.SECURE_SSL_REDIRECT, s.SECURE_HSTS_SECONDS, s.SECURE_HSTS_INCLUDE_SUBDOMAINS, "
        "s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, s.ACCOUNT_EMAIL_VERIFICATION, "
        "s.ACCOUNT_PREVENT_ENUMERATION, flush=True); "
        "from django.core.management import execute_from_command_line; "
        "execute_from_command_line(['manage.py', 'check', '--deploy', '--fail-level', 'WARNING'])"
    )
    result = _production("-c", code)
    assert result.returncode == 0, result.stdout + result.stderr
    printed, *check = result.stdout.splitlines()
    assert printed.split() == ["True", "31536000", "True", "True", "True", "mandatory", "True"]
    assert "no issues" in "\n".join(check)
    # Off only when said so ... and the check notices a deployment that switched the protections off.
    weak = _production(
        "-c", code, SECURE_SSL_REDIRECT="false", SECURE_HSTS_SECONDS="0", ACCOUNT_EMAIL_VERIFICATION="none"
    )
    assert weak.stdout.split()[:2] == ["False", "0"], weak.stderr
    assert weak.returncode != 0 and "security.W008" in weak.stderr and "arena.W001" in weak.stderr


@pytest.mark.django_db
def test_production_redirects_to_https_and_sends_hsts(settings, client):
    settings.SECURE_SSL_REDIRECT = True
    settings.SECURE_HSTS_SECONDS = 31_536_000
    plain = client.get("/accounts/login/")
    assert plain.status_code == 301 and plain["Location"].startswith("https://")
    secure = client.get("/accounts/login/", secure=True)
    assert secure.status_code == 200
    assert secure["Strict-Transport-Security"].startswith("max-age=31536000")


@pytest.mark.django_db
def test_signup_does_not_reveal_whether_an_email_is_registered(settings, bob, client):
    settings.ACCOUNT_EMAIL_VERIFICATION = "mandatory"  # the production default
    answers = []
    for email in (bob.email, "newcomer@acme.test"):
        response = client.post(
            "/accounts/signup/", {"email": email, "password1": "Zq8!vL2#wR7pK", "password2": "Zq8!vL2#wR7pK"}
        )
        follow = client.get(response["Location"]) if response.status_code == 302 else response
        answers.append(
            (
                response.status_code,
                response.get("Location"),
                follow.status_code,
                follow.content.decode().replace(email, "EMAIL"),
            )
        )
    assert answers[0] == answers[1]
    assert answers[0][0] == 302
    # The owner of the registered address hears about the attempt; the newcomer gets the confirmation.
    assert [m.to for m in mail.outbox] == [[bob.email], ["newcomer@acme.test"]]
    assert "already" in mail.outbox[0].body.lower() and "already" not in mail.outbox[1].body.lower()


@pytest.mark.django_db
def test_private_responses_are_never_stored(acme, alice_client, client):
    """Cache-Control: no-store on every API response (keyed, refused, unknown path) and on what a signed-in
    person is shown: the console, the dashboard, raters.csv, the leaderboard. A shared proxy or the
    browser's disk cache would otherwise keep a tenant's figures after the session ends."""
    from django.test import Client
    from django.urls import reverse

    from tests.conftest import api_client

    campaign = acme.campaign.pk
    keyed = api_client(acme.organization, scope="read")
    responses = {
        "api list": keyed.get(reverse("api:campaigns")),
        "api refused key": Client(HTTP_AUTHORIZATION="Api-Key arena_00000000_nope").get(reverse("api:campaigns")),
        "api anonymous": client.get(reverse("api:campaigns")),
        "api unknown path": keyed.get("/api/v1/no-such-thing/"),
        "console": alice_client.get(reverse("admin:index")),
        "dashboard": alice_client.get(reverse("ranking:campaign-dashboard", args=[campaign])),
        "raters.csv": alice_client.get(reverse("ranking:campaign-raters-csv", args=[campaign])),
        "leaderboard": alice_client.get(reverse("ranking:leaderboard", args=[campaign])),
    }
    statuses = {name: r.status_code for name, r in responses.items()}
    assert statuses == {
        "api list": 200,
        "api refused key": 401,
        "api anonymous": 401,
        "api unknown path": 404,
        "console": 200,
        "dashboard": 200,
        "raters.csv": 200,
        "leaderboard": 200,
    }, statuses
    headers = {name: r.get("Cache-Control", "") for name, r in responses.items()}
    stored = {name: header for name, header in headers.items() if "no-store" not in header}
    assert not stored, stored
