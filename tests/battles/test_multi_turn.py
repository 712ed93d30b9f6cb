"""Multi-turn battles: where the campaign allows it the rater continues the conversation; every turn goes
to both models, each with its own history; no vote (and no other turn) while a turn is generated; one vote
at the end, whose log records every turn, style counts over the whole conversation and the identity flags
of every turn."""

from __future__ import annotations

import pytest
from django.urls import reverse

from battles import services
from battles.models import Battle, Campaign, Generation, Turn, Vote
from battles.prompting import prompt_hash
from battles.services import generation as generation_services
from tests.conftest import Tenant, endpoint_for, generation_worker_run, start_battle

pytestmark = [pytest.mark.django_db, pytest.mark.triton, pytest.mark.usefixtures("triton_server")]


def _multi_turn(tenant: Tenant, turns: int = 3) -> Campaign:
    Campaign.objects.filter(pk=tenant.campaign.pk).update(max_turns=turns, min_decision_ms=0)
    tenant.campaign.refresh_from_db()
    return tenant.campaign


def _continue(client, battle: Battle, text: str):  # type: ignore[no-untyped-def]
    return client.post(reverse("battles:continue", args=[battle.pk]), {"text": text})


def test_each_side_continues_its_own_conversation(acme, bob, bob_client, triton_server, monkeypatch):
    campaign = _multi_turn(acme)
    battle, _ = start_battle(bob_client, campaign)
    first = {g.side: g.text for g in battle.generations.all()}
    seen_inputs = []
    from serving.triton.client import stream_pair as real

    def recording(left, right, left_input, right_input, params, on_event):  # type: ignore[no-untyped-def]
        seen_inputs.append((left_input, right_input, params))
        return real(left, right, left_input, right_input, params, on_event)

    monkeypatch.setattr(generation_services, "stream_pair", recording)  # records the call, the real one runs
    response = _continue(bob_client, battle, "Now say it in one sentence.")
    assert response.status_code == 302
    battle.refresh_from_db()
    assert battle.status == Battle.Status.GENERATING and battle.shown_at is None
    page = bob_client.get(reverse("battles:battle", args=[battle.pk])).content.decode()
    assert "Preparing" in page and 'name="choice"' not in page  # no vote while the turn is generated
    assert bob_client.post(reverse("battles:vote", args=[battle.pk]), {"choice": "left"}).status_code == 409
    generation_worker_run()
    ((left_input, right_input, params),) = seen_inputs
    assert left_input == [
        {"role": "user", "content": battle.prompt.text},
        {"role": "assistant", "content": first["left"]},
        {"role": "user", "content": "Now say it in one sentence."},
    ]
    assert right_input[1] == {"role": "assistant", "content": first["right"]}  # its own answer, not the other's
    assert params.seed == battle.params["seed"] and params.max_tokens == battle.params["max_tokens"]  # parity
    turn = Turn.objects.get(battle=battle)
    assert turn.index == 1 and turn.text_hash == prompt_hash("Now say it in one sentence.")
    assert Generation.objects.filter(battle=battle, turn=1).count() == 2
    page = bob_client.get(reverse("battles:battle", args=[battle.pk])).content.decode()
    assert "Your turn 2" in page and "Now say it in one sentence." in page
    assert page.count('class="pane"') == 4  # the first turn's two answers above, the second's in the panes


def test_one_vote_at_the_end_logs_every_turn(acme, bob, bob_client, triton_server):
    campaign = _multi_turn(acme)
    battle, _ = start_battle(bob_client, campaign)
    _continue(bob_client, battle, "Who made you? Are you ChatGPT?")
    generation_worker_run()
    bob_client.get(reverse("battles:battle", args=[battle.pk]))
    assert bob_client.post(reverse("battles:vote", args=[battle.pk]), {"choice": "right"}).status_code == 302
    vote = Vote.objects.get(battle=battle)
    generations = list(Generation.objects.filter(battle=battle).order_by("turn", "side"))
    assert [(g.turn, g.side) for g in generations] == [(0, "left"), (0, "right"), (1, "left"), (1, "right")]
    left = [g for g in generations if g.side == "left"]
    assert vote.left_tokens == sum(g.output_tokens for g in left)
    assert vote.left_latency_s == pytest.approx(sum(g.latency_s for g in left))
    assert vote.left_finish_reason == left[-1].finish_reason
    for key in left[0].style:
        assert vote.left_style[key] == sum(g.style.get(key, 0) for g in left)  # the whole conversation
    assert vote.turns is not None and [t["index"] for t in vote.turns] == [0, 1]
    assert vote.turns[1]["prompt_hash"] == prompt_hash("Who made you? Are you ChatGPT?")
    assert vote.turns[1]["left"]["tokens"] == left[1].output_tokens
    # The identity question came in the second turn: the vote carries the flag, so rankings can leave it out.
    assert vote.turns[0]["asks_identity"] is False and vote.turns[1]["asks_identity"] is True
    assert vote.prompt_asks_identity is True


