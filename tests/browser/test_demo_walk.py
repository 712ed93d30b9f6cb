"""The demo walked in a real browser, as a manager meets it (issue 22.2 and 22.3): the demo's seed
(battles/demo.py) with a few voted battles and one gold vote, then the features the demo shows, each to its
end: a webhook to a receiver on this machine (loopback, allowed in the demo only) gets a signed ping; the
demo's judge judges the voted battles; the vote log exports; and the board, the dashboard, the API and the
export count the same votes, the gold one said apart.

The live server runs the platform's Celery worker in its process (every queue: the ping's delivery and
the judge run go through the broker as in the demo); answers come from the session's real Triton."""

from __future__ import annotations

import csv
import io
import re
import time
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.contrib.auth.models import User
from django.urls import reverse
from django.utils import timezone
from playwright.sync_api import BrowserContext, expect
from pytest_django.live_server_helper import LiveServer

from battles.demo import DEMO_JUDGE, DEMO_MANAGER, DEMO_RATER, demo_seed
from battles.management.commands.demo import demo_webhooks_loopback
from battles.models import Judge, JudgeRun
from battles.services import gold_competitors
from ranking.services import leaderboards_recompute
from raters.models import RaterPool, WebhookDelivery, WebhookEndpoint
from serving.triton.server import TritonServer
from tests.battles.judge_world import battle_plant
from tests.conftest import Tenant
from tests.ranking.synth import vote_at
from tests.raters.webhook_receiver import receiver_running

from .conftest import logged_in

pytestmark = [pytest.mark.browser, pytest.mark.triton]

VOTED = 5  # battles voted through the pool, all judgeable; and one gold vote beside them


def _until(condition, what: str, timeout_s: float = 60) -> None:  # type: ignore[no-untyped-def]
    """Wait on a condition the worker makes true (a delivery sent, a run finished)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_the_demo_walk_webhook_judge_export_and_counts_that_agree(
    vote_log_purge: None,
    live_server: LiveServer,
    browser_context: BrowserContext,
    triton_server: TritonServer,
    settings,  # type: ignore[no-untyped-def]
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The demo's own settings: its webhook allow-list (loopback), whatever the test settings say.
    monkeypatch.delenv("ARENA_WEBHOOK_HOSTS", raising=False)
    settings.ARENA_WEBHOOK_HOSTS = []  # pytest-django restores the setting after the test
    demo_webhooks_loopback()
    world = demo_seed(
        triton_grpc_url=triton_server.grpc_url, model_repository=Path(django_settings.ARENA_MODEL_REPOSITORY)
    )
    campaign, organization = world.campaign, world.organization
    left, right, third = world.campaign.competitors.filter(gold=False).order_by("pk")
    pool = RaterPool.objects.get(organization=organization)
    tenant = Tenant(organization, pool, campaign, left, right)
    rater, manager = User.objects.get(email=DEMO_RATER), User.objects.get(email=DEMO_MANAGER)
    pairs = [(left, right), (right, third), (third, left), (left, right), (right, third)]
    prompts = list(campaign.prompts.order_by("pk"))  # the demo's own
    for i, (a, b) in enumerate(pairs):
        battle_plant(tenant, left=a, right=b, better="left", index=i, prompt=prompts[i], vote="left", rater=rater)
    gold_left, gold_right = gold_competitors(campaign=campaign)
    vote_at(tenant, rater=rater, left=gold_left, right=gold_right, at=timezone.now(), gold_expected="left")
    leaderboards_recompute(campaign_id=campaign.pk)

    base = live_server.url
    logged_in(browser_context, base, manager)
    page = browser_context.new_page()

    # A webhook to a receiver on this machine: created in the console, pinged, received and verified.
    with receiver_running() as receiver:
        page.goto(base + reverse("admin:raters_webhookendpoint_add"))
        page.locator("#id_url").fill(receiver.url())
        page.locator("input[name=events]").first.check()
        page.get_by_role("button", name="Save", exact=True).click()
        expect(page.locator(".messagelist")).to_contain_text("Signing secret")
        endpoint = WebhookEndpoint.objects.get(organization=organization)
        receiver.secret = endpoint.secret
        page.locator("input[name=_selected_action]").first.check()
        page.locator("select[name=action]").select_option("ping")
        page.get_by_role("button", name="Go").click()
        expect(page.locator(".messagelist")).to_contain_text("Test event")
        _until(lambda: receiver.requests, "the ping")
        (ping,) = receiver.requests
        assert ping.verified, ping.refusal
        _until(
            lambda: WebhookDelivery.objects.filter(endpoint=endpoint, status=WebhookDelivery.Status.SUCCEEDED).exists(),
            "the delivery's record",
        )

    # The demo's judge: a run started in the console judges every voted battle, then says so.
    judge = Judge.objects.get(organization=organization, name=DEMO_JUDGE)
    page.goto(base + reverse("admin:battles_judgerun_add"))
    page.locator("#id_judge").select_option(str(judge.pk))
    page.locator("#id_campaign").select_option(str(campaign.pk))
    page.get_by_role("button", name="Save", exact=True).click()
    run = JudgeRun.objects.get(judge=judge, campaign=campaign)
    _until(lambda: JudgeRun.objects.get(pk=run.pk).status in ("done", "failed"), "the judge run")
    run.refresh_from_db()
    assert run.status == JudgeRun.Status.DONE, run.error
    assert (run.pairs_judged, run.pairs_refused, run.pairs_excluded_family) == (VOTED, 0, 0)
    page.goto(base + reverse("admin:battles_judgerun_change", args=[run.pk]))
    expect(page.locator(".field-status")).to_contain_text("Done")
    expect(page.locator(".field-pairs_judged")).to_contain_text(str(VOTED))

    # The counts: one number of votes on the dashboard, the board and in the API, the gold vote said apart.
    said = f"{VOTED + 1} votes, of which 1 on gold battles, not ranked"
    page.goto(base + reverse("ranking:campaign-dashboard", args=[campaign.pk]))
    expect(page.locator("#votes-count")).to_have_text(said)
    expect(page.locator("#cadence-stale")).to_be_visible()  # it has votes: 3 pairs are under 50 a week
    page.goto(base + reverse("ranking:leaderboard", args=[campaign.pk]))
    expect(page.locator("#votes-count")).to_have_text(f"The log holds {said} now.")
    assert re.search(rf"from\s+\d+ of {VOTED} votes", page.locator("main").inner_text())
    counts = page.request.get(base + reverse("api:campaign", args=[campaign.pk])).json()["counts"]
    assert counts == {"competitors": 3, "prompts": 30, "votes": VOTED + 1, "gold_votes": 1}
    listed = page.request.get(base + reverse("api:competitors", args=[campaign.pk])).json()["results"]
    assert len(listed) == counts["competitors"]

    # The export: the vote log as CSV, every vote of the log in it.
    exported = page.request.get(base + reverse("api:votes", kwargs={"campaign_id": campaign.pk, "kind": "csv"}))
    assert exported.status == 200 and exported.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(exported.text())))
    assert len(rows) == counts["votes"]
