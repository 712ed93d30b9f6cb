"""Recomputing leaderboards from the vote log: snapshots, versions, policy, reproducibility, pages, API."""

from __future__ import annotations

import numpy as np
import pytest
from django.template.defaultfilters import floatformat
from django.test import Client
from django.urls import reverse

from battles.models import Campaign, Prompt, Vote
from ranking.models import LeaderboardSnapshot
from ranking.selectors import snapshot_pairwise_stored, vote_arrays
from ranking.services import leaderboards_recompute, leaderboards_schedule
from raters.models import RaterFlag, Role
from raters.services import api_key_create, api_key_revoke
from tests.conftest import login
from tests.factories import CompetitorFactory, MembershipFactory, ModelEndpointFactory, UserFactory

from .synth import votes_write

pytestmark = pytest.mark.django_db

STRENGTHS = (3.0, 1.5, 1.0, 0.5)


@pytest.fixture
def board(acme, bob):  # type: ignore[no-untyped-def]
    """Acme's campaign with four competitors of known strength, 600 votes in two categories, and a fifth
    competitor with only a handful of votes (to be hidden)."""
    campaign = acme.campaign
    competitors = [acme.left, acme.right]
    for k in range(2):
        endpoint = ModelEndpointFactory(organization=acme.organization, name=f"extra-{k}")
        competitors.append(CompetitorFactory.create(campaign=campaign, endpoint=endpoint, version_label="1"))
    prompts = list(Prompt.objects.filter(campaign=campaign))
    raters = [bob] + [UserFactory.create() for _ in range(5)]
    votes_write(
        campaign=campaign,
        pool=acme.pool,
        raters=raters,
        prompts=prompts,
        competitors=competitors,
        strengths=STRENGTHS,
        n=600,
        seed=1,
        categories=("coding", "writing"),
    )
    rare = CompetitorFactory.create(
        campaign=campaign, endpoint=ModelEndpointFactory(organization=acme.organization, name="rare"), version_label="1"
    )
    votes_write(
        campaign=campaign,
        pool=acme.pool,
        raters=raters,
        prompts=prompts,
        competitors=[rare, competitors[0]],
        strengths=(1.0, 1.0),
        n=5,
        seed=2,
        categories=("coding",),
    )
    # 20 bootstrap rounds (the campaign's least is 10, its default 100): what these tests look at is the
    # snapshots' content, versions and access, and a recompute's time is mostly its rounds (the
    # reliability view refits its crowd model in each).
    Campaign.objects.filter(pk=campaign.pk).update(ranking_min_votes=30, ranking_bootstrap_rounds=20, min_decision_ms=0)
    campaign.refresh_from_db()
    return campaign, competitors, rare


def test_vote_arrays_read_the_log_columns(board):
    campaign, competitors, _ = board
    votes = vote_arrays(campaign_id=campaign.pk)
    assert len(votes) == 605
    assert set(votes.outcome.tolist()) <= {0, 1, 2, 3}
    assert votes.categories == ("coding", "writing")
    assert votes.style_left[:, 0].min() >= 20 and (votes.style_right[:, 0] == 30).all()
    assert (votes.vote_id[1:] > votes.vote_id[:-1]).all()


