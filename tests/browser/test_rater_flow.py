"""The rater's flow in a real browser: log in, open a campaign, read two blind answers, vote with the
keyboard, see the reveal, go on; and a second tab that tries to vote on a battle already voted on.

Answers come from the session's real Triton server (the acme tenant's two competitors)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.contrib.auth.models import AbstractUser
from django.urls import reverse
from playwright.sync_api import BrowserContext, Page, expect
from pytest_django.live_server_helper import LiveServer

from battles.models import Battle, Vote
from tests.conftest import Tenant, endpoint_of

from .conftest import log_in, logged_in

pytestmark = [pytest.mark.browser, pytest.mark.triton, pytest.mark.usefixtures("triton_server")]

BATTLE_URL = re.compile(r"/b/[0-9a-f-]{36}/$")


def _identity_strings(tenant: Tenant) -> set[str]:
    strings: set[str] = set()
    for competitor in (tenant.left, tenant.right):
        strings |= {endpoint_of(competitor).name, endpoint_of(competitor).model_name, competitor.version_label}
    return strings


def _assert_no_template_syntax(page: Page) -> None:
    """Template tags or comments that reached the page as text (the answers themselves may hold anything)."""
    chrome = page.evaluate(
        "() => { const b = document.body.cloneNode(true);"
        " b.querySelectorAll('.md, script, style').forEach(e => e.remove()); return b.textContent; }"
    )
    assert not re.search(r"\{[#%{]|[#%}]\}", chrome), chrome[:500]


def _battle_id(page: Page) -> str:
    return page.url.rstrip("/").rsplit("/", 1)[-1]


def _start_rating(page: Page, base_url: str, tenant: Tenant) -> str:
    """From the campaign list to a fresh battle; returns the battle page's URL."""
    page.goto(base_url + reverse("battles:campaigns"))
    page.get_by_role("link", name=tenant.campaign.name).click()
    page.wait_for_url(base_url + reverse("battles:campaign", args=[tenant.campaign.pk]))
    page.get_by_role("button", name="Start rating").click()
    page.wait_for_url(BATTLE_URL)
    expect(page.locator("#vote-form")).to_be_visible()
    return page.url


def test_rater_logs_in_votes_with_the_keyboard_sees_the_reveal_and_goes_on(
    vote_log_purge: None,
    live_server: LiveServer,
    acme: Tenant,
    bob: AbstractUser,
    browser_context: BrowserContext,
    screenshot_dir: Path,
) -> None:
    page = browser_context.new_page()
    log_in(page, live_server.url, email=bob.email)
    first_url = _start_rating(page, live_server.url, acme)

    # Blind: two panes of the same width, and nothing in the page that names a model.
    pane_a, pane_b = page.locator("#pane-A"), page.locator("#pane-B")
    expect(pane_a.get_by_role("heading", name="Answer A")).to_be_visible()
    expect(pane_b.get_by_role("heading", name="Answer B")).to_be_visible()
    box_a, box_b = pane_a.bounding_box(), pane_b.bounding_box()
    assert box_a is not None and box_b is not None
    assert abs(box_a["width"] - box_b["width"]) <= 2, (box_a, box_b)
    assert box_a["x"] + box_a["width"] <= box_b["x"], "panes should sit side by side at this width"
    html = page.content()
    for secret in _identity_strings(acme):
        assert secret not in html, f"{secret!r} visible before the vote"
    expect(page.locator(".model-name")).to_have_count(0)
    _assert_no_template_syntax(page)
    page.screenshot(path=str(screenshot_dir / "arena-battle.png"), full_page=True)

    # Vote with the keyboard: 1 = A is better.
    page.keyboard.press("1")
    expect(page.locator("#result")).to_contain_text("You voted")
    assert page.url == first_url
    battle = Battle.objects.select_related("left__endpoint", "right__endpoint").get(pk=_battle_id(page))
    expect(pane_a.locator(".model-name")).to_have_text(endpoint_of(battle.left).name)
    expect(pane_b.locator(".model-name")).to_have_text(endpoint_of(battle.right).name)
    expect(page.locator("#vote-form")).to_have_count(0)
    _assert_no_template_syntax(page)
    page.screenshot(path=str(screenshot_dir / "arena-reveal.png"), full_page=True)

    votes = list(Vote.objects.all())
    assert len(votes) == 1
    assert votes[0].battle_id == battle.pk
    assert votes[0].choice == "left"
    assert votes[0].rater_id == bob.pk

    # N: the next battle, blind again.
    page.keyboard.press("N")
    page.wait_for_url(lambda url: BATTLE_URL.search(url) is not None and url != first_url)
    expect(page.locator("#vote-form button")).to_have_count(4)
    expect(page.get_by_role("button", name=re.compile("A is better"))).to_be_enabled()
    expect(page.locator(".model-name")).to_have_count(0)
    assert Vote.objects.count() == 1


def test_second_tab_cannot_vote_on_a_battle_already_voted_on(
    vote_log_purge: None,
    live_server: LiveServer,
    acme: Tenant,
    bob: AbstractUser,
    browser_context: BrowserContext,
) -> None:
    logged_in(browser_context, live_server.url, bob)
    first = browser_context.new_page()
    url = _start_rating(first, live_server.url, acme)
    second = browser_context.new_page()  # same profile, so the same session: a second tab
    second.goto(url)
    expect(second.locator("#vote-form")).to_be_visible()

    first.keyboard.press("2")
    expect(first.locator("#result")).to_contain_text("You voted")

    second.keyboard.press("1")
    expect(second.get_by_role("alert")).to_contain_text("already been voted")
    expect(second.locator("#vote-form")).to_have_count(0)

    votes = list(Vote.objects.all())
    assert len(votes) == 1
    assert str(votes[0].battle_id) == _battle_id(first)
    assert votes[0].choice == "right"
