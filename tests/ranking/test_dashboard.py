"""The managers' dashboard: its aggregates (votes and raters per day, pair coverage, decision times, per-rater
reports, the cadence check) on votes written at controlled times, the page and its CSV for managers only,
the cadence note on the leaderboard, the API routes, and the SVG charts."""

from __future__ import annotations

import csv
import io
import re
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.urls import reverse

from battles.models import Campaign, Prompt
from ranking import charts
from ranking.quality import quality_report
from ranking.selectors import (
    active_raters_per_day,
    cadence,
    dashboard_counts,
    decision_time_histogram,
    log_cache,
    pair_coverage,
    rater_reports,
    vote_arrays,
    vote_items,
    votes_per_day,
)
from ranking.selectors import raters as rater_selectors
from raters.models import RaterFlag, Role
from tests.conftest import Tenant, api_client, login
from tests.factories import CompetitorFactory, MembershipFactory, ModelEndpointFactory, UserFactory

from .synth import third, vote_at, votes_write

pytestmark = pytest.mark.django_db

NOW = datetime.now(UTC).replace(microsecond=0)


@pytest.fixture(autouse=True)
def _now() -> None:
    """NOW is the test's own start, not the module's import: the API and the page count windows back
    from the real clock, and in a long run a test starts minutes after collection (the cadence's 7-day
    window then lost the votes placed 5 minutes inside it)."""
    global NOW
    NOW = datetime.now(UTC).replace(microsecond=0)


# --- Aggregates ----------------------------------------------------------------------------------------


def test_votes_and_active_raters_per_day_are_counted_by_utc_day(acme: Tenant, bob: User) -> None:
    carol = UserFactory.create()
    day1 = datetime(2026, 11, 2, 23, 30, tzinfo=UTC)
    day2 = datetime(2026, 11, 3, 0, 30, tzinfo=UTC)  # an hour later, the next UTC day
    for at, rater in [(day1, bob), (day1 + timedelta(minutes=5), bob), (day1, carol), (day2, carol)]:
        vote_at(acme, rater=rater, left=acme.left, right=acme.right, at=at)
    assert [(str(d), n) for d, n in votes_per_day(campaign=acme.campaign)] == [("2026-11-02", 3), ("2026-11-03", 1)]
    assert [(str(d), n) for d, n in active_raters_per_day(campaign=acme.campaign)] == [
        ("2026-11-02", 2),
        ("2026-11-03", 1),
    ]


def test_pair_coverage_counts_unordered_pairs_and_leaves_gold_out(acme: Tenant, bob: User) -> None:
    c = third(acme)
    a, b = acme.left, acme.right
    for left, right in [(a, b), (b, a), (b, a), (a, c)]:
        vote_at(acme, rater=bob, left=left, right=right, at=NOW)
    vote_at(acme, rater=bob, left=a, right=b, at=NOW, gold_expected="left")
    lo, hi = sorted((a.pk, b.pk))
    assert pair_coverage(campaign=acme.campaign) == {(lo, hi): 3, tuple(sorted((a.pk, c.pk))): 1}


def test_decision_time_histogram_bins(acme: Tenant, bob: User) -> None:
    for ms in (400, 999, 1000, 4999, 5000, 299_999, 300_000, 900_000):
        vote_at(acme, rater=bob, left=acme.left, right=acme.right, at=NOW, decision_ms=ms)
    bins = {(lo, hi): n for lo, hi, n in decision_time_histogram(campaign=acme.campaign)}
    assert bins[(0.0, 1.0)] == 2  # 400, 999
    assert bins[(1.0, 2.0)] == 1  # 1000
    assert bins[(3.0, 5.0)] == 1  # 4999
    assert bins[(5.0, 8.0)] == 1  # 5000
    assert bins[(120.0, 300.0)] == 1  # 299,999
    assert bins[(300.0, None)] == 2  # 300,000 and 900,000: the open last bin
    assert sum(bins.values()) == 8


