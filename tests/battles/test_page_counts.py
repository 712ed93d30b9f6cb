"""The battle page's two battle counts in one statement (selectors.battle_page_counts), or in the page's read
of the battle (selectors.battle_page_for_rater), say exactly what the two selectors they replace say: the
battle's number in its session window and the rater's progress."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from battles import selectors, services
from battles.models import Battle
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
        assert len(captured.captured_queries) == (0 if connection.vendor == "postgresql" else 1)
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
    for status, hours in ((Battle.Status.READY, 0.5), (Battle.Status.GENERATING, 3 * window_h)):
        open_battle = ready_battle(acme, bob, f"Open, {status}")
        taken = now - timedelta(hours=hours)
        Battle.objects.filter(pk=open_battle.pk).update(status=status, created_at=taken, claimed_at=taken)
        with CaptureQueriesContext(connection) as captured:
            pool, standing = selectors.pool_and_standing(campaign=acme.campaign, user=bob, now=now)
        assert len(captured.captured_queries) == 1 and pool == acme.pool
        assert standing.open == 1 and selectors.battle_pending_for_rater(campaign=acme.campaign, user=bob) is not None
        assert standing.in_session == selectors.battles_in_session_window(campaign=acme.campaign, user=bob, now=now)
        Battle.objects.filter(pk=open_battle.pk).update(status=Battle.Status.VOTED)
