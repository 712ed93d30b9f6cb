"""The exclusion policy end to end: flags written with each vote, rules taken from the campaign."""

from __future__ import annotations

import numpy as np
import pytest
from django.urls import reverse

from battles.models import Battle, Campaign, Prompt, Vote
from ranking.policy import ExclusionPolicy, VoteArrays
from ranking.services import leaderboards_recompute
from tests.conftest import endpoint_for, generation_worker_run
from tests.factories import UserFactory

from .synth import votes_write

pytestmark = pytest.mark.django_db


def _overall(campaign_id: int):  # type: ignore[no-untyped-def]
    return next(s for s in leaderboards_recompute(campaign_id=campaign_id) if s.category == "" and s.view == "raw")


@pytest.mark.triton
def test_identity_flags_are_logged_and_the_battle_is_excluded(acme, bob_client, triton_server):
    """The echo models repeat the prompt, so an identity question naming vendors reaches both flags."""
    Campaign.objects.filter(pk=acme.campaign.pk).update(allow_rater_prompts=True, min_decision_ms=0)
    for competitor, model in ((acme.left, "delay-fast"), (acme.right, "delay-slow")):
        competitor.endpoint = endpoint_for(acme, model=model, url=triton_server.grpc_url)
        competitor.save()
    bob_client.post(
        reverse("battles:next", args=[acme.campaign.pk]), {"prompt": "Who are you? Are you ChatGPT, made by OpenAI?"}
    )
    generation_worker_run()
    battle = Battle.objects.get()
    bob_client.get(reverse("battles:battle", args=[battle.pk]))
    bob_client.post(reverse("battles:vote", args=[battle.pk]), {"choice": "left"})
    vote = Vote.objects.get()
    assert vote.prompt_asks_identity is True and vote.answer_names_model is True
    overall = _overall(acme.campaign.pk)
    assert overall.excluded["identity_leak"] == 1 and overall.votes_used == 0

    Campaign.objects.filter(pk=acme.campaign.pk).update(exclude_identity_leaks=False)
    overall = _overall(acme.campaign.pk)
    assert overall.excluded["identity_leak"] == 0 and overall.votes_used == 1


@pytest.mark.triton
def test_an_ordinary_battle_has_no_identity_flags(acme, bob_client, triton_server):
    bob_client.post(reverse("battles:next", args=[acme.campaign.pk]))
    generation_worker_run()
    battle = Battle.objects.get()
    bob_client.get(reverse("battles:battle", args=[battle.pk]))
    bob_client.post(reverse("battles:vote", args=[battle.pk]), {"choice": "tie"})
    vote = Vote.objects.get()
    assert vote.prompt_asks_identity is False and vote.answer_names_model is False


def test_rules_come_from_the_campaign(acme, bob):
    prompts = list(Prompt.objects.filter(campaign=acme.campaign))[:2]
    other = UserFactory()
    votes_write(
        campaign=acme.campaign,
        pool=acme.pool,
        raters=[bob, other],
        prompts=prompts,
        competitors=[acme.left, acme.right],
        strengths=(1.0, 1.0),
        n=40,
        seed=3,
        decision_ms=5000,
    )
    Campaign.objects.filter(pk=acme.campaign.pk).update(min_decision_ms=5000)
    assert _overall(acme.campaign.pk).excluded["too_fast"] == 0  # exactly the minimum is not too fast
    Campaign.objects.filter(pk=acme.campaign.pk).update(min_decision_ms=5001)
    assert _overall(acme.campaign.pk).excluded["too_fast"] == 40
    Campaign.objects.filter(pk=acme.campaign.pk).update(min_decision_ms=0, rater_vote_cap=5)
    overall = _overall(acme.campaign.pk)
    assert overall.excluded["over_rater_cap"] == 30 and overall.policy["rater_vote_cap"] == 5
    Campaign.objects.filter(pk=acme.campaign.pk).update(rater_vote_cap=None, prompt_hash_cap=7)
    overall = _overall(acme.campaign.pk)
    assert overall.excluded["over_prompt_cap"] == 26 and overall.votes_used == 14


def test_decision_exactly_at_the_minimum_is_kept():
    votes = VoteArrays(
        vote_id=np.arange(3),
        left=np.zeros(3, dtype=np.int64),
        right=np.ones(3, dtype=np.int64),
        outcome=np.zeros(3, dtype=np.int64),
        decision_ms=np.array([999, 1000, 1001]),
        rater=np.arange(3),
        prompt=np.arange(3),
        category=np.zeros(3, dtype=np.int64),
        categories=("x",),
        identity=np.zeros(3, dtype=bool),
        style_left=np.zeros((3, 4)),
        style_right=np.zeros((3, 4)),
    )
    keep, counts = ExclusionPolicy(min_decision_ms=1000).apply(votes)
    assert keep.tolist() == [False, True, True] and counts["too_fast"] == 1