def test_rater_report_pace_median_and_gold(acme: Tenant, bob: User) -> None:
    t0 = NOW - timedelta(days=1)
    # One session of three votes a minute apart, then (after a two-hour pause) a second session of one
    # gold vote, then two gold votes 30 s apart. Active: 10 + 60 + 60 (first session), 20 + 30 + 30.
    vote_at(acme, rater=bob, left=acme.left, right=acme.right, at=t0, decision_ms=10_000)
    vote_at(acme, rater=bob, left=acme.left, right=acme.right, at=t0 + timedelta(seconds=60), decision_ms=10_000)
    vote_at(acme, rater=bob, left=acme.left, right=acme.right, at=t0 + timedelta(seconds=120), decision_ms=12_000)
    t1 = t0 + timedelta(hours=2)
    vote_at(acme, rater=bob, left=acme.left, right=acme.right, at=t1, decision_ms=20_000, gold_expected="left")
    vote_at(
        acme, rater=bob, left=acme.left, right=acme.right, at=t1 + timedelta(seconds=30),
        decision_ms=14_000, choice="right", gold_expected="left",
    )  # fmt: skip
    vote_at(
        acme, rater=bob, left=acme.left, right=acme.right, at=t1 + timedelta(seconds=60),
        decision_ms=16_000, choice="right", gold_expected="right",
    )  # fmt: skip
    RaterFlag.objects.create(organization=acme.organization, rater=bob, reason="too fast")
    [report] = rater_reports(campaign=acme.campaign)
    assert report.rater_id == bob.pk and report.name == bob.email
    assert report.battles == 6
    assert report.median_decision_s == pytest.approx(13.0)  # median of 10, 10, 12, 14, 16, 20
    active_s = 10 + 60 + 60 + 20 + 30 + 30
    assert report.active_hours == pytest.approx(active_s / 3600, abs=1e-4)
    assert report.battles_per_hour == pytest.approx(6 / (active_s / 3600), rel=1e-3)
    assert (report.gold_answered, report.gold_correct) == (3, 2)
    assert report.gold_accuracy == pytest.approx(2 / 3)
    assert report.gold_lower is not None and report.gold_upper is not None
    # Wilson 95% for 2 of 3 (textbook: 0.2077 to 0.9385).
    assert (report.gold_lower, report.gold_upper) == (pytest.approx(0.2077, abs=1e-3), pytest.approx(0.9385, abs=1e-3))
    assert report.first_vote_at == t0 and report.last_vote_at == t1 + timedelta(seconds=60)
    assert report.flagged and report.flag_reason == "too fast"
    assert report.agreement is None and report.agreement_items == 0  # nobody else voted


def test_rater_agreement_in_sql_equals_the_quality_report(acme: Tenant, bob: User) -> None:
    c = third(acme)
    raters = [bob] + [UserFactory.create() for _ in range(4)]
    prompts = list(Prompt.objects.filter(campaign=acme.campaign))[:3]
    votes_write(
        campaign=acme.campaign, pool=acme.pool, raters=raters, prompts=prompts,
        competitors=[acme.left, acme.right, c], strengths=(5.0, 2.0, 1.0), n=300, seed=4, tie_rate=0.15,
        shared=True,
    )  # fmt: skip
    lone = UserFactory.create()  # a rater whose only item nobody else judged
    other = Prompt.objects.filter(campaign=acme.campaign).exclude(pk__in=[p.pk for p in prompts]).first()
    vote_at(acme, rater=lone, left=acme.left, right=acme.right, at=NOW, prompt=other)
    arrays = vote_arrays(campaign_id=acme.campaign.pk)
    expected = quality_report(
        vote_id=arrays.vote_id, rater=arrays.rater,
        item=vote_items(campaign_id=acme.campaign.pk, vote_id=arrays.vote_id), left=arrays.left,
        right=arrays.right, outcome=arrays.outcome, bootstrap=0,
    )  # fmt: skip
    by_rater = {row["rater_id"]: row for row in expected["raters"]}
    reports = rater_reports(campaign=acme.campaign)
    assert len(reports) == 6
    for report in reports:
        row = by_rater[report.rater_id]
        assert report.agreement_pairs == row["pairs"]
        assert report.agreement_items == row["shared_items"]
        if row["agreement"] is None:
            assert report.agreement is None
        else:
            assert report.agreement == pytest.approx(row["agreement"])
    assert next(r for r in reports if r.rater_id == lone.pk).agreement is None


