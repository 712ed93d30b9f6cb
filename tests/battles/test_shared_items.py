"""Shared battles: with ``reviewers_per_item = k`` one answer pair is shown to k different raters, each
in a battle of their own that shares the item's key, prompt and answers (sides drawn per copy); the
claim never gives a rater two copies of one item (and the database refuses it); the agreement
statistics count a shared item as one item."""

from __future__ import annotations

from collections import Counter

import pytest
from django.db import IntegrityError, transaction

from battles import services
from battles.models import Battle, Campaign, Choice, Generation
from ranking.selectors import rater_quality
from tests.battles.test_gold import _configure, _next, _rater, _shadow, _vote
from tests.conftest import Tenant
from tests.factories import PromptFactory
from tests.planting import planting

pytestmark = [pytest.mark.django_db]


def _texts(battle: Battle) -> dict[int, str]:
    """Answer text per competitor id (what a copy must keep, whichever side it shows it on)."""
    return {g.competitor_id: g.text for g in Generation.objects.filter(battle=battle, turn=0)}


def test_each_item_becomes_k_battles_with_the_same_answers(acme: Tenant) -> None:
    Campaign.objects.filter(pk=acme.campaign.pk).update(reviewers_per_item=3)
    acme.campaign.refresh_from_db()
    _shadow(acme, 20)
    battles = list(Battle.objects.filter(campaign=acme.campaign))
    assert len(battles) == 60
    groups = Counter(b.item_key for b in battles)
    assert len(groups) == 20 and set(groups.values()) == {3} and None not in groups
    swapped = 0
    for key in groups:
        copies = [b for b in battles if b.item_key == key]
        first = next(b for b in copies if b.pk == key)  # the item is keyed by its first battle
        assert len({b.prompt_id for b in copies}) == 1 and len({b.created_at for b in copies}) == 1
        assert {frozenset((b.left_id, b.right_id)) for b in copies} == {frozenset((first.left_id, first.right_id))}
        for copy in copies:
            assert _texts(copy) == _texts(first)  # the same answer behind each competitor
            assert copy.status == Battle.Status.READY and copy.rater_id is None
            swapped += copy.left_id != first.left_id
    # Sides are drawn per copy: over 40 copies some show the pair the other way round (p = 2^-40 if not).
    assert 0 < swapped < 40


def test_k_raters_each_get_one_copy_and_never_two(acme: Tenant, bob) -> None:  # type: ignore[no-untyped-def]
    _configure(acme, reviewers_per_item=3)
    _shadow(acme, 4)
    raters = [bob, _rater(acme, "r2@acme.test"), _rater(acme, "r3@acme.test"), _rater(acme, "r4@acme.test")]
    got: dict[int, list[Battle]] = {r.pk: [] for r in raters}
    for _ in range(4):
        for rater in raters[:3]:
            battle = _next(acme, rater)
            got[rater.pk].append(battle)
            _vote(battle, rater, Choice.LEFT)
    # Every one of the first three raters saw all four items, one copy each.
    for rater in raters[:3]:
        keys = [b.item_key for b in got[rater.pk]]
        assert len(keys) == len(set(keys)) == 4
    # All twelve copies are used: a fourth rater gets none of these items (a pool prompt's battle,
    # prepared for them now, instead).
    assert not Battle.objects.filter(campaign=acme.campaign, rater__isnull=True, status=Battle.Status.READY).exists()
    fourth = services.battle_assign(campaign=acme.campaign, user=raters[3], session_key="s").battle
    assert fourth.source == Battle.Source.GENERATED and fourth.item_key is None


def test_a_rater_is_never_handed_a_second_copy(acme: Tenant, bob) -> None:  # type: ignore[no-untyped-def]
    _configure(acme, reviewers_per_item=2)
    _shadow(acme, 1)
    first = _next(acme, bob)
    _vote(first, bob, Choice.RIGHT)
    # The other copy waits in the buffer; bob may not have it, even with the prompt rule out of the way.
    other = Battle.objects.get(campaign=acme.campaign, rater__isnull=True)
    assert other.item_key is not None and other.item_key == first.item_key
    again = services.battle_assign(campaign=acme.campaign, user=bob, session_key="s").battle
    assert again.item_key is None and again.source == Battle.Source.GENERATED  # a pool prompt's, not the copy
    # The claim's own rule, alone: the copy under a prompt bob has not seen, and bob holding no open battle.
    Battle.objects.filter(pk=again.pk).update(status=Battle.Status.VOID)
    Battle.objects.filter(pk=other.pk).update(prompt=PromptFactory.create(campaign=acme.campaign))
    assert list(Battle.objects.filter(rater__isnull=True, status=Battle.Status.READY)) == [other]
    assert services.battle_claim(campaign=acme.campaign, user=bob, pool=acme.pool, session_key="s") is None
    Battle.objects.filter(pk=first.pk).update(item_key=None)  # bob's copy no longer of the item: it is claimable
    assert services.battle_claim(campaign=acme.campaign, user=bob, pool=acme.pool, session_key="s") == other
    Battle.objects.filter(pk=other.pk).update(rater=None, pool=None, claimed_at=None, session_key="")
    Battle.objects.filter(pk=first.pk).update(item_key=other.item_key)
    # And the database refuses it outright (the race the claim's check cannot see).
    with pytest.raises(IntegrityError), transaction.atomic():
        Battle.objects.filter(pk=other.pk).update(rater=bob, pool=acme.pool)


