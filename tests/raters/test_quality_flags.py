"""Stored, reviewable rater flags and the attacks they answer.

A script voting at random among careful raters is caught twice, by gold accuracy and by the sequential
test against the consensus: both checks run after a recompute and write flag rows (new rows, with their
evidence), the next snapshot leaves the script's votes out and records which flags were in force; a
manager clears a flag in the console (who and when stamped, audited, never deleted) and the test starts
again after the review. A rater voting in 200 ms has every vote excluded; a rater in a pool the campaign
does not name gets nothing."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.urls import reverse
from django.utils import timezone

from battles import services as battle_services
from battles.models import Battle, Campaign, Choice, Competitor, Vote
from battles.services import assignment as assignment_services
from battles.services import buffer as buffer_services
from battles.services import gold as gold_services
from battles.services import shadow as shadow_services
from battles.services import shared_items as shared_items_services
from ranking.services import leaderboards_recompute, rater_flags_check
from raters.models import AuditAction, AuditEvent, RaterFlag
from tests.battles.test_gold import _configure, _gold, _next, _rater, _shadow
from tests.conftest import Tenant, login

pytestmark = [pytest.mark.django_db]


def _vote_after(battle: Battle, user: User, choice: str, seconds: float) -> Vote:
    """Vote as if the rater had looked at the answers for ``seconds`` (the server measures from shown_at)."""
    Battle.objects.filter(pk=battle.pk).update(shown_at=timezone.now() - timedelta(seconds=seconds))
    return battle_services.vote_submit(battle_id=battle.pk, user=user, choice=choice)


def _careful(rng: random.Random, prod: int):  # type: ignore[no-untyped-def]
    def pick(battle: Battle) -> str:
        if battle.gold_expected:
            return battle.gold_expected if rng.random() < 0.9 else Choice.TIE
        if rng.random() < 0.1:
            return Choice.TIE
        better_left = battle.left_id == prod
        agree = rng.random() < 0.85
        return Choice.LEFT if better_left == agree else Choice.RIGHT

    return pick


def _rate(tenant: Tenant, user: User, pick, n: int, *, seconds: float = 6.0) -> None:  # type: ignore[no-untyped-def]
    for _ in range(n):
        battle = _next(tenant, user)
        _vote_after(battle, user, pick(battle), seconds)


def _overall_raw(tenant: Tenant):  # type: ignore[no-untyped-def]
    snapshots = leaderboards_recompute(campaign_id=tenant.campaign.pk)
    [snapshot] = [s for s in snapshots if s.category == "" and s.view == "raw"]
    return snapshot


@pytest.fixture
def world(acme: Tenant, bob: User, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    # The platform draws prompts, pairs and sides from the system's entropy; seeded here, so this world
    # (and whether a coin-flipper's e-value crosses 1/alpha by its last vote) is the same on every run.
    seeded = random.Random(2026)  # one sequence, shared by every module that draws (as the one _rng was)
    for module in (assignment_services, buffer_services, gold_services, shadow_services, shared_items_services):
        monkeypatch.setattr(module, "_rng", seeded)
    _shadow(acme, 600)
    _gold(acme, 60)
    _gold(acme, 60, expected="answer_2")
    _configure(acme, gold_rate=0.25, gold_min_accuracy=0.7, outlier_alpha=0.01, min_decision_ms=1500)
    prod = Competitor.objects.get(campaign=acme.campaign, external_model="prod").pk
    rng = random.Random(11)
    careful = [bob] + [_rater(acme, f"careful{i}@acme.test") for i in range(4)]
    script = _rater(acme, "script@acme.test")
    # Interleaved, as a live campaign is: the consensus forms while the script votes. 250 script votes,
    # about 190 outside gold and 95 of those decisive: far more than a coin-flipper needs against a
    # consensus of about 0.85 (about 0.3 of log e-value per decisive vote; 1/alpha is log 4.6).
    for _ in range(50):
        for user in careful:
            _rate(acme, user, _careful(rng, prod), 1)
        _rate(acme, script, lambda battle: rng.choice(Choice.values), 5)
    return acme, careful, script, prod


def test_a_random_script_is_caught_by_gold_and_by_the_sequential_test(world, alice, alice_client) -> None:  # type: ignore[no-untyped-def]
    acme, careful, script, prod = world
    flags = rater_flags_check(campaign_id=acme.campaign.pk)
    assert {(f.rater_id, f.kind) for f in flags} == {
        (script.pk, RaterFlag.Kind.OUTLIER),
        (script.pk, RaterFlag.Kind.GOLD_ACCURACY),
    }
    outlier = RaterFlag.objects.get(rater=script, kind=RaterFlag.Kind.OUTLIER)
    assert outlier.campaign_id == acme.campaign.pk and outlier.in_force and outlier.created_by is None
    assert outlier.evidence["e_value_max"] >= 100 and outlier.evidence["threshold"] == 100
    assert Vote.objects.filter(pk=outlier.evidence["flag_vote_id"], rater=script).exists()
    gold = RaterFlag.objects.get(rater=script, kind=RaterFlag.Kind.GOLD_ACCURACY)
    assert gold.evidence["upper"] < 0.7 and gold.evidence["answered"] >= 10
    assert AuditEvent.objects.filter(action=AuditAction.RATER_FLAGGED, object_id=str(outlier.pk)).exists()
    assert not RaterFlag.objects.filter(rater__in=careful).exists()
    # Run again: nothing new (one flag of a kind in force per rater), nothing edited.
    assert rater_flags_check(campaign_id=acme.campaign.pk) == []
    assert RaterFlag.objects.count() == 2

    # The next snapshot leaves the script out and records the flags in force.
    [snapshot] = [
        s for s in leaderboards_recompute(campaign_id=acme.campaign.pk) if s.category == "" and s.view == "raw"
    ]
    assert snapshot.policy["flag_ids"] == sorted([outlier.pk, gold.pk])
    assert snapshot.policy["flagged_raters"] == [script.pk]
    script_votes = Vote.objects.filter(rater=script, campaign=acme.campaign).exclude(source="gold").count()
    assert snapshot.excluded["flagged_rater"] == script_votes > 0

    # A manager reviews the outlier flag and clears it in the console: stamped, audited, kept.
    response = alice_client.post(
        reverse("admin:raters_raterflag_changelist"), {"action": "clear_selected", "_selected_action": [outlier.pk]}
    )
    assert response.status_code == 302
    outlier.refresh_from_db()
    assert not outlier.in_force and outlier.cleared_by == alice and outlier.cleared_at is not None
    assert AuditEvent.objects.filter(action=AuditAction.RATER_FLAG_CLEARED, object_id=str(outlier.pk), actor=alice)
    [snapshot] = [
        s for s in leaderboards_recompute(campaign_id=acme.campaign.pk) if s.category == "" and s.view == "raw"
    ]
    assert snapshot.policy["flag_ids"] == [gold.pk]  # the gold flag is still in force
    # The review closed the old window: the votes it judged do not raise the flag again...
    assert rater_flags_check(campaign_id=acme.campaign.pk) == []
    # ...but the script carrying on does, as a new row; the cleared one stays as the record.
    # (200 votes, about 100 decisive: a coin-flipper against a consensus of about 0.85 gains about 0.3
    # in log e-value per decisive vote, so the window reaches 1/alpha with a wide margin.)
    rng = random.Random(5)
    _rate(acme, script, lambda battle: rng.choice(Choice.values), 200)
    again = rater_flags_check(campaign_id=acme.campaign.pk)
    assert [(f.rater_id, f.kind) for f in again] == [(script.pk, RaterFlag.Kind.OUTLIER)]
    assert again[0].evidence["window_after_vote_id"] > 0
    assert RaterFlag.objects.filter(rater=script, kind=RaterFlag.Kind.OUTLIER).count() == 2


def test_checks_run_after_each_recompute(acme: Tenant, monkeypatch, django_capture_on_commit_callbacks) -> None:  # type: ignore[no-untyped-def]
    queued: list[int] = []
    monkeypatch.setattr(
        "ranking.tasks.rater_flags_check_task.delay", lambda campaign_id, organization_id: queued.append(campaign_id)
    )
    with django_capture_on_commit_callbacks(execute=True):
        leaderboards_recompute(campaign_id=acme.campaign.pk)
    assert queued == []  # no check configured: nothing queued
    Campaign.objects.filter(pk=acme.campaign.pk).update(outlier_alpha=0.01)
    with django_capture_on_commit_callbacks(execute=True):
        leaderboards_recompute(campaign_id=acme.campaign.pk)
    assert queued == [acme.campaign.pk]


def test_a_rater_voting_in_200_ms_is_excluded(acme: Tenant, bob: User) -> None:
    _shadow(acme, 30)
    _configure(acme, min_decision_ms=1500)
    fast = _rater(acme, "fast@acme.test")
    _rate(acme, bob, lambda battle: Choice.LEFT, 10)
    _rate(acme, fast, lambda battle: Choice.RIGHT, 12, seconds=0.2)
    times = list(Vote.objects.filter(rater=fast).values_list("decision_ms", flat=True))
    assert len(times) == 12 and all(150 <= t < 1500 for t in times)
    [snapshot] = [
        s for s in leaderboards_recompute(campaign_id=acme.campaign.pk) if s.category == "" and s.view == "raw"
    ]
    assert snapshot.excluded["too_fast"] == 12
    assert snapshot.votes_used == 10  # bob's only


def test_a_rater_in_the_wrong_pool_gets_nothing(acme: Tenant, bob: User) -> None:
    from raters.models import RaterPool
    from tests.factories import RaterPoolFactory

    _shadow(acme, 5)
    _configure(acme)
    stranger = _rater(acme, "stranger@acme.test")
    acme.pool.members.remove(stranger)
    other_pool: RaterPool = RaterPoolFactory.create(organization=acme.organization, name="Other vendor")
    other_pool.members.add(stranger)  # a rater of the organisation, in a pool this campaign does not name
    with pytest.raises(battle_services.NotAllowed):
        battle_services.battle_assign(campaign=acme.campaign, user=stranger, session_key="s")
    client = login(stranger)
    assert client.post(reverse("battles:next", args=[acme.campaign.pk])).status_code == 404
    assert client.get(reverse("battles:campaign", args=[acme.campaign.pk])).status_code == 404
    bobs = _next(acme, bob)
    assert client.get(reverse("battles:battle", args=[bobs.pk])).status_code == 404
    assert client.post(reverse("battles:vote", args=[bobs.pk]), {"choice": "left"}).status_code == 404
    assert not Battle.objects.filter(rater=stranger).exists() and not Vote.objects.filter(rater=stranger).exists()