def test_recompute_writes_every_snapshot_with_known_order(board):
    campaign, competitors, rare = board
    snapshots = leaderboards_recompute(campaign_id=campaign.pk)
    assert {(s.category, s.view) for s in snapshots} == {
        (c, v) for c in ("", "coding", "writing") for v in ("raw", "style", "reliability")
    }
    assert {s.version for s in snapshots} == {1}
    overall = LeaderboardSnapshot.objects.get(campaign=campaign, category="", view="raw")
    shown = [r for r in overall.rows if not r["hidden"]]
    assert [r["competitor_id"] for r in shown] == [c.pk for c in competitors]  # strongest first
    assert all(r["lower"] <= r["score"] <= r["upper"] for r in shown)
    assert shown[0]["rank_best"] == 1 and shown[-1]["rank_worst"] == 4
    hidden = [r for r in overall.rows if r["hidden"]]
    assert [r["competitor_id"] for r in hidden] == [rare.pk] and "score" not in hidden[0]
    assert overall.votes_total == 605 and overall.votes_used == 605
    assert overall.method["rounds"] == 20 and overall.method["both_bad"] == "tie"
    assert overall.extra["elo"][0]["competitor_id"] == competitors[0].pk
    # The live Elo's spread over random orders: the rare competitor's 5 votes against opponents that keep
    # moving spread it too, and every spread has its sd within its range.
    assert overall.extra["elo_order"] == {
        "permutations": 100,
        "seed": 0,
        "votes": 605,
        "replayed": 605,
        "k": 32.0,
        "base": 1000.0,
        "scale": 400.0,
        "both_bad": "tie",
    }
    for elo in overall.extra["elo"]:
        assert 0 < elo["order_sd"] <= (elo["order_max"] - elo["order_min"]) / 2 + 0.1
    assert overall.pairwise["competitor_ids"] == [c.pk for c in competitors]
    style = LeaderboardSnapshot.objects.get(campaign=campaign, category="", view="style")
    # The synthetic log never writes bold text: that feature is dropped, and says why.
    assert [c["feature"] for c in style.extra["style_coefficients"]] == ["tokens", "headers", "list_items"]
    assert style.extra["style_checks"]["dropped"][0]["feature"] == "bold"
    assert style.extra["style_checks"]["dropped"][0]["reason"].startswith("no variation")
    coding = LeaderboardSnapshot.objects.get(campaign=campaign, category="coding", view="raw")
    assert coding.votes_total == 305


def test_recompute_is_reproducible_and_versioned(board):
    campaign, _, _ = board
    first = {(s.category, s.view): s for s in leaderboards_recompute(campaign_id=campaign.pk)}
    second = {(s.category, s.view): s for s in leaderboards_recompute(campaign_id=campaign.pk)}
    assert {s.version for s in second.values()} == {2}
    for key, snapshot in first.items():
        assert snapshot.rows == second[key].rows
        assert snapshot.pairwise == second[key].pairwise
        assert bytes(snapshot.pairwise_arrays) == bytes(second[key].pairwise_arrays)


def test_policy_exclusions_are_applied_and_recorded(board, acme, bob):
    campaign, _, _ = board
    RaterFlag.objects.create(organization=acme.organization, rater=bob, reason="clicks too fast")
    overall = next(s for s in leaderboards_recompute(campaign_id=campaign.pk) if s.category == "" and s.view == "raw")
    assert overall.excluded["flagged_rater"] == 101  # bob cast every sixth vote
    assert overall.votes_used == 605 - 101
    assert overall.policy["flagged_raters"] == [bob.pk]


def test_category_boards_state_their_own_exclusions(board, acme, bob):
    """Each category board counts the excluded votes of that category, not the campaign's."""
    campaign, _, _ = board
    RaterFlag.objects.create(organization=acme.organization, rater=bob, reason="clicks too fast")
    snapshots = [s for s in leaderboards_recompute(campaign_id=campaign.pk) if s.view == "raw"]
    by_category = {s.category: s for s in snapshots}
    assert set(by_category) == {"", "coding", "writing"}
    for s in snapshots:
        assert s.votes_used == s.votes_total - s.excluded["total"], s.category
    assert (
        by_category["coding"].excluded["flagged_rater"] + by_category["writing"].excluded["flagged_rater"]
        == by_category[""].excluded["flagged_rater"]
        == 101
    )
    # Bob casts every sixth vote and categories alternate, so all of his votes fall in one category.
    assert {by_category["coding"].excluded["total"], by_category["writing"].excluded["total"]} == {0, 101}


def test_debounce_schedules_once_per_window(board, settings):
    """The first vote schedules a recompute; votes before it starts ride along; once the task starts
    (and clears the mark) the next vote schedules again. The task itself goes to the broker here; the
    real worker runs it in test_celery_worker.py."""
    from django.core.cache import cache

    from ranking.services import leaderboards_recompute_pending

    campaign, _, _ = board
    cache.delete(f"ranking:recompute-pending:{campaign.pk}")
    assert leaderboards_schedule(campaign_id=campaign.pk) is True
    assert leaderboards_schedule(campaign_id=campaign.pk) is False
    assert leaderboards_schedule(campaign_id=campaign.pk) is False
    leaderboards_recompute_pending(campaign_id=campaign.pk)
    assert LeaderboardSnapshot.objects.filter(campaign=campaign, version=1).count() == 9
    assert leaderboards_schedule(campaign_id=campaign.pk) is True
    cache.delete(f"ranking:recompute-pending:{campaign.pk}")


