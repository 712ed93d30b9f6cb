"""The battle page's two battle counts in one statement (selectors.battle_page_counts), or in the page's read
of the battle (selectors.battle_page_for_rater), say exactly what the two selectors they replace say: the
battle's number in its session window and the rater's progress."""

from __future__ import annotations

import random
from datetime import datetime, timedelta

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.db.models import Model
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from battles import selectors, services
from battles.models import Battle, Campaign, Generation
from battles.selectors.assignment import ANSWER_SHOWN_FIELDS
from tests.battles.test_identity_refuse import ready_battle
from tests.conftest import Tenant

pytestmark = pytest.mark.django_db


def test_one_statement_counts_what_the_two_selectors_count(acme: Tenant, bob: User):
    rng = random.Random(23)
    now = timezone.now()
    window_h = acme.campaign.session_window_h
    battles = []
    for i in range(40):
        battle = ready_battle(acme, bob, f"Prompt {i}")
        # Over three windows back, some on the window's edges; a quarter voided; a few from before claims
        # were stamped (counted by their creation).
        hours = rng.choice([rng.uniform(0, 3 * window_h), window_h, 2 * window_h, 0.001])
        taken = now - timedelta(hours=hours)
        status = Battle.Status.VOID if rng.random() < 0.25 else Battle.Status.VOTED
        stamped = rng.random() < 0.8
        Battle.objects.filter(pk=battle.pk).update(
            status=status, created_at=taken, claimed_at=taken if stamped else None
        )
        battles.append(battle)
    pending = ready_battle(acme, bob, "The open one")
    for battle in [*battles, pending]:
        battle = Battle.objects.select_related("campaign").get(pk=battle.pk)
        expected = (
            selectors.battle_position_in_session(battle),
            selectors.rater_progress(campaign=battle.campaign, user=bob),
        )
        assert selectors.battle_page_counts(battle=battle, user=bob) == expected
        # The page's read counts them in its own statement: the same numbers, and nothing more is sent.
        read = selectors.battle_page_for_rater(user=bob, battle_id=battle.pk)
        assert read is not None and read.pk == battle.pk
        with CaptureQueriesContext(connection) as captured:
            assert selectors.battle_page_counts(battle=read, user=bob) == expected
            # Its answers too: what the page shows of each, as a read of their own gives it.
            shown = selectors.battle_generations(read)
        assert len(captured.captured_queries) == (0 if connection.vendor == "postgresql" else 2)
        apart = Generation.objects.filter(battle=battle).order_by("turn", "side")
        assert [[getattr(g, f) for f in ANSWER_SHOWN_FIELDS] for g in shown] == [
            [getattr(g, f) for f in ANSWER_SHOWN_FIELDS] for g in apart
        ]
        assert len(shown) == 2
    assert acme.campaign.rater_vote_cap is None
    with CaptureQueriesContext(connection) as captured:
        _, progress = selectors.battle_page_counts(battle=battle, user=bob)
    # The battles' two counts; the rater's votes are counted only where a cap asks for them.
    assert len(captured.captured_queries) == 1 and progress.votes is None and not progress.campaign_full

    battle.campaign.rater_vote_cap = 3
    Battle.objects.filter(pk=pending.pk).update(rater=None)  # one open battle a rater: the votes' come next
    for votes in range(4):
        with CaptureQueriesContext(connection) as captured:
            _, progress = selectors.battle_page_counts(battle=battle, user=bob)
        assert len(captured.captured_queries) == 2  # ...and the votes
        assert progress.votes == votes and progress.campaign_full == (votes >= 3)
        services.vote_submit(battle_id=ready_battle(acme, bob, f"Voted {votes}").pk, user=bob, choice="left")


