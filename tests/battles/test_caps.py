"""Independence: session, per-rater and per-prompt-hash caps, rater prompts and their limits."""

from __future__ import annotations

import pytest
from django.urls import reverse

from battles.models import Battle, Campaign, Prompt, Vote
from battles.prompting import PROMPT_MAX_CHARS
from tests.conftest import generation_worker_run, start_battle

pytestmark = pytest.mark.django_db


def _vote_n(client, campaign, n):  # type: ignore[no-untyped-def]
    for _ in range(n):
        battle, _ = start_battle(client, campaign)
        assert client.post(reverse("battles:vote", args=[battle.pk]), {"choice": "tie"}).status_code == 302


@pytest.mark.triton
def test_session_cap_stops_with_a_clear_message_that_is_not_a_rate_limit(acme, bob_client, triton_server):
    Campaign.objects.filter(pk=acme.campaign.pk).update(session_cap=2)
    _vote_n(bob_client, acme.campaign, 2)
    response = bob_client.post(reverse("battles:next", args=[acme.campaign.pk]))
    assert response.status_code == 200  # the end of a stint, not an error; 429 is for rate limits
    body = response.content.decode()
    assert "2 battles in the last 12 hours" in body and "you can continue in 11" in body
    assert Battle.objects.count() == 2


@pytest.mark.triton
def test_the_session_cap_binds_the_rater_whatever_the_login(acme, bob, triton_server):
    from tests.conftest import login

    Campaign.objects.filter(pk=acme.campaign.pk).update(session_cap=2)
    _vote_n(login(bob), acme.campaign, 1)
    _vote_n(login(bob), acme.campaign, 1)  # another login: the same rater, the same window
    again = login(bob)  # logged out and in again: still capped
    response = again.post(reverse("battles:next", args=[acme.campaign.pk]))
    assert response.status_code == 200 and "2 battles in the last 12 hours" in response.content.decode()
    assert Vote.objects.count() == 2 and Battle.objects.count() == 2
    page = again.get(reverse("battles:campaign", args=[acme.campaign.pk])).content.decode()
    assert "2 of 2 battles in the last 12 hours" in page and 'id="cap-reached"' in page


@pytest.mark.triton
def test_battles_older_than_the_session_window_no_longer_count(acme, bob, bob_client, triton_server):
    from datetime import timedelta

    from django.utils import timezone

    Campaign.objects.filter(pk=acme.campaign.pk).update(session_cap=2, session_window_h=6)
    _vote_n(bob_client, acme.campaign, 2)
    assert bob_client.post(reverse("battles:next", args=[acme.campaign.pk])).status_code == 200  # capped
    # The first battle was taken 6 hours and a minute ago: it has left the window, one battle is free.
    first = Battle.objects.order_by("claimed_at").first()
    assert first is not None
    Battle.objects.filter(pk=first.pk).update(claimed_at=timezone.now() - timedelta(hours=6, minutes=1))
    battle, page = start_battle(bob_client, acme.campaign)
    assert battle.pk != first.pk and "Battle 2 of 2 in the last 6 hours" in page.content.decode()
    assert Battle.objects.count() == 3


@pytest.mark.triton
def test_rater_vote_cap(acme, bob, bob_client, triton_server):
    from tests.conftest import login

    Campaign.objects.filter(pk=acme.campaign.pk).update(rater_vote_cap=2)
    _vote_n(bob_client, acme.campaign, 2)
    response = login(bob).post(reverse("battles:next", args=[acme.campaign.pk]))
    assert response.status_code == 200
    assert "2 votes in this campaign" in response.content.decode()


@pytest.mark.triton
def test_prompt_hash_cap_skips_full_prompts(acme, bob_client, triton_server):
    Prompt.objects.filter(campaign=acme.campaign).exclude(
        pk=Prompt.objects.filter(campaign=acme.campaign).order_by("id")[0].pk
    ).delete()
    # A second pool prompt with the same normalised text shares the hash and so the cap.
    only = Prompt.objects.get(campaign=acme.campaign)
    Prompt.objects.create(
        organization=acme.organization,
        campaign=acme.campaign,
        text="  " + only.text.upper() + "\n",
        text_hash=only.text_hash,
    )
    Campaign.objects.filter(pk=acme.campaign.pk).update(prompt_hash_cap=1)
    _vote_n(bob_client, acme.campaign, 1)
    response = bob_client.post(reverse("battles:next", args=[acme.campaign.pk]))
    assert response.status_code == 409
    assert "no more prompts" in response.content.decode()


@pytest.mark.triton
def test_rater_prompt_is_hashed_classified_and_used(acme, bob, bob_client, triton_server):
    Campaign.objects.filter(pk=acme.campaign.pk).update(allow_rater_prompts=True)
    response = bob_client.post(
        reverse("battles:next", args=[acme.campaign.pk]), {"prompt": "Write a Python function that sorts a list."}
    )
    assert response.status_code == 302
    battle = Battle.objects.get()
    assert battle.prompt.source == Prompt.Source.RATER and battle.prompt.author == bob
    assert battle.prompt.category == "coding" and battle.prompt.language == "en"
    assert len(battle.prompt.text_hash) == 64


def test_rater_prompt_refused_where_campaign_does_not_allow_it(acme, bob_client):
    response = bob_client.post(reverse("battles:next", args=[acme.campaign.pk]), {"prompt": "hello"})
    assert response.status_code == 403
    assert "does not accept prompts typed by raters" in response.content.decode()
    assert not Battle.objects.exists()