def test_leaderboard_page_for_managers_and_viewers_only(board, acme, alice_client, bob_client, globex, charlie_client):
    campaign, competitors, _ = board
    leaderboards_recompute(campaign_id=campaign.pk)
    html = alice_client.get(reverse("ranking:leaderboard", args=[campaign.pk])).content.decode()
    assert competitors[0].endpoint.name in html and "Hidden for too few votes" in html and "rare" in html
    assert "Pairwise win rates" in html
    style_url = reverse("ranking:leaderboard", args=[campaign.pk]) + "?view=style&category=coding"
    style_html = alice_client.get(style_url).content.decode()
    assert "Style coefficients" in style_html
    viewer = UserFactory.create()
    MembershipFactory(user=viewer, organization=acme.organization, role=Role.VIEWER)
    assert login(viewer).get(reverse("ranking:leaderboard", args=[campaign.pk])).status_code == 200
    assert bob_client.get(reverse("ranking:leaderboard", args=[campaign.pk])).status_code == 404
    assert charlie_client.get(reverse("ranking:leaderboard", args=[campaign.pk])).status_code == 404


def test_read_api_with_session_and_api_key(board, acme, alice, alice_client, globex, charlie):
    campaign, competitors, _ = board
    leaderboards_recompute(campaign_id=campaign.pk)
    leaderboards_recompute(campaign_id=campaign.pk)
    latest = alice_client.get(reverse("leaderboard", args=[campaign.pk]) + "?category=coding&view=style").json()
    assert latest["version"] == 2 and latest["category"] == "coding" and latest["view"] == "style"
    history = alice_client.get(reverse("leaderboard-history", args=[campaign.pk])).json()
    assert [h["version"] for h in history["results"]] == [2, 1]
    v1 = alice_client.get(reverse("leaderboard-version", args=[campaign.pk, 1])).json()
    assert v1["version"] == 1 and v1["rows"][0]["competitor_id"] == competitors[0].pk
    assert alice_client.get(reverse("leaderboard", args=[campaign.pk]) + "?view=sideways").status_code == 400

    _, key = api_key_create(organization=acme.organization, name="dashboards", scope="read", actor=alice)
    external = Client(HTTP_AUTHORIZATION=f"Api-Key {key}")
    assert external.get(reverse("leaderboard", args=[campaign.pk])).json()["version"] == 2
    assert external.get(reverse("api:votes", args=[campaign.pk, "jsonl"])).status_code == 200
    assert external.get(reverse("leaderboard", args=[globex.campaign.pk])).status_code == 404

    _, other_key = api_key_create(organization=globex.organization, name="theirs", scope="read", actor=charlie)
    outsider = Client(HTTP_AUTHORIZATION=f"Api-Key {other_key}")
    assert outsider.get(reverse("leaderboard", args=[campaign.pk])).status_code == 404
    assert (
        Client(HTTP_AUTHORIZATION="Api-Key arena_nope_nope").get(reverse("leaderboard", args=[campaign.pk])).status_code
        == 401
    )

    from raters.models import ApiKey

    api_key_revoke(api_key=ApiKey.objects.get(name="dashboards"), actor=alice)
    assert external.get(reverse("leaderboard", args=[campaign.pk])).status_code == 401


def test_campaign_list_links_leaderboards_for_managers_not_raters(board, alice_client, bob_client):
    campaign, _, _ = board
    board_url, home = reverse("ranking:leaderboard", args=[campaign.pk]), reverse("battles:campaigns")
    assert board_url in alice_client.get(home).content.decode()
    assert board_url not in bob_client.get(home).content.decode()


def test_live_elo_section_with_flags(board, alice_client):
    campaign, competitors, _ = board
    leaderboards_recompute(campaign_id=campaign.pk)
    html = alice_client.get(reverse("ranking:leaderboard", args=[campaign.pk])).content.decode()
    assert "Live Elo" in html
    assert "fewer than 50 comparisons" in html  # the rare competitor has 5
    snapshot = LeaderboardSnapshot.objects.get(campaign=campaign, category="", view="raw")
    assert "sd over orders" in html and "the same votes replayed in\n    100 random orders" in html
    top = snapshot.extra["elo"][0]
    sd, low, high = (floatformat(top[key], 0) for key in ("order_sd", "order_min", "order_max"))
    assert f"± {sd}" in html and f"{low} – {high}" in html


