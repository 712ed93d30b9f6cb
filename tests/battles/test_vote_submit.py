"""The vote: four choices, one per battle, measured decision time, and every refusal changes nothing."""

from __future__ import annotations

import pytest
from django.urls import reverse

from battles.models import Battle, Campaign, Choice, Vote
from battles.services import campaign_close
from tests.conftest import start_battle

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("choice", Choice.values)
@pytest.mark.triton
def test_each_choice_is_stored_with_the_full_event(acme, bob, bob_client, choice, triton_server):
    battle, _ = start_battle(bob_client, acme.campaign)
    response = bob_client.post(reverse("battles:vote", args=[battle.pk]), {"choice": choice})
    assert response.status_code == 302
    vote = Vote.objects.get(battle=battle)
    assert vote.choice == choice
    battle.refresh_from_db()
    assert battle.status == Battle.Status.VOTED
    event = vote.as_event()
    assert event["vote"] == choice
    assert event["rater_id"] == bob.pk and event["pool_id"] == acme.pool.pk
    assert event["prompt"]["hash"] == battle.prompt.text_hash and len(event["prompt"]["hash"]) == 64
    generations = {g.side: g for g in battle.generations.all()}
    for side, competitor in (("left", battle.left), ("right", battle.right)):
        assert event[side]["model"] == competitor.endpoint.name
        assert event[side]["version"] == competitor.version_label
        assert event[side]["output_tokens"] == generations[side].output_tokens > 0
        assert event[side]["finish_reason"] in {"stop", "length"}
        assert event[side]["latency_s"] == pytest.approx(generations[side].latency_s) and event[side]["latency_s"] > 0
        assert set(event[side]["style"]) >= {"tokens", "headers", "list_items", "bold", "code_blocks"}
    assert event["params"]["max_tokens"] == acme.campaign.max_tokens
    assert event["params"]["temperature"] == acme.campaign.temperature
    assert isinstance(event["params"]["seed"], int)
    assert event["decision_ms"] >= 0


@pytest.mark.triton
def test_decision_time_is_measured_by_the_server_from_shown_to_received(acme, bob_client, triton_server):
    from datetime import timedelta

    battle, _ = start_battle(bob_client, acme.campaign)
    # Pretend the answers were shown 7.5 s ago: the server, not the browser, measures decision time.
    Battle.objects.filter(pk=battle.pk).update(shown_at=battle.shown_at - timedelta(milliseconds=7500))
    bob_client.post(reverse("battles:vote", args=[battle.pk]), {"choice": "tie", "decision_ms": "1"})
    assert 7500 <= Vote.objects.get(battle=battle).decision_ms < 20000


@pytest.mark.triton
def test_second_vote_from_another_tab_is_refused_and_first_stands(acme, bob_client, triton_server):
    battle, _ = start_battle(bob_client, acme.campaign)
    assert bob_client.post(reverse("battles:vote", args=[battle.pk]), {"choice": "left"}).status_code == 302
    second = bob_client.post(reverse("battles:vote", args=[battle.pk]), {"choice": "right"})
    assert second.status_code == 409
    assert "already been voted" in second.content.decode()
    assert list(Vote.objects.filter(battle=battle).values_list("choice", flat=True)) == ["left"]


@pytest.mark.triton
def test_unknown_choice_is_refused_and_battle_stays_open(acme, bob_client, triton_server):
    battle, _ = start_battle(bob_client, acme.campaign)
    response = bob_client.post(reverse("battles:vote", args=[battle.pk]), {"choice": "left_much_better"})
    assert response.status_code == 400
    assert "Unknown choice" in response.content.decode()
    assert not Vote.objects.exists()
    battle.refresh_from_db()
    assert battle.status == Battle.Status.READY
    assert bob_client.post(reverse("battles:vote", args=[battle.pk]), {"choice": "right"}).status_code == 302


@pytest.mark.triton
def test_vote_on_another_raters_battle_is_not_found(acme, bob_client, alice, alice_client, triton_server):
    acme.pool.members.add(alice)
    battle, _ = start_battle(bob_client, acme.campaign)
    response = alice_client.post(reverse("battles:vote", args=[battle.pk]), {"choice": "left"})
    assert response.status_code == 404
    assert not Vote.objects.exists()
    assert alice_client.get(reverse("battles:battle", args=[battle.pk])).status_code == 404


@pytest.mark.triton
def test_vote_on_closed_campaign_is_refused(acme, bob_client, triton_server):
    battle, _ = start_battle(bob_client, acme.campaign)
    campaign_close(campaign=acme.campaign, actor=None)
    response = bob_client.post(reverse("battles:vote", args=[battle.pk]), {"choice": "left"})
    assert response.status_code == 409
    assert "campaign was closed" in response.content.decode()
    assert not Vote.objects.exists()