def test_the_dashboards_counts_in_one_read_equal_the_separate_selectors(acme: Tenant, bob: User) -> None:
    """``dashboard_counts`` (one packed read on PostgreSQL) gives what the four selectors give: votes and raters
    per UTC day (a vote a microsecond before midnight and one at midnight fall on two days), the histogram (a
    decision exactly on an edge goes up), pairs whatever the sides (gold left out) and the votes, gold apart."""
    empty = dashboard_counts(campaign=acme.campaign)
    assert (empty.votes, empty.gold, empty.votes_per_day, empty.coverage) == (0, 0, [], {})
    assert [n for _, _, n in empty.histogram] == [0] * len(empty.histogram)
    carol = UserFactory.create()
    c = third(acme)
    midnight = datetime(2026, 11, 3, tzinfo=UTC)
    vote_at(acme, rater=bob, left=acme.left, right=acme.right, at=midnight - timedelta(microseconds=1))
    vote_at(acme, rater=bob, left=acme.right, right=acme.left, at=midnight, decision_ms=2_000)
    vote_at(acme, rater=carol, left=c, right=acme.left, at=midnight + timedelta(hours=5), decision_ms=999)
    vote_at(acme, rater=carol, left=acme.left, right=c, at=midnight, decision_ms=300_000, gold_expected="left")
    counts = dashboard_counts(campaign=acme.campaign)
    day1, day2 = midnight.date() - timedelta(days=1), midnight.date()
    assert counts.votes_per_day == votes_per_day(campaign=acme.campaign) == [(day1, 1), (day2, 3)]
    assert counts.raters_per_day == active_raters_per_day(campaign=acme.campaign) == [(day1, 1), (day2, 2)]
    assert counts.histogram == decision_time_histogram(campaign=acme.campaign)
    assert {lo: n for lo, _, n in counts.histogram if n} == {0.0: 1, 2.0: 1, 5.0: 1, 300.0: 1}
    low, high = sorted([acme.left.pk, acme.right.pk])
    assert counts.coverage == pair_coverage(campaign=acme.campaign)
    assert counts.coverage[(low, high)] == 2 and sum(counts.coverage.values()) == 3
    assert (counts.votes, counts.gold) == (4, 1)


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the packed read is PostgreSQL's")
def test_the_packed_rater_figures_equal_the_sql_definitions(acme: Tenant, bob: User) -> None:
    """The per-rater figures from one packed read grouped in numpy (what the dashboard computes on PostgreSQL)
    are exactly those of the SQL aggregates that define them, on a log with their edge cases: votes at the same
    instant (ordered by id), a gap of exactly the session limit (counted) and one a microsecond over (not),
    odd and even counts for the median, gold votes (counted in pace, left out of agreement), copies of a shared
    item with the sides swapped (one verdict), a copy of a battle that has no key of its own (its id is the
    item) and items nobody shares."""
    assert rater_selectors.rater_figures_of_arrays(rater_selectors._rater_log_packed(acme.campaign.pk)) == ({}, {}, {})
    carol, dan = UserFactory.create(), UserFactory.create()
    c = third(acme)
    t0 = NOW - timedelta(days=2, microseconds=333)
    limit = timedelta(seconds=rater_selectors.SESSION_GAP_S)
    u1, u2 = uuid.uuid4(), uuid.uuid4()

    def vote(rater: User, at: datetime, **kw: Any) -> None:
        vote_at(acme, rater=rater, left=kw.pop("left", acme.left), right=kw.pop("right", acme.right), at=at, **kw)

    vote(bob, t0, decision_ms=7_001, item_key=u1)
    vote(bob, t0, decision_ms=3_001, choice="right")  # the same instant
    vote(bob, t0 + limit, decision_ms=9_999, gold_expected="left")
    vote(bob, t0 + 2 * limit + timedelta(microseconds=1), decision_ms=1, item_key=u2, choice="tie")
    vote(carol, t0 + timedelta(microseconds=17), decision_ms=4_000, item_key=u1, left=acme.right, right=acme.left,
         choice="right")  # fmt: skip
    vote(carol, t0 + timedelta(minutes=3), decision_ms=5_500, item_key=u2, left=c, right=acme.left, choice="tie")
    original = vote_at(acme, rater=carol, left=c, right=acme.right, at=t0 + timedelta(minutes=4), decision_ms=900,
                       choice="both_bad")  # fmt: skip
    # dan's copy of carol's battle: its item_key is that battle's id (the original has no key of its own).
    vote(dan, t0 + timedelta(hours=2), decision_ms=5_000, left=c, right=acme.right, choice="both_bad",
         item_key=original.battle_id)  # fmt: skip
    vote(carol, t0 + timedelta(minutes=5), decision_ms=12_345, item_key=uuid.uuid4())  # an item nobody shares
    vote(dan, t0 + timedelta(hours=1), decision_ms=2_000, gold_expected="right", choice="right")
    vote(dan, t0 + timedelta(hours=1, seconds=10), decision_ms=2_500, gold_expected="left")
    packed = rater_selectors.rater_figures_of_arrays(rater_selectors._rater_log_packed(acme.campaign.pk))
    assert packed == rater_selectors._rater_figures_sql(acme.campaign)
    log = rater_selectors._rater_log_packed(acme.campaign.pk)
    assert rater_selectors.log_mark_of(log) == log_cache._log_mark(acme.campaign.pk)
    activity, medians, agreement = packed
    # bob: 7.001 s (a session's first), 0 (same instant), the exact limit, then a new session's 0.001 s.
    assert activity[bob.pk][:2] == (4, 7.001 + 0 + rater_selectors.SESSION_GAP_S + 0.001)
    assert medians == {bob.pk: 5.001, carol.pk: 4.75, dan.pk: 2.5}
    # u1: bob's left-wins and carol's swapped right-wins agree; u2: bob's tie and carol's tie agree.
    assert agreement == {bob.pk: (2, 2, 2), carol.pk: (3, 3, 3), dan.pk: (1, 1, 1)}


