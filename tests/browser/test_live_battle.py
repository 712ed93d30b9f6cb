"""A live battle in a real browser, served under ASGI (uvicorn) with a real generation worker: the rater
types a prompt, the page shows two empty panes and a closed vote while the models write, then both
panes fill together, and the vote opens only once both answers are complete.

The second test drives the paced stream itself: arrivals published to the live channel on a timeline
the test controls (a fast, long answer and a slow, short one), so the browser shows words arriving."""

from __future__ import annotations

import re
import threading
import time
from typing import Any

import pytest
from django.contrib.auth.models import AbstractUser, User
from django.db import connections
from django.urls import reverse
from playwright.sync_api import BrowserContext, Page, expect

from battles import live, services
from battles.models import Battle, Competitor
from raters.tenancy import scopes_disabled
from serving.triton.client import GenerationResult
from tests.conftest import Tenant, endpoint_for
from tests.factories import CompetitorFactory

from .conftest import AsgiServer, logged_in

pytestmark = [pytest.mark.browser]

BATTLE_URL = re.compile(r"/b/[0-9a-f-]{36}/$")

# Records, in the page, when each pane first held text, every change of the panes' lengths, and when
# the vote buttons were enabled (a MutationObserver added before the page's own scripts run).
OBSERVER = """
window.__live = {first: {}, changes: [], voteOpen: null};
new MutationObserver(function () {
  var a = document.querySelector('#pane-A .md'), b = document.querySelector('#pane-B .md');
  if (!a || !b || !document.querySelector('.battle[data-stream]')) return;
  var now = performance.now(), la = a.textContent.length, lb = b.textContent.length;
  var log = window.__live;
  if (la && log.first.A === undefined) log.first.A = now;
  if (lb && log.first.B === undefined) log.first.B = now;
  var last = log.changes[log.changes.length - 1];
  if (!last || last[1] !== la || last[2] !== lb) log.changes.push([now, la, lb]);
  var button = document.querySelector('#vote-form button');
  if (button && !button.disabled && log.voteOpen === null) log.voteOpen = now;
}).observe(document, {subtree: true, childList: true, characterData: true, attributes: true});
"""


def _live_log(page: Page) -> dict[str, Any]:
    result: dict[str, Any] = page.evaluate("() => window.__live")
    return result


def _use_models(tenant: Tenant, url: str, fast: str, slow: str) -> None:
    Competitor.objects.filter(campaign=tenant.campaign).update(active=False)
    for model in (fast, slow):
        CompetitorFactory.create(campaign=tenant.campaign, endpoint=endpoint_for(tenant, model=model, url=url))


@pytest.mark.triton
def test_a_typed_prompt_streams_both_answers_together_and_opens_the_vote_at_the_end(
    vote_log_purge: None,
    asgi_live_server: AsgiServer,
    acme: Tenant,
    bob: AbstractUser,
    browser_context: BrowserContext,
    triton_server: Any,
) -> None:
    acme.campaign.allow_rater_prompts = True
    acme.campaign.save()
    _use_models(acme, triton_server.grpc_url, "delay-fast", "delay-lazy")  # 0.1 s and 1.5 s
    browser_context.add_init_script(OBSERVER)
    base = asgi_live_server.url
    logged_in(browser_context, base, bob)
    page = browser_context.new_page()
    page.goto(base + reverse("battles:campaign", args=[acme.campaign.pk]))
    page.get_by_label("Your prompt").fill("Explain what a hash table is.")
    page.get_by_role("button", name="Generate two answers").click()
    page.wait_for_url(BATTLE_URL)

    # While the models write: two empty panes and a closed vote (the fast model answered long ago).
    expect(page.locator(".battle[data-stream]")).to_have_count(1)
    expect(page.locator("#pane-A .md")).to_have_text("")
    expect(page.locator("#pane-B .md")).to_have_text("")
    buttons = page.locator("#vote-form button")
    expect(buttons).to_have_count(4)
    for index in range(4):
        expect(buttons.nth(index)).to_be_disabled()
    page.keyboard.press("1")  # a shortcut does nothing while the vote is closed
    time.sleep(0.3)
    assert BATTLE_URL.search(page.url) and Battle.objects.get().status == Battle.Status.GENERATING

    # Then both fill in the same frame, and the vote opens once both are complete.
    expect(page.locator("#pane-A .md")).not_to_have_text("", timeout=30_000)
    expect(page.get_by_role("button", name=re.compile("A is better"))).to_be_enabled()
    log = _live_log(page)
    assert abs(log["first"]["A"] - log["first"]["B"]) < 50, log
    assert log["voteOpen"] is not None and log["voteOpen"] >= max(log["first"].values())
    battle = Battle.objects.get()
    assert battle.live and battle.status == Battle.Status.READY and battle.shown_at is not None

    page.keyboard.press("1")
    expect(page.locator("#result")).to_contain_text("You voted")
    expect(page.locator(".model-name")).to_have_count(2)


def _publish(battle_id: str, timelines: list[list[tuple[float, str]]], texts: list[str]) -> threading.Thread:
    channel = live.live_channel()
    events = sorted(
        [(t, side, delta, i == len(tl) - 1) for side, tl in enumerate(timelines) for i, (t, delta) in enumerate(tl)]
    )

    def run() -> None:
        origin, last = time.monotonic(), 0.0
        for t, side, delta, done in events:
            while time.monotonic() - origin < t - 0.03:
                last = max(time.monotonic() - origin, last + 1e-6)
                channel.publish(battle_id, live.LiveItem(kind="mark", t=last))
                time.sleep(0.025)
            time.sleep(max(0.0, t - (time.monotonic() - origin)))
            last = max(t, last + 1e-6)
            channel.publish(battle_id, live.LiveItem(kind="chunk", t=last, side=side, delta=delta, done=done))
        with scopes_disabled():
            recorded = services.battle_generations_record(
                battle=Battle.objects.get(pk=battle_id),
                left=GenerationResult(texts[0], len(texts[0].split()), "stop", 1.0),
                right=GenerationResult(texts[1], len(texts[1].split()), "stop", 1.0),
            )
        channel.publish(battle_id, live.LiveItem(kind="end", t=last + 1e-3, status=recorded.status))
        channel.close_publisher()
        connections.close_all()

    return threading.Thread(target=run, daemon=True)


