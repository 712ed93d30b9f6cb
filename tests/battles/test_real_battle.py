"""A real battle between the two real small LLMs (SmolLM2-135M-Instruct in ChatML, Gemma 3 270M raw),
through the whole path a rater takes: the claim, the generation worker's job over the vLLM-backend
contract (the models are decoupled, so over the gRPC stream), the page, the vote and the reveal."""

from __future__ import annotations

import pytest
from django.urls import reverse

from battles.models import Battle, Campaign, Generation, Vote
from tests.conftest import endpoint_of, generation_worker_run, make_real_llm_tenant, start_battle

pytestmark = [pytest.mark.django_db, pytest.mark.triton, pytest.mark.real_llm]


def test_a_real_battle_between_real_models(alice, bob, bob_client, llm_triton_server):
    tenant = make_real_llm_tenant(owner=alice, rater=bob, server=llm_triton_server, name="Real")
    Campaign.objects.filter(pk=tenant.campaign.pk).update(max_tokens=24, min_decision_ms=0, max_turns=2)
    battle, page = start_battle(bob_client, tenant.campaign)
    assert battle.status == Battle.Status.READY, battle.void_reason
    html = page.content.decode()
    assert "smollm" not in html.lower() and "gemma" not in html.lower()  # blind until the vote
    generations = {g.side: g for g in Generation.objects.filter(battle=battle)}
    for generation in generations.values():
        # Sampled text: a short answer ("18000000000000000000000") is as real as a sentence, and so is one of
        # blank lines (Gemma 3 sampled twelve "\n " in CI once): the test asks for the text the model sent and
        # its tokens, not for words. What a blank answer shows the rater is tested in test_blank_answer.py.
        assert generation.text and generation.error == ""
        assert generation.finish_reason in {"stop", "length"} and 0 < generation.output_tokens <= 24
        # Asked for in one piece (a battle generated ahead): no first token timed, so none stored.
        assert generation.ttft_s is None and generation.latency_s > 0
    assert generations["left"].text != generations["right"].text
    # A second turn: each model continues its own conversation.
    assert (
        bob_client.post(reverse("battles:continue", args=[battle.pk]), {"text": "Shorter, please."}).status_code == 302
    )

    generation_worker_run()
    battle.refresh_from_db()
    assert battle.status == Battle.Status.READY, battle.void_reason
    for generation in Generation.objects.filter(battle=battle, turn=1):  # streamed: its first token is timed
        assert generation.ttft_s is not None and 0 < generation.ttft_s < generation.latency_s
    bob_client.get(reverse("battles:battle", args=[battle.pk]))
    assert bob_client.post(reverse("battles:vote", args=[battle.pk]), {"choice": "left"}).status_code == 302
    vote = Vote.objects.get(battle=battle)
    assert vote.turns is not None and len(vote.turns) == 2
    assert {vote.left_model, vote.right_model} == {endpoint_of(c).name for c in (tenant.left, tenant.right)}
    revealed = bob_client.get(reverse("battles:battle", args=[battle.pk])).content.decode()
    assert endpoint_of(tenant.left).name in revealed and endpoint_of(tenant.right).name in revealed