def test_the_raters_standing_says_what_the_pending_battle_and_the_session_count_say(acme: Tenant, bob: User):
    """ "Next battle" asks in one statement whether the rater holds an open battle and how many battles of theirs
    the session cap counts: the same answers as reading the pending battle and counting the window, over
    battles of every state across three windows (ready and generating are open; voided ones do not count)."""
    rng = random.Random(29)
    now = timezone.now()
    window_h = acme.campaign.session_window_h
    for i in range(40):
        battle = ready_battle(acme, bob, f"Prompt {i}")
        hours = rng.choice([rng.uniform(0, 3 * window_h), window_h, 2 * window_h, 0.001])
        taken = now - timedelta(hours=hours)
        status = rng.choice([Battle.Status.VOID, Battle.Status.VOTED, Battle.Status.VOTED])
        stamped = rng.random() < 0.8
        Battle.objects.filter(pk=battle.pk).update(
            status=status, created_at=taken, claimed_at=taken if stamped else None
        )
        pool, standing = selectors.pool_and_standing(campaign=acme.campaign, user=bob, now=now)
        assert pool == acme.pool and standing.open == 0
        assert standing.in_session == selectors.battles_in_session_window(campaign=acme.campaign, user=bob, now=now)
        _read_with_the_campaign_alike(acme, bob, now, (pool, standing))
    for status, hours in ((Battle.Status.READY, 0.5), (Battle.Status.GENERATING, 3 * window_h)):
        open_battle = ready_battle(acme, bob, f"Open, {status}")
        taken = now - timedelta(hours=hours)
        Battle.objects.filter(pk=open_battle.pk).update(status=status, created_at=taken, claimed_at=taken)
        with CaptureQueriesContext(connection) as captured:
            pool, standing = selectors.pool_and_standing(campaign=acme.campaign, user=bob, now=now)
        assert len(captured.captured_queries) == 1 and pool == acme.pool
        assert standing.open == 1 and selectors.battle_pending_for_rater(campaign=acme.campaign, user=bob) is not None
        assert standing.in_session == selectors.battles_in_session_window(campaign=acme.campaign, user=bob, now=now)
        _read_with_the_campaign_alike(acme, bob, now, (pool, standing))
        Battle.objects.filter(pk=open_battle.pk).update(status=Battle.Status.VOTED)


def _read_with_the_campaign_alike(acme: Tenant, bob: User, now: datetime, expected: tuple[object, object]) -> None:
    """ "Next battle" reads the pool and the standing with its campaign (selectors.campaign_for_next): the same
    campaign, and the same pool and standing without a statement more, as of the same time only."""
    with CaptureQueriesContext(connection) as captured:
        campaign = selectors.campaign_for_next(user=bob, campaign_id=acme.campaign.pk, now=now)
        assert campaign is not None
        assert selectors.pool_and_standing(campaign=campaign, user=bob, now=now) == expected
    assert len(captured.captured_queries) == (1 if connection.vendor == "postgresql" else 2)
    alone = selectors.campaign_for_rater(user=bob, campaign_id=acme.campaign.pk)
    assert alone is not None and _columns(campaign) == _columns(alone)
    assert _columns(campaign.organization) == _columns(alone.organization)
    with CaptureQueriesContext(connection) as captured:  # another time: read again
        later = selectors.pool_and_standing(campaign=campaign, user=bob, now=now + timedelta(hours=1))
    assert len(captured.captured_queries) == 1 and later[0] == expected[0]


def _columns(instance: Model) -> dict[str, object]:
    return {f.attname: getattr(instance, f.attname) for f in instance._meta.concrete_fields}


def test_next_battles_campaign_is_none_where_campaign_for_rater_says_none(
    acme: Tenant, globex: Tenant, bob: User, charlie: User
):
    """Not in a pool of the campaign, a closed campaign, another organisation's campaign, a campaign that is not
    there: no campaign, as campaign_for_rater answers."""
    now = timezone.now()
    assert selectors.campaign_for_next(user=bob, campaign_id=acme.campaign.pk, now=now) is not None
    for user, campaign_id in ((charlie, acme.campaign.pk), (bob, globex.campaign.pk), (bob, acme.campaign.pk + 10_000)):
        assert selectors.campaign_for_rater(user=user, campaign_id=campaign_id) is None
        assert selectors.campaign_for_next(user=user, campaign_id=campaign_id, now=now) is None
    acme.pool.members.remove(bob)
    assert selectors.campaign_for_next(user=bob, campaign_id=acme.campaign.pk, now=now) is None
    acme.pool.members.add(bob)
    Campaign.objects.filter(pk=acme.campaign.pk).update(status=Campaign.Status.CLOSED)
    assert selectors.campaign_for_next(user=bob, campaign_id=acme.campaign.pk, now=now) is None