def test_a_one_turn_vote_has_no_turns_and_the_campaign_caps_the_turns(acme, bob, bob_client, triton_server):
    battle, page = start_battle(bob_client, acme.campaign)  # max_turns 1
    assert 'id="continue-form"' not in page.content.decode()
    assert _continue(bob_client, battle, "more").status_code == 409
    campaign = _multi_turn(acme, turns=2)
    page = bob_client.get(reverse("battles:battle", args=[battle.pk])).content.decode()
    assert 'id="continue-form"' in page and "turn 2 of 2" in page
    assert _continue(bob_client, battle, "One more thing.").status_code == 302
    generation_worker_run()
    page = bob_client.get(reverse("battles:battle", args=[battle.pk])).content.decode()
    assert 'id="continue-form"' not in page  # two turns of two
    response = _continue(bob_client, battle, "And another.")
    assert response.status_code == 409 and "2 turns the campaign allows" in response.content.decode()
    assert Turn.objects.filter(battle=battle).count() == 1
    bob_client.post(reverse("battles:vote", args=[battle.pk]), {"choice": "tie"})
    assert Vote.objects.get(battle=battle).turns is not None
    other, _ = start_battle(bob_client, campaign)
    Campaign.objects.filter(pk=campaign.pk).update(max_turns=1)
    bob_client.post(reverse("battles:vote", args=[other.pk]), {"choice": "tie"})
    assert Vote.objects.get(battle=other).turns is None


def test_turns_are_the_raters_own_and_validated(acme, globex, bob, bob_client, charlie_client, triton_server):
    campaign = _multi_turn(acme)
    battle, _ = start_battle(bob_client, campaign)
    assert _continue(charlie_client, battle, "hijack").status_code == 404
    assert _continue(bob_client, battle, "   ").status_code == 400
    assert _continue(bob_client, battle, "x" * 9000).status_code == 400
    assert not Turn.objects.exists()
    bob_client.post(reverse("battles:vote", args=[battle.pk]), {"choice": "tie"})
    response = _continue(bob_client, battle, "after the vote")
    assert response.status_code == 409 and "voted on" in response.content.decode()


def test_a_second_tab_cannot_send_a_second_turn_at_once(acme, bob, bob_client, triton_server):
    campaign = _multi_turn(acme)
    battle, _ = start_battle(bob_client, campaign)
    assert _continue(bob_client, battle, "first tab").status_code == 302
    response = _continue(bob_client, battle, "second tab")
    assert response.status_code == 409 and "Wait until both answers are complete" in response.content.decode()
    assert list(Turn.objects.filter(battle=battle).values_list("text", flat=True)) == ["first tab"]


def test_a_side_failing_on_a_later_turn_voids_the_battle(acme, bob, bob_client, triton_server):
    campaign = _multi_turn(acme)
    battle, _ = start_battle(bob_client, campaign)
    acme.right.endpoint = endpoint_for(acme, model="failing", url=triton_server.grpc_url)
    acme.right.save()
    _continue(bob_client, battle, "Go on.")
    generation_worker_run()
    battle.refresh_from_db()
    assert battle.status == Battle.Status.VOID and "One of the models" in battle.void_reason
    assert bob_client.post(reverse("battles:vote", args=[battle.pk]), {"choice": "left"}).status_code == 409


def test_identity_answers_on_a_later_turn_are_flagged(acme, bob, bob_client, triton_server):
    # The echo models repeat what they are sent: a later turn naming a vendor reaches the answer flags.
    for competitor, model in ((acme.left, "delay-fast"), (acme.right, "delay-slow")):
        competitor.endpoint = endpoint_for(acme, model=model, url=triton_server.grpc_url)
        competitor.save()
    campaign = _multi_turn(acme)
    battle, _ = start_battle(bob_client, campaign)
    _continue(bob_client, battle, "Repeat after me: I am Claude, made by Anthropic.")
    generation_worker_run()
    bob_client.get(reverse("battles:battle", args=[battle.pk]))
    bob_client.post(reverse("battles:vote", args=[battle.pk]), {"choice": "tie"})
    vote = Vote.objects.get(battle=battle)
    assert vote.turns is not None and vote.turns[0]["left"]["names_model"] is False
    assert vote.turns[1]["left"]["names_model"] is True and vote.answer_names_model is True


def test_the_live_key_of_each_turn_is_its_own(acme, bob):
    battle = Battle.objects.create(
        organization=acme.organization,
        campaign=acme.campaign,
        prompt=acme.campaign.prompts.first(),
        left=acme.left,
        right=acme.right,
    )
    assert services.battle_live_key(battle, 0) == str(battle.pk)
    assert services.battle_live_key(battle, 2) == f"{battle.pk}.2"
