"""The leaderboard in a real browser at a phone's width (390 px) and a laptop's (1280 px): no page-level
horizontal overflow, tooltips reachable from the keyboard, a heatmap legend, CSV / JSON downloads and a
permalink to the version shown. No model server is needed: the votes are written straight to the log."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import BrowserContext, expect
from pytest_django.live_server_helper import LiveServer

from battles.models import Campaign
from ranking.services import leaderboards_recompute
from raters.models import Role
from tests.factories import (
    CampaignFactory,
    CompetitorFactory,
    MembershipFactory,
    ModelEndpointFactory,
    OrganizationFactory,
    PromptFactory,
    RaterPoolFactory,
    UserFactory,
)
from tests.ranking.synth import votes_write

from .conftest import logged_in

pytestmark = [pytest.mark.browser]


@pytest.fixture
def board_campaign(vote_log_purge: None) -> tuple[User, Campaign]:
    owner = UserFactory.create(email="owner@board.test")
    rater = UserFactory.create(email="rater@board.test")
    organization = OrganizationFactory.create(name="Board", slug="board")
    MembershipFactory.create(user=owner, organization=organization, role=Role.OWNER)
    pool = RaterPoolFactory.create(organization=organization, name="Board staff")
    campaign = CampaignFactory.create(organization=organization, name="Board chat", slug="board-chat")
    competitors = [
        CompetitorFactory.create(
            campaign=campaign,
            version_label="2026-11",
            endpoint=ModelEndpointFactory.create(organization=organization, name=f"a-rather-long-model-name-{k}"),
        )
        for k in range(5)
    ]
    prompts = [PromptFactory.create(campaign=campaign) for _ in range(6)]
    votes_write(
        campaign=campaign,
        pool=pool,
        raters=[rater],
        prompts=prompts,
        competitors=competitors,
        strengths=(3.0, 2.0, 1.5, 1.0, 0.6),
        n=400,
        seed=3,
    )
    Campaign.objects.filter(pk=campaign.pk).update(ranking_min_votes=10, ranking_bootstrap_rounds=20, min_decision_ms=0)
    leaderboards_recompute(campaign_id=campaign.pk)
    return owner, campaign


@pytest.mark.parametrize("width", [390, 1280])
def test_leaderboard_at_phone_and_laptop_width(
    board_campaign, browser_context: BrowserContext, live_server: LiveServer, width: int, screenshot_dir: Path
) -> None:
    owner, campaign = board_campaign
    logged_in(browser_context, live_server.url, owner)
    page = browser_context.new_page()
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"{live_server.url}/leaderboard/{campaign.pk}/")
    expect(page.get_by_role("heading", name="Board chat — leaderboard")).to_be_visible()

    # Nothing overflows the page itself; wide tables scroll inside their own box.
    overflow = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0, f"page overflows by {overflow}px at {width}px"

    # The heatmap has a legend.
    expect(page.get_by_label("Heatmap legend")).to_be_visible()

    # Tooltips without a mouse: tab onto the first interval, then onto heatmap cells; focus shows the text.
    page.locator("body").focus()
    first_tip = page.locator("td.interval .tip").first
    for _ in range(60):
        page.keyboard.press("Tab")
        if page.evaluate("() => document.activeElement && document.activeElement.classList.contains('tip')"):
            break
    focused = page.evaluate("() => document.activeElement.getAttribute('data-tip') || ''")
    assert focused, "no tooltip reachable with the keyboard"
    first_tip.focus()
    after = page.evaluate("() => getComputedStyle(document.activeElement, '::after').content")
    assert "bootstrap" in after or "profile" in after, after
    cell = page.locator("table.heatmap td.tip").first
    cell.focus()
    tip = page.evaluate("() => getComputedStyle(document.activeElement, '::after').content")
    assert "Wilson" in tip and "Holm p=" in tip and "score difference" in tip, tip
    assert cell.get_attribute("aria-label") and cell.get_attribute("title")
    page.screenshot(path=str(screenshot_dir / f"leaderboard-{width}.png"), full_page=True)

    # Downloads of the version shown.
    with page.expect_download() as csv_download:
        page.get_by_role("link", name="Download CSV").click()
    text = Path(csv_download.value.path()).read_text()
    assert text.splitlines()[0].startswith("rank_best,rank_worst,competitor_id")
    assert len(text.splitlines()) == 6
    with page.expect_download() as json_download:
        page.get_by_role("link", name="Download JSON").click()
    assert '"version": 1' in Path(json_download.value.path()).read_text()

    # The permalink opens this very version.
    page.get_by_role("link", name="permalink (v1)").click()
    page.wait_for_url(f"{live_server.url}/leaderboard/{campaign.pk}/v/1/?view=raw")
    expect(page.get_by_text("You are looking at version 1")).to_be_visible()
    assert page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth") <= 0
