"""The rough edges a new user met, in a real browser at a phone's and a desktop's width: the vote
buttons in key order, the progress counter and the session cap, a typed prompt kept while a battle is
pending, titles, headings, the label and the live region, the manager's home page, an invitation
opened while logged out, and the error pages."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.contrib.auth.models import AbstractUser, User
from django.urls import reverse
from playwright.sync_api import BrowserContext, Page, expect
from pytest_django.live_server_helper import LiveServer

from battles.models import Battle, Campaign, Prompt, Vote
from raters.services import invitation_create
from tests.conftest import Tenant, endpoint_of
from tests.planting import answers_planted, planting

from .conftest import logged_in

pytestmark = [pytest.mark.browser, pytest.mark.triton]

BATTLE_URL = re.compile(r"/b/[0-9a-f-]{36}/$")


def _start(page: Page, base_url: str, tenant: Tenant) -> Battle:
    page.goto(f"{base_url}/c/{tenant.campaign.pk}/")
    page.get_by_role("button", name="Start rating").click()
    page.wait_for_url(BATTLE_URL)
    expect(page.locator("#vote-form")).to_be_visible()
    return Battle.objects.get(pk=page.url.rstrip("/").rsplit("/", 1)[-1])


def _headings(page: Page) -> list[str]:
    # textContent, not innerText: the pane labels are upper-cased by CSS only.
    return [" ".join((heading.text_content() or "").split()) for heading in page.get_by_role("heading").all()]


def _shot(page: Page, screenshot_dir: Path, name: str) -> None:
    """Leave a screenshot for a person, and check that the page fits its width (no sideways scrolling)."""
    width = page.viewport_size["width"] if page.viewport_size else 0
    page.screenshot(path=str(screenshot_dir / f"arena-{name}-{width}.png"), full_page=True)
    assert page.evaluate("() => document.documentElement.scrollWidth") <= width, f"{name} overflows {width} px"


# Points of the sticky vote bar, and of the strip below it, that are not a button: what the browser shows
# there (elementFromPoint) must be the bar itself, never an answer's text behind it.
VOTE_BAR_PROBE = """() => {
  const bar = document.getElementById("vote-form"), r = bar.getBoundingClientRect(), hits = [];
  for (let i = 0; i <= 12; i++) {
    for (const y of [r.top + 1, r.top + r.height / 2, r.bottom - 1, (r.bottom + innerHeight) / 2]) {
      const x = r.left + 1 + (r.width - 2) * i / 12;
      if (y >= innerHeight) continue;
      const hit = document.elementFromPoint(x, y);
      hits.push({x, y, inBar: bar.contains(hit), what: hit ? hit.tagName + "." + hit.className : "none"});
    }
  }
  const pane = document.getElementById("pane-A").getBoundingClientRect();
  return {hits, barBottom: r.bottom, viewport: innerHeight, paneUnder: pane.top < r.top && pane.bottom > r.bottom,
          background: getComputedStyle(bar).backgroundColor};
}"""


def _vote_bar_is_opaque_over_the_answers(page: Page) -> None:
    """The vote bar sticks to the bottom of the viewport over a long answer, and no answer text shows
    through it: not between the buttons, not around them, not under the bar (issue 22.6: on a phone the
    text showed through the gaps of the two rows)."""
    page.evaluate("() => window.scrollTo(0, 0)")
    probe = page.evaluate(VOTE_BAR_PROBE)
    assert probe["paneUnder"], "the answer should run under the sticky bar for this check to mean anything"
    assert abs(probe["barBottom"] - probe["viewport"]) <= 1, probe["barBottom"]  # no gap under the bar
    assert probe["background"] not in ("rgba(0, 0, 0, 0)", "transparent"), probe["background"]
    behind = [hit for hit in probe["hits"] if not hit["inBar"]]
    assert not behind, behind[:5]


def test_battle_page_buttons_keys_progress_title_outline_and_live_region(
    vote_log_purge: None,
    live_server: LiveServer,
    acme: Tenant,
    bob: AbstractUser,
    sized_context: BrowserContext,
    screenshot_dir: Path,
) -> None:
    logged_in(sized_context, live_server.url, bob)
    page = sized_context.new_page()
    battle = _start(page, live_server.url, acme)
    # Markdown headings in an answer (models write them) must not enter the page outline.
    with planting():
        answers_planted(
            battle.generations, "# Heading from a model\n\n## Another\n\n" + "Some text of a long answer. " * 150
        )
    page.reload()
    _vote_bar_is_opaque_over_the_answers(page)

    expect(page).to_have_title(f"Battle 1 of 20 · {acme.campaign.name} · Arena")
    expect(page.locator("h1")).to_have_count(1)
    assert _headings(page) == [f"Battle 1 · {acme.campaign.name}", "Prompt", "Answer A", "Answer B"]
    expect(page.locator("#progress")).to_have_text("Battle 1 of 20 in the last 12 hours")
    expect(page.locator("#pane-A .md-h1")).to_have_text("Heading from a model")
    _shot(page, screenshot_dir, "battle")

    # The buttons read, left to right and top to bottom (two rows on a phone), in key order.
    buttons = page.locator("#vote-form button")
    boxes = [buttons.nth(i).bounding_box() for i in range(4)]
    assert all(box is not None for box in boxes)
    reading_order = sorted(range(4), key=lambda i: (round(boxes[i]["y"]), boxes[i]["x"]))  # type: ignore[index]
    values = [buttons.nth(i).get_attribute("value") for i in reading_order]
    keys = [buttons.nth(i).locator("kbd").inner_text() for i in reading_order]
    assert values == ["left", "right", "tie", "both_bad"] and keys == ["1", "2", "3", "4"]

    announcer = page.locator("#announcer")
    expect(announcer).to_have_attribute("aria-live", "polite")
    expect(announcer).to_have_text("")
    # Blind: the new title, heading, counter and live region name no model before the vote.
    html = page.content()
    for competitor in (acme.left, acme.right):
        for secret in (endpoint_of(competitor).name, endpoint_of(competitor).model_name, competitor.version_label):
            assert secret not in html, f"{secret!r} visible before the vote"
    page.keyboard.press("2")  # the second button: B is better
    expect(page.locator("#result")).to_contain_text("B is better")
    assert Vote.objects.get().choice == "right"
    battle.refresh_from_db()
    expect(announcer).to_contain_text(f"Your vote is stored: B is better. Answer A was {endpoint_of(battle.left).name}")
    expect(page).to_have_title(f"Result of battle 1 · {acme.campaign.name} · Arena")
    expect(page.locator("h1")).to_have_count(1)
    _shot(page, screenshot_dir, "result")

    page.keyboard.press("n")
    page.wait_for_url(lambda url: BATTLE_URL.search(url) is not None and str(battle.pk) not in url)
    expect(page).to_have_title(f"Battle 2 of 20 · {acme.campaign.name} · Arena")
    expect(page.locator("#progress")).to_have_text("Battle 2 of 20 in the last 12 hours")


def test_after_the_session_cap_there_is_no_next_or_start_button(
    vote_log_purge: None,
    live_server: LiveServer,
    acme: Tenant,
    bob: AbstractUser,
    sized_context: BrowserContext,
    screenshot_dir: Path,
) -> None:
    Campaign.objects.filter(pk=acme.campaign.pk).update(session_cap=1)
    logged_in(sized_context, live_server.url, bob)
    page = sized_context.new_page()
    _start(page, live_server.url, acme)
    expect(page.locator("#progress")).to_have_text("Battle 1 of 1 in the last 12 hours")
    page.keyboard.press("3")
    expect(page.locator("#result")).to_contain_text("Tie")
    expect(page.get_by_role("button", name=re.compile("Next battle"))).to_have_count(0)
    expect(page.locator("#cap-reached")).to_contain_text("Take a break")
    page.keyboard.press("n")  # no button, so the key does nothing
    page.goto(f"{live_server.url}/c/{acme.campaign.pk}/")
    expect(page.locator("#cap-reached")).to_be_visible()
    expect(page.get_by_role("button", name="Start rating")).to_have_count(0)
    expect(page.locator("#progress")).to_have_text("1 of 1 battles in the last 12 hours")
    _shot(page, screenshot_dir, "session-cap")
    assert Battle.objects.count() == 1


def test_a_prompt_typed_while_a_battle_is_pending_waits_prefilled_after_the_vote(
    vote_log_purge: None,
    live_server: LiveServer,
    acme: Tenant,
    bob: AbstractUser,
    sized_context: BrowserContext,
    screenshot_dir: Path,
) -> None:
    Campaign.objects.filter(pk=acme.campaign.pk).update(allow_rater_prompts=True)
    logged_in(sized_context, live_server.url, bob)
    older_tab = sized_context.new_page()
    older_tab.goto(f"{live_server.url}/c/{acme.campaign.pk}/")
    box = older_tab.get_by_label("Your prompt")  # the box has a label
    expect(box).to_be_visible()

    battle_tab = sized_context.new_page()
    pending = _start(battle_tab, live_server.url, acme)

    typed = "Explain recursion to a child, briefly."
    box.fill(typed)
    older_tab.get_by_role("button", name="Generate two answers").click()
    older_tab.wait_for_url(f"{live_server.url}/b/{pending.pk}/")
    expect(older_tab.get_by_role("status").filter(has_text="Your prompt is kept")).to_be_visible()
    assert not Prompt.objects.filter(source=Prompt.Source.RATER).exists()

    older_tab.keyboard.press("1")
    expect(older_tab.locator("#result")).to_contain_text("A is better")
    box = older_tab.get_by_label("Your prompt")
    expect(box).to_have_value(typed)
    _shot(older_tab, screenshot_dir, "kept-prompt")
    older_tab.get_by_role("button", name="Generate two answers").click()
    older_tab.wait_for_url(lambda url: BATTLE_URL.search(url) is not None and str(pending.pk) not in url)
    expect(older_tab.locator(".prompt .md")).to_have_text(typed)
    assert Battle.objects.get(pk=older_tab.url.rstrip("/").rsplit("/", 1)[-1]).prompt.text == typed


def test_managers_home_lists_their_campaigns_and_leaderboards(
    live_server: LiveServer,
    acme: Tenant,
    alice: AbstractUser,
    sized_context: BrowserContext,
    screenshot_dir: Path,
) -> None:
    logged_in(sized_context, live_server.url, alice)
    page = sized_context.new_page()
    page.goto(live_server.url + reverse("battles:campaigns"))
    expect(page.get_by_role("heading", name="Campaigns you manage")).to_be_visible()
    expect(page.get_by_text("No open campaign lists you as a rater")).to_have_count(0)
    _shot(page, screenshot_dir, "manager-home")
    page.get_by_role("link", name=f"Leaderboard of {acme.campaign.name}").click()
    page.wait_for_url(f"{live_server.url}/leaderboard/{acme.campaign.pk}/")
    page.go_back()
    page.get_by_role("link", name=acme.campaign.name, exact=True).click()
    page.wait_for_url(re.compile(rf"/admin/battles/campaign/{acme.campaign.pk}/change/$"))


def test_logged_out_invitee_sees_the_invitation_and_is_in_the_pool_after_signing_up(
    live_server: LiveServer,
    acme: Tenant,
    alice: User,
    sized_context: BrowserContext,
    screenshot_dir: Path,
) -> None:
    invitation = invitation_create(pool=acme.pool, actor=alice)
    page = sized_context.new_page()
    page.goto(f"{live_server.url}{invitation.path}")
    expect(page.locator("#invitation")).to_contain_text(acme.organization.name)
    expect(page.locator("#invitation")).to_contain_text(acme.pool.name)
    _shot(page, screenshot_dir, "invitation")
    page.get_by_role("button", name="Sign up and join").click()
    page.wait_for_url(re.compile(r"/accounts/signup/"))
    page.get_by_label("Email").fill("dana@acme.test")
    page.locator("#id_password1").fill("a-long-enough-pass-1")
    page.get_by_label("Password (again)").fill("a-long-enough-pass-1")
    page.get_by_role("button", name="Sign Up").click()
    page.wait_for_url(f"{live_server.url}/")
    expect(page.get_by_role("status")).to_contain_text(f"You joined {acme.pool.name}")
    expect(page.get_by_role("link", name=acme.campaign.name)).to_be_visible()
    assert acme.pool.members.filter(email="dana@acme.test").exists()


def test_error_page_is_the_sites_own_with_debug_off(
    live_server: LiveServer,
    settings,
    sized_context: BrowserContext,
    screenshot_dir: Path,  # type: ignore[no-untyped-def]
) -> None:
    settings.DEBUG = False
    page = sized_context.new_page()
    response = page.goto(f"{live_server.url}/no/such/page/")
    assert response is not None and response.status == 404
    expect(page).to_have_title("Page not found · Arena")
    expect(page.get_by_role("heading", level=1)).to_have_text("Page not found")
    expect(page.get_by_role("link", name="Arena")).to_be_visible()  # the site's top bar
    # The stylesheet applied: the card has the site's white background and border.
    assert page.locator(".error-page").evaluate("e => getComputedStyle(e).backgroundColor") == "rgb(255, 255, 255)"
    assert "Traceback" not in page.content() and "URLconf" not in page.content()
    _shot(page, screenshot_dir, "404")