def test_anchor_competitor_is_pinned_at_1000(board):
    campaign, competitors, _ = board
    Campaign.objects.filter(pk=campaign.pk).update(ranking_anchor=competitors[2])
    for snapshot in leaderboards_recompute(campaign_id=campaign.pk):
        if snapshot.category:
            continue
        row = next(r for r in snapshot.rows if r["competitor_id"] == competitors[2].pk)
        assert row["score"] == 1000.0
        assert "competitor" in snapshot.method["anchor"]


def test_anchor_from_another_campaign_is_refused(board, acme):
    from django.core.exceptions import ValidationError

    from tests.factories import CampaignFactory

    campaign, _, _ = board
    other = CampaignFactory(organization=acme.organization)
    stranger = CompetitorFactory.create(campaign=other, endpoint=ModelEndpointFactory(organization=acme.organization))
    campaign.ranking_anchor = stranger
    with pytest.raises(ValidationError):
        campaign.full_clean(exclude=["rater_pools"])


def test_a_recompute_over_older_votes_never_replaces_a_newer_snapshot(board, acme, bob, monkeypatch):
    """Two recomputes overlap: the one that read the log first must not commit as the newest version."""
    campaign, competitors, _ = board
    from ranking import selectors as ranking_selectors

    # What a slow, earlier recompute had read.
    stale = ranking_selectors.vote_log(
        campaign_id=campaign.pk, policy=ranking_selectors.exclusion_policy_for(campaign), by_prompt=True
    )
    prompts = list(Prompt.objects.filter(campaign=campaign))
    votes_write(
        campaign=campaign,
        pool=acme.pool,
        raters=[bob],
        prompts=prompts,
        competitors=competitors,
        strengths=STRENGTHS,
        n=20,
        seed=9,
    )
    assert leaderboards_recompute(campaign_id=campaign.pk)  # the newer one commits first
    monkeypatch.setattr(ranking_selectors, "vote_log", lambda **kwargs: stale)
    assert leaderboards_recompute(campaign_id=campaign.pk) == []
    latest = LeaderboardSnapshot.objects.filter(campaign=campaign, category="", view="raw").order_by("-version")[0]
    assert latest.votes_total == 625


def test_beat_goes_through_the_debounce(board):
    from django.core.cache import cache

    from ranking.services import leaderboards_schedule_open_campaigns

    campaign, _, _ = board
    cache.delete(f"ranking:recompute-pending:{campaign.pk}")
    assert leaderboards_schedule_open_campaigns() == 1
    assert leaderboards_schedule_open_campaigns() == 0  # already pending
    cache.delete(f"ranking:recompute-pending:{campaign.pk}")


class _Sent:
    """Stands in for the recompute task at the broker boundary: records what would be queued."""

    def __init__(self) -> None:
        self.calls: list[tuple[list[int], dict[str, int], int]] = []

    def apply_async(self, args: list[int], kwargs: dict[str, int], countdown: int) -> None:
        self.calls.append((args, kwargs, countdown))


def test_a_starting_recompute_worker_rearms_what_a_killed_worker_held(board, monkeypatch, settings):
    """The delayed task a killed worker held is not delivered again before the visibility timeout, and its
    mark keeps beat away until it expires: the restarted worker re-arms it for the time it was due."""
    import time
    from types import SimpleNamespace

    from django.core.cache import cache

    from ranking.services import leaderboards_rearm, leaderboards_schedule
    from ranking.services import recompute as recompute_module

    campaign, _, _ = board
    pending, running = f"ranking:recompute-pending:{campaign.pk}", f"ranking:recompute-running:{campaign.pk}"
    cache.delete_many([pending, running])
    settings.ARENA_RANKING_DEBOUNCE_S = 30
    assert leaderboards_schedule(campaign_id=campaign.pk)  # a vote: due in 30 s (then the worker was killed)
    sent = _Sent()
    monkeypatch.setattr(recompute_module, "leaderboards_recompute_task", sent)
    assert leaderboards_schedule(campaign_id=campaign.pk) is False  # the mark keeps the next vote away
    assert leaderboards_rearm() == 1
    [(args, kwargs, countdown)] = sent.calls
    assert args == [campaign.pk] and kwargs == {"organization_id": campaign.organization_id}
    assert 28 <= countdown <= 30  # when it was due, not later, not at once
    assert cache.get(pending) == pytest.approx(time.time() + countdown, abs=2)
    # Without a mark (it expired): at once. While a recompute computes (its lease): nothing.
    cache.delete(pending)
    assert leaderboards_rearm() == 1 and sent.calls[-1][2] == 0
    cache.set(running, time.time(), timeout=10)
    assert leaderboards_rearm() == 0
    cache.delete(running)

    # Celery's worker_ready: only a worker that consumes the recompute queue re-arms.
    def consumer(*queues: str) -> SimpleNamespace:
        return SimpleNamespace(
            app=SimpleNamespace(amqp=SimpleNamespace(queues=SimpleNamespace(consume_from=dict.fromkeys(queues))))
        )

    calls = len(sent.calls)
    recompute_module._rearm_when_a_recompute_worker_starts(sender=consumer("generation"))
    assert len(sent.calls) == calls
    recompute_module._rearm_when_a_recompute_worker_starts(sender=consumer("recompute", "celery"))
    assert len(sent.calls) == calls + 1
    cache.delete_many([pending, running])


