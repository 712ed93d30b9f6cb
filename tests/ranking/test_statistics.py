"""Campaign statistics and the pairwise table, checked against numbers worked out by hand on a small
vote log built here row by row."""

from __future__ import annotations

import uuid
from datetime import UTC, date, datetime

import pytest

from battles.models import Battle, Campaign, Prompt, Vote
from ranking.selectors import campaign_statistics, snapshot_latest, snapshot_pairwise
from ranking.services import leaderboards_recompute
from tests.factories import CompetitorFactory, ModelEndpointFactory

pytestmark = pytest.mark.django_db

DAY1, DAY2, DAY3 = (datetime(2026, 11, d, 12, 0, tzinfo=UTC) for d in (2, 3, 4))


def vote_write(
    campaign, pool, rater, prompt, left, right, choice, when, lt, ll, lf, rt, rl, rf, *, ms=5000, leak=False
):  # type: ignore[no-untyped-def]
    battle = Battle.objects.create(
        id=uuid.uuid4(),
        organization_id=campaign.organization_id,
        campaign=campaign,
        rater=rater,
        pool=pool,
        prompt=prompt,
        left=left,
        right=right,
        status=Battle.Status.VOTED,
        params={},
        ready_at=when,
        shown_at=when,
        voted_at=when,
    )
    style = {"tokens": 1, "headers": 0, "list_items": 0, "bold": 0, "code_blocks": 0}
    return Vote.objects.create(
        organization_id=campaign.organization_id,
        campaign=campaign,
        battle=battle,
        created_at=when,
        rater=rater,
        pool=pool,
        prompt=prompt,
        prompt_hash=prompt.text_hash,
        category=prompt.category,
        language="en",
        prompt_source="pool",
        left=left,
        right=right,
        left_model=left.endpoint.name,
        left_version=left.version_label,
        left_tokens=lt,
        left_finish_reason=lf,
        left_latency_s=ll,
        right_model=right.endpoint.name,
        right_version=right.version_label,
        right_tokens=rt,
        right_finish_reason=rf,
        right_latency_s=rl,
        params={},
        choice=choice,
        decision_ms=ms,
        left_style=style,
        right_style=style,
        prompt_asks_identity=leak,
        answer_names_model=False,
    )


@pytest.fixture
def log(acme, bob):  # type: ignore[no-untyped-def]
    """Five votes over three days between A, B and C (C retired); vote 4 is too fast, vote 5 leaks
    identity. One more battle of A against C was shown but never voted (voided)."""
    campaign = acme.campaign
    Campaign.objects.filter(pk=campaign.pk).update(min_decision_ms=1000, exclude_identity_leaks=True)
    campaign.refresh_from_db()
    a, b = acme.left, acme.right
    c = CompetitorFactory.create(
        campaign=campaign, endpoint=ModelEndpointFactory(organization=acme.organization, name="gamma"), active=False
    )
    prompts = list(Prompt.objects.filter(campaign=campaign))
    w = (campaign, acme.pool, bob)
    vote_write(*w, prompts[0], a, b, "left", DAY1, 10, 1.0, "stop", 20, 2.0, "stop")
    vote_write(*w, prompts[1], a, c, "tie", DAY1, 30, 3.0, "length", 40, 1.0, "stop")
    vote_write(*w, prompts[2], b, a, "right", DAY2, 50, 0.5, "error", 20, 2.0, "stop")
    vote_write(*w, prompts[3], c, b, "both_bad", DAY2, 60, 4.0, "stop", 10, 1.0, "stop", ms=100)
    vote_write(*w, prompts[4], a, b, "left", DAY3, 40, 1.0, "stop", 30, 3.0, "length", leak=True)
    Battle.objects.create(
        organization_id=campaign.organization_id,
        campaign=campaign,
        prompt=prompts[5],
        left=a,
        right=c,
        status=Battle.Status.VOID,
        shown_at=DAY2,
    )
    return campaign, a, b, c


def test_statistics_match_the_hand_computed_numbers(log):
    campaign, a, b, c = log
    stats = campaign_statistics(campaign=campaign)
    assert stats["votes"] == 5
    assert stats["votes_per_day"] == [
        {"day": date(2026, 11, 2), "votes": 2},
        {"day": date(2026, 11, 3), "votes": 2},
        {"day": date(2026, 11, 4), "votes": 1},
    ]
    excluded = stats["excluded"]
    assert (excluded["too_fast"], excluded["identity_leak"], excluded["total"]) == (1, 1, 2)
    assert excluded["over_prompt_cap"] == excluded["over_rater_cap"] == excluded["flagged_rater"] == 0
    # left tokens 10 30 50 60 40; right 20 40 20 10 30 (percentiles interpolate between ranks).
    assert stats["tokens_by_side"]["left"] == {"count": 5, "mean": 38.0, "p50": 40.0, "p95": 58.0}
    assert stats["tokens_by_side"]["right"] == {"count": 5, "mean": 24.0, "p50": 20.0, "p95": 38.0}
    # Serving seconds per vote: 3.0, 4.0, 2.5, 5.0, 4.0.
    assert stats["answer_wall_seconds"] == {"total": 18.5, "mean_per_vote": 3.7}
    by_id = {row["competitor_id"]: row for row in stats["competitors"]}
    ra, rb, rc = by_id[a.pk], by_id[b.pk], by_id[c.pk]
    assert ra["tokens"] == {"count": 4, "mean": 25.0, "p50": 25.0, "p95": 38.5}
    assert ra["latency_s"] == {"count": 4, "mean": 1.75, "p50": 1.5, "p95": 2.85}
    assert rc["latency_s"] == {"count": 2, "mean": 2.5, "p50": 2.5, "p95": 3.85}
    assert rb["tokens"] == {"count": 4, "mean": 27.5, "p50": 25.0, "p95": 47.0}
    assert ra["finish_reasons"] == {"length": {"count": 1, "share": 0.25}, "stop": {"count": 3, "share": 0.75}}
    assert rb["finish_reasons"]["error"] == {"count": 1, "share": 0.25}
    assert (ra["battles_voted"], rb["battles_voted"], rc["battles_voted"]) == (4, 4, 2)
    assert (ra["vote_share"], rb["vote_share"], rc["vote_share"]) == (0.4, 0.4, 0.2)
    # The voided battle was shown: served counts it, voted does not.
    assert (ra["battles_served"], rb["battles_served"], rc["battles_served"]) == (5, 4, 3)
    assert rc["retired"] and not ra["retired"]