def test_rater_reports_for_some_raters_only(acme: Tenant, bob: User) -> None:
    carol = UserFactory.create()
    vote_at(acme, rater=bob, left=acme.left, right=acme.right, at=NOW)
    vote_at(acme, rater=carol, left=acme.left, right=acme.right, at=NOW)
    assert [r.rater_id for r in rater_reports(campaign=acme.campaign, rater_ids=[carol.pk])] == [carol.pk]
    assert rater_reports(campaign=acme.campaign, rater_ids=[]) == []


# --- The cadence check ----------------------------------------------------------------------------------


@pytest.fixture
def paced(acme: Tenant, bob: User) -> dict[str, Any]:
    """Three active competitors and a retired one. Last 7 days: a-b 50 votes (at the threshold), a-c 49
    (one short; it also has 100 older ones, which do not count), b-c none; the retired d fought a often."""
    a, b = acme.left, acme.right
    c = third(acme, "c")
    d = third(acme, "d", active=False)
    recent = NOW - timedelta(days=7) + timedelta(minutes=5)
    for i in range(50):
        vote_at(acme, rater=bob, left=a, right=b, at=recent + timedelta(seconds=i))
    for i in range(49):
        vote_at(acme, rater=bob, left=c, right=a, at=NOW - timedelta(hours=1, seconds=i))
    for i in range(100):
        vote_at(acme, rater=bob, left=a, right=c, at=NOW - timedelta(days=7, minutes=5 + i))
    for _ in range(5):
        vote_at(acme, rater=bob, left=a, right=d, at=NOW)
    vote_at(acme, rater=bob, left=b, right=c, at=NOW, gold_expected="left")  # gold: not a vote on the pair
    return {"a": a, "b": b, "c": c, "d": d}


def test_cadence_flags_pairs_under_the_threshold(acme: Tenant, paced: dict[str, Any]) -> None:
    a, b, c = paced["a"], paced["b"], paced["c"]
    found = cadence(campaign=acme.campaign, now=NOW)
    assert found.threshold == 50 and found.window_days == 7
    assert found.active_competitors == 3 and found.pairs == 3
    assert [(p.a, p.b, p.votes) for p in found.stale] == [
        (min(b.pk, c.pk), max(b.pk, c.pk), 0),
        (min(a.pk, c.pk), max(a.pk, c.pk), 49),
    ]
    # The campaign's setting moves the line.
    acme.campaign.cadence_threshold = 49
    acme.campaign.save()
    assert [p.votes for p in cadence(campaign=acme.campaign, now=NOW).stale] == [0]
    # Ten minutes later the a-b votes from 7 days and 5 minutes ago are out of the window.
    acme.campaign.cadence_threshold = 50
    later = cadence(campaign=acme.campaign, now=NOW + timedelta(minutes=10))
    assert sorted(p.votes for p in later.stale) == [0, 0, 49]