def test_both_bad_dropped_counts_only_decided_votes(acme, bob):
    from ranking.compute import Method, board_compute, elo_compute
    from ranking.selectors import vote_arrays

    prompts = list(Prompt.objects.filter(campaign=acme.campaign))
    votes_write(
        campaign=acme.campaign,
        pool=acme.pool,
        raters=[bob],
        prompts=prompts,
        competitors=[acme.left, acme.right],
        strengths=(1.0, 1.0),
        n=200,
        seed=4,
        tie_rate=0.0,
        both_bad_rate=0.9,
    )
    votes = vote_arrays(campaign_id=acme.campaign.pk)
    ids = np.array(sorted([acme.left.pk, acme.right.pk]))
    decided = int((votes.outcome != 3).sum())
    assert decided < 50
    drop = board_compute(votes, ids, {}, Method(both_bad="drop", min_votes=50, rounds=20))
    assert all(row["hidden"] for row in drop.rows)  # fewer than 50 votes that count
    tie = board_compute(votes, ids, {}, Method(both_bad="tie", min_votes=50, rounds=20))
    assert not any(row["hidden"] for row in tie.rows)
    elo, order = elo_compute(votes, ids, {}, Method(both_bad="drop"))
    assert order["votes"] == decided and order["both_bad"] == "skip"
    assert {e["comparisons"] for e in elo} == {decided}


def test_rank_ranges_stay_within_a_connected_group(acme, bob):
    from ranking.compute import Method, board_compute
    from ranking.selectors import vote_arrays

    extra = [
        CompetitorFactory.create(
            campaign=acme.campaign, endpoint=ModelEndpointFactory(organization=acme.organization, name=f"iso-{k}")
        )
        for k in range(2)
    ]
    prompts = list(Prompt.objects.filter(campaign=acme.campaign))
    votes_write(
        campaign=acme.campaign,
        pool=acme.pool,
        raters=[bob],
        prompts=prompts,
        competitors=[acme.left, acme.right],
        strengths=(4.0, 1.0),
        n=200,
        seed=5,
    )
    votes_write(
        campaign=acme.campaign,
        pool=acme.pool,
        raters=[bob],
        prompts=prompts,
        competitors=extra,
        strengths=(4.0, 1.0),
        n=200,
        seed=6,
    )
    votes = vote_arrays(campaign_id=acme.campaign.pk)
    ids = np.array(sorted(c.pk for c in [acme.left, acme.right, *extra]))
    board = board_compute(votes, ids, {}, Method(min_votes=10, rounds=30))
    assert board.extra["components"] == 2
    ranks = {row["competitor_id"]: (row["rank_best"], row["rank_worst"]) for row in board.rows}
    assert ranks[acme.left.pk] == (1, 1) and ranks[acme.right.pk] == (2, 2)
    assert ranks[extra[0].pk] == (1, 1) and ranks[extra[1].pk] == (2, 2)