def test_k_one_shares_nothing_and_gold_is_never_shared(acme: Tenant, bob) -> None:  # type: ignore[no-untyped-def]
    from tests.battles.test_gold import _gold

    _shadow(acme, 3)
    assert Battle.objects.filter(campaign=acme.campaign).count() == 3
    assert not Battle.objects.filter(item_key__isnull=False).exists()
    _gold(acme, 2)
    _configure(acme, reviewers_per_item=3, gold_rate=1.0)
    gold = _next(acme, bob)
    assert gold.source == Battle.Source.GOLD and gold.item_key is None
    assert Battle.objects.filter(gold_item__isnull=False).count() == 1  # a check is one rater's, not copied


def test_agreement_counts_a_shared_item_once_per_rater(acme: Tenant, bob) -> None:  # type: ignore[no-untyped-def]
    """Three raters on 12 shared items: two always pick the same competitor, the third its opposite.
    Raw agreement per item is 1/3 (one agreeing pair of three), whatever side each copy showed."""
    _configure(acme, reviewers_per_item=3)
    _shadow(acme, 12)
    raters = [bob, _rater(acme, "r2@acme.test"), _rater(acme, "r3@acme.test")]
    favourite: int | None = None
    for _ in range(12):
        for index, rater in enumerate(raters):
            battle = _next(acme, rater)
            favourite = favourite or min(battle.left_id, battle.right_id)
            picks_favourite = index < 2
            on_left = battle.left_id == favourite
            _vote(battle, rater, Choice.LEFT if on_left == picks_favourite else Choice.RIGHT)
    report = rater_quality(campaign=acme.campaign)
    overall = report["overall"]
    assert overall["items"] == 12 and overall["shared_items"] == 12 and overall["repeat_votes"] == 0
    assert overall["raw_agreement"] == pytest.approx(1 / 3)
    assert overall["fleiss_kappa"]["raters_per_item"] == "fixed"
    rows = {row["rater_id"]: row for row in report["raters"]}
    assert rows[raters[2].pk]["agreement"] == 0.0
    assert rows[bob.pk]["agreement"] == pytest.approx(0.5)  # agrees with one of the two others
    assert "shared battle" in report["item_key"]


def test_a_generated_pool_battle_is_shared_when_its_answers_arrive(acme: Tenant, bob) -> None:  # type: ignore[no-untyped-def]
    """The generated path: a battle prepared for bob (no buffer) becomes the item's first copy when both
    answers are recorded; the other k - 1 wait unclaimed, and a failed battle is never copied."""
    from serving.triton.client import GenerationResult

    _configure(acme, reviewers_per_item=3, buffer_size=0)
    battle = services.battle_assign(campaign=acme.campaign, user=bob, session_key="s").battle
    # Its worker could not reach a model (voided); record the answers a reachable model would have given.
    with planting():
        Generation.objects.filter(battle=battle).delete()
    Battle.objects.filter(pk=battle.pk).update(status=Battle.Status.GENERATING, void_reason="")
    battle.refresh_from_db()
    left = GenerationResult(text="Left answer.", output_tokens=3, finish_reason="stop", latency_s=0.4)
    right = GenerationResult(text="Right answer.", output_tokens=3, finish_reason="stop", latency_s=0.5)
    services.battle_generations_record(battle=battle, left=left, right=right)
    battle.refresh_from_db()
    assert battle.rater == bob and battle.item_key == battle.pk
    copies = Battle.objects.filter(item_key=battle.pk).exclude(pk=battle.pk)
    assert copies.count() == 2 and not copies.filter(rater__isnull=False).exists()
    for copy in copies:
        assert _texts(copy) == _texts(battle) and copy.status == Battle.Status.READY

    failed = services.battle_assign(campaign=acme.campaign, user=_rater(acme, "x@acme.test"), session_key="s").battle
    with planting():
        Generation.objects.filter(battle=failed).delete()
    Battle.objects.filter(pk=failed.pk).update(status=Battle.Status.GENERATING, void_reason="")
    failed.refresh_from_db()
    broken = GenerationResult(
        text="", output_tokens=0, finish_reason="error", latency_s=0.1, error="x", error_kind="error"
    )
    services.battle_generations_record(battle=failed, left=left, right=broken)
    assert not Battle.objects.filter(item_key=failed.pk).exists()


def test_the_prompt_hash_cap_must_allow_k_votes(acme: Tenant) -> None:
    from django.core.exceptions import ValidationError

    campaign = acme.campaign
    campaign.reviewers_per_item, campaign.prompt_hash_cap = 3, 2
    with pytest.raises(ValidationError, match="at least k"):
        campaign.full_clean()
    campaign.prompt_hash_cap = 3
    campaign.full_clean()
