"""The Content-Security-Policy in a real browser: the pages work under it (the battle page's keyboard
shortcuts from static/arena/battle.js, the leaderboard's computed bar widths, the API's Swagger UI), it
reports no violation on them, and it does block an inline script."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import AbstractUser
from playwright.sync_api import BrowserContext, ConsoleMessage, expect
from pytest_django.live_server_helper import LiveServer

from ranking.services import leaderboards_recompute
from tests.conftest import Tenant, start_battle

from .conftest import log_in


@pytest.mark.browser
@pytest.mark.triton
def test_pages_work_under_the_policy_and_inline_script_is_blocked(
    vote_log_purge: None,
    triton_server: object,
    live_server: LiveServer,
    acme: Tenant,
    alice: AbstractUser,
    bob: AbstractUser,
    bob_client,
    browser_context: BrowserContext,  # type: ignore[no-untyped-def]
) -> None:
    for choice in ("left", "right", "left"):
        battle, _ = start_battle(bob_client, acme.campaign)
        assert bob_client.post(f"/b/{battle.pk}/vote/", {"choice": choice}).status_code == 302
    acme.campaign.ranking_min_votes = 1
    acme.campaign.save(update_fields=["ranking_min_votes"])
    leaderboards_recompute(campaign_id=acme.campaign.pk)

    page = browser_context.new_page()
    violations: list[str] = []

    def on_console(message: ConsoleMessage) -> None:
        if "Content Security Policy" in message.text:
            violations.append(message.text)

    page.on("console", on_console)
    log_in(page, live_server.url, email=alice.email)  # the form: the pages of logging in are watched too
    page.goto(f"{live_server.url}/leaderboard/{acme.campaign.pk}/")
    bar = page.locator("span.bar").first
    expect(bar).to_be_visible()
    assert bar.evaluate("b => parseFloat(getComputedStyle(b).width)") > 0  # style attributes apply
    assert violations == []

    # The API's Swagger UI page (drf-spectacular's template had an inline <style>, which the policy refused).
    page.goto(f"{live_server.url}/api/v1/docs/")
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("Arena API")
    assert violations == []
    assert page.evaluate("() => getComputedStyle(document.body).margin") == "0px"  # its own rules apply

    # The policy is enforced, not only sent: an inline script does not run, and the browser says why (its
    # console message comes a moment later: waited for, instead of a fixed pause).
    with page.expect_console_message(lambda message: "script-src" in message.text):
        page.evaluate("""() => { const s = document.createElement("script");
                                 s.textContent = "window.__inline_ran = true;"; document.body.appendChild(s); }""")
    assert page.evaluate("() => window.__inline_ran === true") is False
    assert any("script-src" in text for text in violations), violations