def test_cadence_api_and_outsiders(acme: Tenant, globex: Tenant, paced: dict[str, Any], bob_client: Client) -> None:
    url = reverse("api-cadence", args=[acme.campaign.pk])
    body = api_client(acme.organization).get(url).json()
    assert body["campaign_id"] == acme.campaign.pk and body["stale"] is True
    assert body["stale_pairs"] == 2 and body["pairs"] == 3 and body["threshold"] == 50
    assert [p["votes"] for p in body["pairs_under_threshold"]] == [0, 49]
    assert set(body["pairs_under_threshold"][0]) == {"competitor_a", "competitor_b", "label_a", "label_b", "votes"}
    outsider = api_client(globex.organization).get(url)
    assert outsider.status_code == 404 and outsider.json()["error"]["code"] == "not_found"
    assert bob_client.get(url).status_code == 404  # a rater reads no statistics


def test_the_leaderboard_tells_managers_the_board_may_be_stale(
    acme: Tenant, paced: dict[str, Any], alice_client: Client
) -> None:
    url = reverse("ranking:leaderboard", args=[acme.campaign.pk])
    Campaign.objects.filter(pk=acme.campaign.pk).update(status=Campaign.Status.OPEN)
    page = alice_client.get(url).content.decode()
    assert 'id="cadence-note"' in page
    assert "The board may be stale: 2 pairs" in page and "under 50 votes in 7 days" in page
    viewer = UserFactory.create()
    MembershipFactory.create(user=viewer, organization=acme.organization, role=Role.VIEWER)
    seen = login(viewer).get(url)
    assert seen.status_code == 200 and b"cadence-note" not in seen.content  # viewers read the board only
    Campaign.objects.filter(pk=acme.campaign.pk).update(status=Campaign.Status.CLOSED)
    assert b"cadence-note" not in alice_client.get(url).content  # a closed campaign gets no new votes anyway


def test_no_note_when_every_pair_is_current(acme: Tenant, bob: User, alice_client: Client) -> None:
    Campaign.objects.filter(pk=acme.campaign.pk).update(status=Campaign.Status.OPEN, cadence_threshold=3)
    for i in range(3):
        vote_at(acme, rater=bob, left=acme.left, right=acme.right, at=NOW - timedelta(minutes=i))
    assert cadence(campaign=Campaign.objects.get(pk=acme.campaign.pk)).stale == []
    assert b"cadence-note" not in alice_client.get(reverse("ranking:leaderboard", args=[acme.campaign.pk])).content


# --- The dashboard page and its CSV ---------------------------------------------------------------------


@pytest.fixture
def busy(acme: Tenant, bob: User) -> Tenant:
    carol = UserFactory.create(email="carol@acme.test")
    MembershipFactory.create(user=carol, organization=acme.organization, role=Role.RATER)
    acme.pool.members.add(carol)
    item: Any = None
    for day in range(3):
        for i in range(4):
            rater = bob if i % 2 else carol
            # Carol's vote and the next one of bob's are two copies of one shared item.
            vote = vote_at(
                acme,
                rater=rater,
                left=acme.left,
                right=acme.right,
                at=NOW - timedelta(days=day, minutes=i),
                item_key=item if i % 2 else None,
            )
            item = vote.battle_id
    vote_at(acme, rater=bob, left=acme.left, right=acme.right, at=NOW, gold_expected="left")
    RaterFlag.objects.create(organization=acme.organization, rater=carol, reason='=HYPERLINK("x")')
    return acme