def test_unanimous_results_still_get_an_honest_interval(acme, bob):
    """30-0 (or only ties) gives the bootstrap nothing to vary; the interval must not collapse to a point."""
    from ranking.compute import Method, board_compute
    from ranking.selectors import vote_arrays

    prompts = list(Prompt.objects.filter(campaign=acme.campaign))
    votes_write(
        campaign=acme.campaign,
        pool=acme.pool,
        raters=[bob],
        prompts=prompts,
        competitors=[acme.left, acme.right],
        strengths=(1e9, 1e-9),
        n=30,
        seed=8,
        tie_rate=0.0,
    )
    votes = vote_arrays(campaign_id=acme.campaign.pk)
    assert set(votes.outcome.tolist()) <= {0, 1}
    ids = np.array(sorted([acme.left.pk, acme.right.pk]))
    board = board_compute(votes, ids, {}, Method(min_votes=10, rounds=50))
    winner, loser = board.rows
    # 30-0 bounds the winner from below only (and the loser from above only): the other side is open.
    assert winner["upper"] is None and winner["upper_open"] and not winner["lower_open"]
    assert loser["lower"] is None and loser["lower_open"] and not loser["upper_open"]
    assert winner["score"] - winner["lower"] > 20 and loser["upper"] - loser["score"] > 20
    assert winner["interval_method"] == "profile likelihood"
    diff = board.pairwise["difference"]
    # 30-0: the gap is at least 353 points (the boundary rule: p^30 = 0.025, p = 0.884), open above.
    assert diff["upper_open"][0][1] and 345 < diff["lower"][0][1] < 360


def test_page_says_so_when_nobody_can_be_placed(acme, alice_client):
    leaderboards_recompute(campaign_id=acme.campaign.pk)
    html = alice_client.get(reverse("ranking:leaderboard", args=[acme.campaign.pk])).content.decode()
    assert "No competitor has enough votes to be placed yet" in html
    assert '<table class="board">' not in html


def test_pairwise_cells_carry_their_wilson_interval(board):
    from ranking.estimators import wilson_interval

    campaign, competitors, _ = board
    overall = next(s for s in leaderboards_recompute(campaign_id=campaign.pk) if s.category == "" and s.view == "raw")
    grid = snapshot_pairwise_stored(snapshot=LeaderboardSnapshot.objects.get(pk=overall.pk))
    checked = 0
    for i, _ in enumerate(grid["competitor_ids"]):
        for j, _ in enumerate(grid["competitor_ids"]):
            rate, n = grid["win_rate"][i][j], grid["n"][i][j]
            if i == j or not n:
                continue
            assert grid["lower"][i][j] < rate < grid["upper"][i][j]
            checked += 1
    assert checked == 12
    # one cell against an independent computation from the vote rows (ties and both-bad count half)
    a, b = competitors[0].pk, competitors[1].pk
    votes = Vote.objects.filter(campaign=campaign)
    wins = (
        votes.filter(left_id=a, right_id=b, choice="left").count()
        + votes.filter(left_id=b, right_id=a, choice="right").count()
    )
    half = votes.filter(left_id__in=[a, b], right_id__in=[a, b], choice__in=["tie", "both_bad"]).count()
    n = votes.filter(left_id__in=[a, b], right_id__in=[a, b]).count()
    lower, upper = wilson_interval(wins + 0.5 * half, n)
    i, j = grid["competitor_ids"].index(a), grid["competitor_ids"].index(b)
    assert grid["win_rate"][i][j] == pytest.approx((wins + 0.5 * half) / n, abs=1e-4)
    assert grid["lower"][i][j] == pytest.approx(float(lower), abs=1e-4)
    assert grid["upper"][i][j] == pytest.approx(float(upper), abs=1e-4)


def test_page_reports_intransitive_triads(acme, bob, alice_client):
    """Rock-paper-scissors among three competitors: the page says a single score cannot order them."""
    third = CompetitorFactory.create(
        campaign=acme.campaign, endpoint=ModelEndpointFactory(organization=acme.organization)
    )
    prompts = list(Prompt.objects.filter(campaign=acme.campaign))
    for winner, loser, seed in ((acme.left, acme.right, 1), (acme.right, third, 2), (third, acme.left, 3)):
        votes_write(
            campaign=acme.campaign,
            pool=acme.pool,
            raters=[bob],
            prompts=prompts,
            competitors=[winner, loser],
            strengths=(4.0, 1.0),
            n=60,
            seed=seed,
            tie_rate=0.0,
        )
    Campaign.objects.filter(pk=acme.campaign.pk).update(min_decision_ms=0, ranking_min_votes=10)
    overall = next(
        s for s in leaderboards_recompute(campaign_id=acme.campaign.pk) if s.category == "" and s.view == "raw"
    )
    assert overall.pairwise["intransitive_triads"] == 1
    html = alice_client.get(reverse("ranking:leaderboard", args=[acme.campaign.pk])).content.decode()
    assert "1 intransitive" in html