def test_statistics_window(log):
    campaign, a, _, _ = log
    stats = campaign_statistics(campaign=campaign, since=DAY2.replace(hour=0), until=DAY3.replace(hour=0))
    assert stats["votes"] == 2 and [d["votes"] for d in stats["votes_per_day"]] == [2]
    assert stats["excluded"]["too_fast"] == 1 and stats["excluded"]["total"] == 1
    assert stats["answer_wall_seconds"] == {"total": 7.5, "mean_per_vote": 3.75}
    by_id = {row["competitor_id"]: row for row in stats["competitors"]}
    assert by_id[a.pk]["tokens"] == {"count": 1, "mean": 20.0, "p50": 20.0, "p95": 20.0}
    assert by_id[a.pk]["battles_served"] == 2  # vote 3 and the voided battle, both shown on day 2


def test_pairwise_counts_from_the_snapshots_votes(log, acme, bob):
    campaign, a, b, c = log
    Campaign.objects.filter(pk=campaign.pk).update(ranking_min_votes=1, ranking_bootstrap_rounds=10)
    leaderboards_recompute(campaign_id=campaign.pk)
    snapshot = snapshot_latest(campaign=campaign)
    assert snapshot is not None and snapshot.votes_used == 3
    table = snapshot_pairwise(snapshot=snapshot)
    assert table["votes_used"] == 3
    pairs = {(p["competitor_id"], p["opponent_id"]): p for p in table["pairs"]}
    # Kept: votes 1 (A beats B), 2 (A ties C), 3 (A beats B). Vote 4 too fast, vote 5 a leak.
    assert set(pairs) == {(a.pk, b.pk), (b.pk, a.pk), (a.pk, c.pk), (c.pk, a.pk)}
    ab = pairs[(a.pk, b.pk)]
    assert (ab["battles"], ab["wins"], ab["ties"], ab["both_bad"], ab["losses"]) == (2, 2, 0, 0, 0)
    assert ab["win_rate"] == 1.0 and ab["wilson_upper"] == 1.0
    assert ab["wilson_lower"] == pytest.approx(0.3424, abs=1e-4)  # Wilson 2 of 2, z = 1.96
    assert ab["p_value"] == 0.5  # exact binomial, 2 of 2: 2 * 0.5^2
    ba = pairs[(b.pk, a.pk)]
    assert (ba["wins"], ba["losses"], ba["win_rate"]) == (0, 2, 0.0)
    ac = pairs[(a.pk, c.pk)]
    assert (ac["battles"], ac["ties"], ac["win_rate"], ac["p_value"]) == (1, 1, 0.5, None)
    # A vote after the snapshot does not change its table.
    prompt = Prompt.objects.filter(campaign=campaign)[6]
    vote_write(campaign, acme.pool, bob, prompt, b, c, "left", DAY3, 1, 1.0, "stop", 1, 1.0, "stop")
    assert snapshot_pairwise(snapshot=snapshot)["pairs"] == table["pairs"]


def test_statistics_api(log, acme, globex, alice, charlie):
    from django.test import Client
    from django.urls import reverse

    from raters.services import api_key_create

    campaign, a, _, _ = log
    _, key = api_key_create(organization=acme.organization, name="read", scope="read", actor=alice)
    reader = Client(HTTP_AUTHORIZATION=f"Api-Key {key}")
    url = reverse("api-statistics", args=[campaign.pk])
    body = reader.get(url).json()
    assert body["votes"] == 5 and body["votes_per_day"][0] == {"day": "2026-11-02", "votes": 2}
    assert body["answer_wall_seconds"] == {"total": 18.5, "mean_per_vote": 3.7}
    assert body["excluded"]["total"] == 2 and body["tokens_by_side"]["left"]["p95"] == 58.0
    row = next(r for r in body["competitors"] if r["competitor_id"] == a.pk)
    assert row["latency_s"]["p95"] == 2.85 and row["finish_reasons"]["stop"] == {"count": 3, "share": 0.75}
    window = reader.get(url, {"since": "2026-11-03T00:00:00Z", "until": "2026-11-04T00:00:00Z"}).json()
    assert window["votes"] == 2 and window["since"].startswith("2026-11-03")
    bad = reader.get(url, {"since": "2026-11-04T00:00:00Z", "until": "2026-11-03T00:00:00Z"})
    assert bad.status_code == 400
    assert reader.get(url, {"since": "yesterday"}).status_code == 400
    _, theirs = api_key_create(organization=globex.organization, name="theirs", scope="read", actor=charlie)
    assert Client(HTTP_AUTHORIZATION=f"Api-Key {theirs}").get(url).status_code == 404