def test_the_page_shows_both_answers_at_one_pace_in_plain_text_then_rendered(
    vote_log_purge: None,
    asgi_live_server: AsgiServer,
    acme: Tenant,
    bob: AbstractUser,
    browser_context: BrowserContext,
) -> None:
    from tests.battles.test_streaming import live_battle

    battle = live_battle(acme, User.objects.get(pk=bob.pk))
    # Left: fast (every 20 ms from 0.2 s) and long, with markdown; right: slow (every 150 ms from 1.2 s).
    left_words = ["**Hash**"] + [f"word{i}" for i in range(29)] + ["<b>x</b>"]
    right_words = [f"slow{i}" for i in range(8)]
    left = [(0.2 + 0.02 * i, w + ("" if i == len(left_words) - 1 else " ")) for i, w in enumerate(left_words)]
    right = [(1.2 + 0.15 * i, w + ("" if i == len(right_words) - 1 else " ")) for i, w in enumerate(right_words)]
    texts = [" ".join(left_words), " ".join(right_words)]
    browser_context.add_init_script(OBSERVER)
    logged_in(browser_context, asgi_live_server.url, bob)
    page = browser_context.new_page()
    page.goto(asgi_live_server.url + reverse("battles:battle", args=[battle.pk]))
    expect(page.locator(".battle[data-stream]")).to_have_count(1)
    started = page.evaluate("() => performance.now()")
    _publish(str(battle.pk), [left, right], texts).start()

    expect(page.get_by_role("button", name=re.compile("A is better"))).to_be_enabled(timeout=30_000)
    log = _live_log(page)
    changes = [change for change in log["changes"] if change[1] or change[2]]
    # Nothing until the slow side's first word (1.2 s after publishing began), then both at once.
    assert log["first"]["A"] == log["first"]["B"], log
    assert log["first"]["A"] - started >= 1100, log
    assert changes[0][1] > 0 and changes[0][2] > 0
    # Both panes advanced together over several frames (the slow side's 8 words took ~1 s) ...
    assert len(changes) >= 5, changes
    for _, length_a, length_b in changes[:-1]:
        words_a, words_b = texts[0][:length_a].split(), texts[1][:length_b].split()
        assert len(words_a) == len(words_b) or len(words_b) == len(right_words), (length_a, length_b)
    # ... the long fast answer's tail kept the slow pace after the slow side ended (30 words at ~150 ms).
    assert log["voteOpen"] - log["first"]["A"] >= 0.15 * (len(left_words) - 2) * 1000, log
    # While streaming the text was plain (the markup shown as typed); at the end the one renderer.
    expect(page.locator("#pane-A .md strong")).to_have_text("Hash")
    expect(page.locator("#pane-A .md")).to_contain_text("<b>x</b>")
    expect(page.locator("#pane-A .md b")).to_have_count(0)
    battle.refresh_from_db()
    assert battle.shown_at is not None


@pytest.mark.triton
def test_a_second_turn_streams_under_the_first_and_the_one_vote_comes_at_the_end(
    vote_log_purge: None,
    asgi_live_server: AsgiServer,
    acme: Tenant,
    bob: AbstractUser,
    browser_context: BrowserContext,
    triton_server: Any,
) -> None:
    from battles.models import Campaign, Turn, Vote

    Campaign.objects.filter(pk=acme.campaign.pk).update(allow_rater_prompts=True, max_turns=2, min_decision_ms=0)
    _use_models(acme, triton_server.grpc_url, "delay-fast", "delay-lazy")
    base = asgi_live_server.url
    logged_in(browser_context, base, bob)
    page = browser_context.new_page()
    page.goto(base + reverse("battles:campaign", args=[acme.campaign.pk]))
    page.get_by_label("Your prompt").fill("Name three sorting algorithms.")
    page.get_by_role("button", name="Generate two answers").click()
    page.wait_for_url(BATTLE_URL)
    expect(page.get_by_role("button", name=re.compile("A is better"))).to_be_enabled(timeout=30_000)

    # The second turn: the box under the vote buttons; both models answer, the vote is closed meanwhile.
    page.get_by_label(re.compile("continue the conversation")).fill("Which one is stable?")
    page.get_by_role("button", name="Send to both").click()
    page.wait_for_url(BATTLE_URL)
    expect(page.get_by_role("heading", name="Your turn 2")).to_be_visible()
    expect(page.locator(".turn.past .pane")).to_have_count(2)  # the first turn's answers stay above
    expect(page.get_by_role("button", name=re.compile("A is better"))).to_be_disabled()
    expect(page.locator("#pane-A .md")).not_to_have_text("", timeout=30_000)
    expect(page.get_by_role("button", name=re.compile("A is better"))).to_be_enabled(timeout=30_000)
    expect(page.locator("#continue-form")).to_have_count(0)  # two turns of two
    assert Turn.objects.get().text == "Which one is stable?"

    page.keyboard.press("2")
    expect(page.locator("#result")).to_contain_text("You voted")
    vote = Vote.objects.get()
    assert vote.choice == "right" and vote.turns is not None and len(vote.turns) == 2
