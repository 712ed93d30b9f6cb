"""Qualification: a campaign may ask for k gold battles before any real one; the outcome (passed or
failed, the score, when) is one row; a rater who failed gets no real battle and a page saying why."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction
from django.urls import reverse

from battles import services
from battles.models import Battle, Choice, Qualification
from tests.battles.test_gold import _configure, _gold, _next, _rater, _shadow, _vote
from tests.conftest import Tenant, login

pytestmark = [pytest.mark.django_db]


def _qualify(tenant: Tenant, user, correct: int, wrong: int) -> list[Battle]:  # type: ignore[no-untyped-def]
    """Answer the qualification: ``correct`` battles as expected, then ``wrong`` the other way."""
    served = []
    for index in range(correct + wrong):
        battle = _next(tenant, user)
        served.append(battle)
        assert battle.source == Battle.Source.GOLD  # nothing real before the qualification is decided
        right = battle.gold_expected
        other = Choice.LEFT if right == Choice.RIGHT else Choice.RIGHT
        _vote(battle, user, right if index < correct else other)
    return served


def test_pass_then_real_battles(acme: Tenant, bob) -> None:  # type: ignore[no-untyped-def]
    _shadow(acme, 5)
    _gold(acme, 8)
    _configure(acme, qualification_battles=4, qualification_pass=0.75)
    _qualify(acme, bob, correct=3, wrong=0)
    assert not Qualification.objects.exists()  # three of four: not decided yet
    _qualify(acme, bob, correct=0, wrong=1)
    row = Qualification.objects.get(rater=bob, campaign=acme.campaign)
    assert row.status == Qualification.Status.PASSED
    assert (row.answered, row.correct, row.score, row.threshold) == (4, 3, 0.75, 0.75)
    assert row.decided_at is not None and row.last_vote_id == bob.votes.order_by("-id").first().pk
    # Now the rater gets the campaign's real battles (gold_rate is 0: no more checks).
    assert _next(acme, bob).source == Battle.Source.SHADOW


def test_fail_means_no_real_battle_and_the_rater_is_told(acme: Tenant, bob, bob_client) -> None:  # type: ignore[no-untyped-def]
    _shadow(acme, 5)
    _gold(acme, 8)
    _configure(acme, qualification_battles=3, qualification_pass=1.0)
    _qualify(acme, bob, correct=2, wrong=1)
    row = Qualification.objects.get(rater=bob)
    assert row.status == Qualification.Status.FAILED and row.correct == 2 and row.answered == 3
    with pytest.raises(services.QualificationFailed):
        services.battle_assign(campaign=acme.campaign, user=bob, session_key="s")
    response = bob_client.post(reverse("battles:next", args=[acme.campaign.pk]))
    assert response.status_code == 403
    page = response.content.decode()
    assert "qualification" in page and "2 of the 3" in page
    # No real battle was ever handed to them, and the outcome is one row that stays.
    assert not Battle.objects.filter(rater=bob).exclude(source=Battle.Source.GOLD).exists()
    with pytest.raises(IntegrityError), transaction.atomic():
        Qualification.objects.create(
            organization=acme.organization,
            campaign=acme.campaign,
            rater=bob,
            status="passed",
            answered=3,
            correct=3,
            score=1.0,
            threshold=1.0,
            last_vote_id=0,
        )


def test_each_rater_qualifies_for_themselves_and_without_items_nobody_starts(acme: Tenant, bob) -> None:  # type: ignore[no-untyped-def]
    _shadow(acme, 3)
    _configure(acme, qualification_battles=2)
    with pytest.raises(services.NothingToRate, match="qualification"):
        services.battle_assign(campaign=acme.campaign, user=bob, session_key="s")
    assert not Battle.objects.filter(rater=bob).exists()
    _gold(acme, 4)
    other = _rater(acme, "other@acme.test")
    _qualify(acme, bob, correct=2, wrong=0)
    assert Qualification.objects.get(rater=bob).status == Qualification.Status.PASSED
    # Another rater still starts with the qualification.
    assert _next(acme, other).source == Battle.Source.GOLD
    assert not Qualification.objects.filter(rater=other).exists()


def test_the_qualification_also_stands_before_typed_prompts(acme: Tenant, bob) -> None:  # type: ignore[no-untyped-def]
    _gold(acme, 3)
    _configure(acme, qualification_battles=2, allow_rater_prompts=True)
    battle = services.battle_assign(
        campaign=acme.campaign, user=bob, session_key="s", prompt_text="What is a monad?"
    ).battle
    assert battle.source == Battle.Source.GOLD


def test_a_rater_page_for_a_qualifying_rater_looks_like_any_battle(acme: Tenant, bob) -> None:  # type: ignore[no-untyped-def]
    _gold(acme, 2)
    _configure(acme, qualification_battles=2)
    client = login(bob)
    response = client.post(reverse("battles:next", args=[acme.campaign.pk]))
    assert response.status_code == 302
    page = client.get(response["Location"]).content.decode()
    assert "gold" not in page.lower() and "qualification" not in page.lower()