def test_the_dashboard_shows_every_chart_to_a_manager(busy: Tenant, alice_client: Client) -> None:
    Campaign.objects.filter(pk=busy.campaign.pk).update(min_decision_ms=1500)
    response = alice_client.get(reverse("ranking:campaign-dashboard", args=[busy.campaign.pk]))
    assert response.status_code == 200
    page = response.content.decode()
    for chart in ("chart-votes", "chart-raters", "chart-coverage", "chart-decisions", "chart-quality"):
        assert f'id="{chart}" role="img"' in page
        assert f'aria-labelledby="{chart}-title {chart}-desc"' in page
    assert "<script" not in page.split('id="content-main"')[1]  # the charts need no script
    assert page.count('class="bar"') >= 3 + 2  # three days of votes, and of raters, at least
    assert 'id="rater-report"' in page and "carol@acme.test" in page and "bob@acme.test" in page
    assert 'id="rater-flags"' in page and "=HYPERLINK" in page
    assert 'id="cadence-stale"' in page  # 13 votes in 7 days, under 50
    assert reverse("ranking:campaign-raters-csv", args=[busy.campaign.pk]) in page
    assert "minimum 1.5 s" in page  # the exclusion threshold drawn on the decision-time histogram


def test_board_dashboard_and_api_count_the_same_votes_gold_said_apart(busy: Tenant, alice_client: Client) -> None:
    from ranking.services import leaderboards_recompute

    leaderboards_recompute(campaign_id=busy.campaign.pk)
    said = "13 votes, of which 1 on gold battles, not ranked"  # 12 votes on pairs and 1 gold
    dashboard = alice_client.get(reverse("ranking:campaign-dashboard", args=[busy.campaign.pk])).content.decode()
    assert re.search(r'<span id="votes-count">([^<]*)</span>', dashboard).group(1) == said  # type: ignore[union-attr]
    board = alice_client.get(reverse("ranking:leaderboard", args=[busy.campaign.pk])).content.decode()
    assert f"The log holds {said} now." in board and "of 12 votes" in board
    counts = alice_client.get(reverse("api:campaign", args=[busy.campaign.pk])).json()["counts"]
    assert (counts["votes"], counts["gold_votes"]) == (13, 1)


def test_a_new_campaign_has_no_votes_yet_not_a_stale_board(acme: Tenant, alice_client: Client) -> None:
    Campaign.objects.filter(pk=acme.campaign.pk).update(status=Campaign.Status.OPEN)
    dashboard = alice_client.get(reverse("ranking:campaign-dashboard", args=[acme.campaign.pk])).content.decode()
    assert 'id="cadence-none"' in dashboard and "cadence-stale" not in dashboard and "may be stale" not in dashboard
    assert '<span id="votes-count">no votes yet</span>' in dashboard
    board = alice_client.get(reverse("ranking:leaderboard", args=[acme.campaign.pk])).content.decode()
    assert "cadence-note" not in board and "may be stale" not in board


def test_the_campaign_console_page_links_to_the_dashboard(busy: Tenant, alice_client: Client) -> None:
    page = alice_client.get(reverse("admin:battles_campaign_change", args=[busy.campaign.pk])).content.decode()
    assert reverse("ranking:campaign-dashboard", args=[busy.campaign.pk]) in page


def test_only_the_campaigns_managers_see_the_dashboard(
    busy: Tenant, globex: Tenant, bob_client: Client, charlie_client: Client
) -> None:
    viewer = UserFactory.create()
    MembershipFactory.create(user=viewer, organization=busy.organization, role=Role.VIEWER)
    for name in ("ranking:campaign-dashboard", "ranking:campaign-raters-csv"):
        url = reverse(name, args=[busy.campaign.pk])
        for client in (charlie_client, bob_client, login(viewer)):
            response = client.get(url)
            assert response.status_code == 404 and b"Acme chat" not in response.content, (name, response.status_code)
        anonymous = Client().get(url)
        assert anonymous.status_code == 302 and reverse("account_login") in anonymous["Location"]
    # charlie manages Globex: his own campaign's dashboard opens.
    assert charlie_client.get(reverse("ranking:campaign-dashboard", args=[globex.campaign.pk])).status_code == 200


def test_the_rater_csv_has_every_rater_and_defuses_formulas(busy: Tenant, alice_client: Client, bob: User) -> None:
    response = alice_client.get(reverse("ranking:campaign-raters-csv", args=[busy.campaign.pk]))
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert len(rows) == 2
    by_email = {row["rater"]: row for row in rows}
    bob_row = by_email["bob@acme.test"]
    assert bob_row["battles"] == "7" and bob_row["gold_answered"] == "1" and bob_row["gold_correct"] == "1"
    assert by_email["carol@acme.test"]["flagged"] == "True"
    assert by_email["carol@acme.test"]["flag_reason"].startswith("'=")  # not a formula in a spreadsheet
    assert bob_row["agreement"] != ""  # bob and carol judged the same shared items