@pytest.mark.triton
def test_vote_is_refused_once_the_campaign_is_no_longer_open_even_if_the_battle_is(acme, bob_client, triton_server):
    # Belt and braces: even a battle left READY (a status changed outside the service) takes no vote.
    battle, _ = start_battle(bob_client, acme.campaign)
    Campaign.objects.filter(pk=acme.campaign.pk).update(status=Campaign.Status.CLOSED)
    response = bob_client.post(reverse("battles:vote", args=[battle.pk]), {"choice": "left"})
    assert response.status_code == 409 and "campaign is closed" in response.content.decode()
    assert not Vote.objects.exists()


@pytest.mark.triton
def test_vote_before_the_battle_was_shown_is_refused(acme, bob_client, triton_server):
    bob_client.post(reverse("battles:next", args=[acme.campaign.pk]))
    battle = Battle.objects.get()
    assert battle.shown_at is None
    response = bob_client.post(reverse("battles:vote", args=[battle.pk]), {"choice": "left"})
    assert response.status_code == 409
    assert not Vote.objects.exists()


@pytest.mark.triton
def test_reload_shows_the_same_battle_instead_of_regenerating(acme, bob_client, triton_server):
    first, page1 = start_battle(bob_client, acme.campaign)
    second, page2 = start_battle(bob_client, acme.campaign)
    assert first.pk == second.pk
    assert Battle.objects.count() == 1

    def panes(page):  # type: ignore[no-untyped-def]
        html = page.content.decode()
        return html[html.index('<div class="panes">') : html.index("<form")]

    assert panes(page1) == panes(page2)


@pytest.mark.triton
def test_next_battle_after_a_vote_is_a_new_one(acme, bob_client, triton_server):
    first, _ = start_battle(bob_client, acme.campaign)
    bob_client.post(reverse("battles:vote", args=[first.pk]), {"choice": "tie"})
    second, _ = start_battle(bob_client, acme.campaign)
    assert second.pk != first.pk
    assert second.prompt_id != first.prompt_id  # a rater is not shown the same prompt twice


def test_closed_campaign_gives_no_new_battles(acme, bob_client):
    Campaign.objects.filter(pk=acme.campaign.pk).update(status=Campaign.Status.CLOSED)
    assert bob_client.post(reverse("battles:next", args=[acme.campaign.pk])).status_code == 404
    assert not Battle.objects.exists()


@pytest.mark.triton
def test_a_competitor_with_battles_cannot_change_model_or_version(acme, bob_client, triton_server):
    from battles.services import competitor_save
    from core.errors import Conflict

    start_battle(bob_client, acme.campaign)
    acme.left.version_label = "2027-01"
    with pytest.raises(Conflict, match="new competitor"):
        competitor_save(competitor=acme.left, actor=None, changed=["version_label"])
    acme.left.refresh_from_db()
    assert acme.left.version_label == "2026-11"
    acme.left.active = False  # switching it off is fine
    competitor_save(competitor=acme.left, actor=None, changed=["active"])


@pytest.mark.triton
def test_withdrawing_a_competitor_voids_its_open_battles(acme, bob_client, triton_server):
    from battles.services import competitor_save

    battle, _ = start_battle(bob_client, acme.campaign)
    acme.left.active = False
    competitor_save(competitor=acme.left, actor=None, changed=["active"])
    battle.refresh_from_db()
    assert battle.status == Battle.Status.VOID
    assert bob_client.post(reverse("battles:vote", args=[battle.pk]), {"choice": "left"}).status_code == 409
    assert not Vote.objects.exists()


@pytest.mark.triton
def test_closing_a_campaign_voids_its_open_battles(acme, bob_client, triton_server):
    battle, _ = start_battle(bob_client, acme.campaign)
    campaign_close(campaign=acme.campaign, actor=None)
    battle.refresh_from_db()
    assert battle.status == Battle.Status.VOID and "closed" in battle.void_reason


def test_changing_the_ranking_policy_schedules_a_recompute(acme, django_capture_on_commit_callbacks, monkeypatch):
    from battles.services import campaign_save

    scheduled: list[int] = []
    monkeypatch.setattr("ranking.services.leaderboards_schedule", lambda campaign_id: scheduled.append(campaign_id))
    acme.campaign.min_decision_ms = 4000
    with django_capture_on_commit_callbacks(execute=True):
        campaign_save(campaign=acme.campaign, actor=None, changed=["min_decision_ms"])
    assert scheduled == [acme.campaign.pk]
    with django_capture_on_commit_callbacks(execute=True):
        campaign_save(campaign=acme.campaign, actor=None, changed=["description"])
    assert scheduled == [acme.campaign.pk]
