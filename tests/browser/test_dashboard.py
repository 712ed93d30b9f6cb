"""The managers' dashboard in a real browser: a manager logs in, opens it from the campaign's console page,
and sees every chart drawn (inline SVG with marks in it), the rater table and the cadence check, with no
console error (a Content-Security-Policy violation is one)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import AbstractUser, User
from django.urls import reverse
from playwright.sync_api import BrowserContext, ConsoleMessage, expect
from pytest_django.live_server_helper import LiveServer

from tests.conftest import Tenant
from tests.factories import UserFactory
from tests.ranking.synth import third, vote_at

from .conftest import log_in

pytestmark = pytest.mark.browser

CHARTS = ("chart-votes", "chart-raters", "chart-coverage", "chart-decisions", "chart-quality")


def test_a_manager_opens_the_dashboard_and_sees_the_charts(
    vote_log_purge: None,
    live_server: LiveServer,
    acme: Tenant,
    alice: AbstractUser,
    bob: User,
    browser_context: BrowserContext,
    screenshot_dir: Path,
) -> None:
    # Noon of a UTC day already begun, so that each day's votes (minutes apart) fall on that one day whenever
    # the test runs (at five past midnight, "now minus five minutes" was yesterday: five bars, not four).
    now = datetime.now(UTC).replace(hour=12, minute=0, second=0, microsecond=0)
    if now > datetime.now(UTC):
        now -= timedelta(days=1)
    carol = UserFactory.create()
    c = third(acme)
    pairs = [(acme.left, acme.right), (acme.right, c), (c, acme.left)]
    for day in range(4):
        items: list[Any] = []
        for i in range(6):
            left, right = pairs[i % 3]
            # Votes i and i + 3 (one rater each) are two copies of one shared item: agreement to plot.
            vote = vote_at(
                acme, rater=bob if i % 2 else carol, left=left, right=right,
                at=now - timedelta(days=day, minutes=i), decision_ms=1500 + 2500 * i, choice=("left", "right")[i % 2],
                item_key=items[i - 3] if i >= 3 else None,
            )  # fmt: skip
            items.append(vote.battle_id)
    vote_at(acme, rater=bob, left=acme.left, right=acme.right, at=now, gold_expected="left")

    page = browser_context.new_page()
    errors: list[str] = []

    def on_console(message: ConsoleMessage) -> None:
        if message.type == "error":
            errors.append(message.text)

    page.on("console", on_console)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    log_in(page, live_server.url, email=alice.email)  # the form: the pages of logging in are watched too
    page.goto(live_server.url + reverse("admin:battles_campaign_change", args=[acme.campaign.pk]))
    page.get_by_role("link", name="Dashboard").click()
    page.wait_for_url(live_server.url + reverse("ranking:campaign-dashboard", args=[acme.campaign.pk]))
    expect(page.get_by_role("heading", name="Activity")).to_be_visible()
    for chart in CHARTS:
        svg = page.locator(f"svg#{chart}")
        expect(svg).to_be_visible()
        box = svg.bounding_box()
        assert box is not None and box["width"] > 300 and box["height"] > 40, chart
        # Named for assistive technology by its own title.
        expect(page.get_by_role("img", name=svg.locator("title").first.text_content() or "")).to_have_count(1)
    assert page.locator("svg#chart-votes rect.bar").count() == 4  # four days of votes
    assert page.locator("svg#chart-coverage rect.cell").count() == 6  # 3 x 3 less the diagonal
    assert page.locator("svg#chart-quality path.agreement").count() >= 1
    assert page.locator("#rater-report tbody tr").count() == 2
    expect(page.locator("#cadence-stale")).to_contain_text("The board may be stale")
    # A bar's title is its tooltip: the day and its count.
    assert "6 votes" in (page.locator("svg#chart-votes rect.bar title").first.text_content() or "")
    page.screenshot(path=str(screenshot_dir / "dashboard.png"), full_page=True)
    assert errors == []