def test_the_dashboard_escapes_names(acme: Tenant, bob: User, alice_client: Client) -> None:
    endpoint = ModelEndpointFactory.create(organization=acme.organization, name="<script>alert(1)</script>")
    evil = CompetitorFactory.create(campaign=acme.campaign, endpoint=endpoint, version_label="x")
    vote_at(acme, rater=bob, left=acme.left, right=evil, at=NOW)
    page = alice_client.get(reverse("ranking:campaign-dashboard", args=[acme.campaign.pk])).content.decode()
    assert "<script>alert(1)" not in page and "&lt;script&gt;alert(1)" in page


def test_an_empty_campaign_has_a_dashboard(acme: Tenant, alice_client: Client) -> None:
    page = alice_client.get(reverse("ranking:campaign-dashboard", args=[acme.campaign.pk])).content.decode()
    assert "No votes yet." in page and 'id="no-flags"' in page


# --- The API's rater reports ----------------------------------------------------------------------------


def test_rater_reports_api_pages_by_rater(busy: Tenant, globex: Tenant, bob: User, bob_client: Client) -> None:
    extra = [UserFactory.create() for _ in range(3)]
    for user in extra:
        vote_at(busy, rater=user, left=busy.left, right=busy.right, at=NOW)
    client = api_client(busy.organization)
    url = reverse("api-rater-reports", args=[busy.campaign.pk])
    seen: list[int] = []
    page = client.get(url, {"limit": 2}).json()
    while True:
        assert len(page["results"]) <= 2
        seen += [row["rater_id"] for row in page["results"]]
        if not page["next"]:
            break
        page = client.get(page["next"]).json()
    assert seen == sorted(seen) and len(seen) == 5 and bob.pk in seen
    first = client.get(url).json()["results"]
    row = next(r for r in first if r["rater_id"] == bob.pk)
    assert row["battles"] == 7 and row["gold_correct"] == 1 and row["flagged"] is False
    assert "email" not in row and "name" not in row  # the API names raters by id, as the vote log does
    assert client.get(url, {"limit": 0}).status_code == 400
    outsider = api_client(globex.organization).get(url)
    assert outsider.status_code == 404 and outsider.json()["error"]["code"] == "not_found"
    assert bob_client.get(url).status_code == 404


# --- Charts ----------------------------------------------------------------------------------------


def test_nice_ceiling() -> None:
    assert [charts.nice_ceiling(v) for v in (0, 0.3, 1, 7, 11, 23, 240, 999)] == [1, 0.5, 1, 10, 20, 25, 250, 1000]


def test_bar_heights_are_proportional_and_labels_escaped() -> None:
    svg = charts.bar_chart([("<a>", 10.0), ("b", 5.0)], chart_id="c", title="T & t", unit="votes", x_label="x")
    assert "&lt;a&gt;: 10 votes" in svg and "T &amp; t" in svg and "<a>" not in svg
    heights = [float(h) for h in re.findall(r'<rect class="bar"[^>]* height="([0-9.]+)"', svg)]
    assert len(heights) == 2 and heights[0] == pytest.approx(2 * heights[1], abs=0.1)
    # The axis runs to a round number at or above the largest bar: 10 votes, the full plot height.
    assert heights[0] == pytest.approx(240 - 12 - 46)


def test_matrix_names_pairs_that_never_met() -> None:
    svg = charts.matrix_chart(["a", "b", "c"], {(0, 1): 4}, chart_id="m", title="M")
    assert "a vs b: 4 battles" in svg and "b vs a: 4 battles" in svg and "a vs c: never met" in svg
    assert "1 of 3 pairs met" in svg


def test_a_large_matrix_is_its_upper_triangle_without_labels() -> None:
    k = charts.MATRIX_DETAILED + 1
    svg = charts.matrix_chart([f"m{i}" for i in range(k)], {(0, 1): 2}, chart_id="m", title="M")
    assert svg.count('class="cell"') == k * (k - 1) // 2 and "<title>m0 vs" not in svg