def test_prompt_over_the_size_limit_is_refused(acme, bob_client):
    Campaign.objects.filter(pk=acme.campaign.pk).update(allow_rater_prompts=True)
    response = bob_client.post(
        reverse("battles:next", args=[acme.campaign.pk]), {"prompt": "x" * (PROMPT_MAX_CHARS + 1)}
    )
    assert response.status_code == 400
    assert str(PROMPT_MAX_CHARS) in response.content.decode()
    assert not Battle.objects.exists() and not Prompt.objects.filter(source="rater").exists()


def test_empty_rater_prompt_is_refused(acme, bob_client):
    Campaign.objects.filter(pk=acme.campaign.pk).update(allow_rater_prompts=True)
    response = bob_client.post(reverse("battles:next", args=[acme.campaign.pk]), {"prompt": "   \n "})
    assert response.status_code == 400
    assert not Battle.objects.exists()


@pytest.mark.triton
def test_rate_limit_answers_429(acme, bob_client, settings, triton_server):
    from django.core.cache import cache

    cache.clear()
    settings.RATELIMIT_ENABLE = True
    settings.ARENA_VOTE_RATE = "4/h"  # an hour-long window: the test cannot straddle a reset
    limit = 4
    battle, _ = start_battle(bob_client, acme.campaign)
    vote_url = reverse("battles:vote", args=[battle.pk])
    codes = [bob_client.post(vote_url, {"choice": "nonsense"}).status_code for _ in range(limit + 1)]
    assert codes[:limit] == [400] * limit
    assert codes[-1] == 429
    cache.clear()


@pytest.mark.triton
def test_voided_battles_do_not_use_up_prompts(acme, bob_client, triton_server):
    from tests.conftest import endpoint_for

    Prompt.objects.filter(campaign=acme.campaign).exclude(
        pk=Prompt.objects.filter(campaign=acme.campaign).order_by("id")[0].pk
    ).delete()
    good_endpoint = acme.right.endpoint
    acme.right.endpoint = endpoint_for(acme, model="failing", url=triton_server.grpc_url)
    acme.right.save()
    for _ in range(3):
        voided, _ = start_battle(bob_client, acme.campaign)
        assert voided.status == Battle.Status.VOID
    acme.right.endpoint = good_endpoint
    acme.right.save()
    battle, _ = start_battle(bob_client, acme.campaign)  # the one prompt is still there for bob
    assert battle.status == Battle.Status.READY


@pytest.mark.triton
def test_a_duplicate_prompt_in_the_pool_is_not_shown_twice_to_one_rater(acme, bob_client, triton_server):
    first = Prompt.objects.filter(campaign=acme.campaign).order_by("id")[0]
    Prompt.objects.filter(campaign=acme.campaign).exclude(pk=first.pk).delete()
    Prompt.objects.create(
        organization=acme.organization,
        campaign=acme.campaign,
        text=first.text.upper() + "  ",
        text_hash=first.text_hash,
    )
    _vote_n(bob_client, acme.campaign, 1)
    response = bob_client.post(reverse("battles:next", args=[acme.campaign.pk]))
    assert response.status_code == 409 and "no more prompts" in response.content.decode()


@pytest.mark.triton
def test_prompt_hash_cap_applies_across_raters(acme, bob_client, triton_server):
    from tests.conftest import login
    from tests.factories import MembershipFactory, UserFactory

    only = Prompt.objects.filter(campaign=acme.campaign).order_by("id")[0]
    Prompt.objects.filter(campaign=acme.campaign).exclude(pk=only.pk).delete()
    Campaign.objects.filter(pk=acme.campaign.pk).update(prompt_hash_cap=1)
    _vote_n(bob_client, acme.campaign, 1)
    other = UserFactory.create()
    MembershipFactory(user=other, organization=acme.organization, role="rater")
    acme.pool.members.add(other)
    response = login(other).post(reverse("battles:next", args=[acme.campaign.pk]))
    assert response.status_code == 409 and "no more prompts" in response.content.decode()


@pytest.mark.triton
def test_rater_typed_prompt_over_the_hash_cap_is_refused(acme, bob_client, triton_server):
    Campaign.objects.filter(pk=acme.campaign.pk).update(allow_rater_prompts=True, prompt_hash_cap=1)
    next_url = reverse("battles:next", args=[acme.campaign.pk])
    assert bob_client.post(next_url, {"prompt": "What is a monad?"}).status_code == 302
    generation_worker_run()
    battle = Battle.objects.get()
    bob_client.get(reverse("battles:battle", args=[battle.pk]))
    assert bob_client.post(reverse("battles:vote", args=[battle.pk]), {"choice": "tie"}).status_code == 302
    response = bob_client.post(next_url, {"prompt": "  what is a MONAD?"})
    assert response.status_code == 409 and "rated as often as the campaign allows" in response.content.decode()
    assert Battle.objects.count() == 1


@pytest.mark.triton
def test_next_battle_is_rate_limited(acme, bob_client, settings, triton_server):
    from django.core.cache import cache

    cache.clear()
    settings.RATELIMIT_ENABLE = True
    settings.ARENA_BATTLE_RATE = "3/h"
    codes = [bob_client.post(reverse("battles:next", args=[acme.campaign.pk])).status_code for _ in range(4)]
    assert codes[:3] == [302, 302, 302] and codes[3] == 429
    cache.clear()
