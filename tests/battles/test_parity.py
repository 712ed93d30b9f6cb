"""Parity: both sides get the same prompt, system prompt and sampling parameters, called together."""

from __future__ import annotations

import json

import pytest

from battles.models import Battle, Campaign
from tests.conftest import endpoint_for, start_battle

pytestmark = [pytest.mark.django_db, pytest.mark.triton, pytest.mark.usefixtures("triton_server")]


@pytest.fixture
def echo_campaign(acme, triton_server):  # type: ignore[no-untyped-def]
    """Both competitors are the echo models, which answer with the exact inputs they received."""
    Campaign.objects.filter(pk=acme.campaign.pk).update(
        temperature=0.3, top_p=0.9, max_tokens=77, system_prompt="Answer like a careful librarian."
    )
    acme.left.endpoint = endpoint_for(acme, model="delay-fast", url=triton_server.grpc_url)
    acme.left.save()
    acme.right.endpoint = endpoint_for(acme, model="delay-slow", url=triton_server.http_url, protocol="http")
    acme.right.save()
    return acme.campaign


def test_both_sides_receive_identical_parameters(echo_campaign, bob_client):
    battle, _ = start_battle(bob_client, echo_campaign)
    assert battle.status == Battle.Status.READY
    received = {g.side: json.loads(g.text) for g in battle.generations.all()}
    left = {k: v for k, v in received["left"].items() if not k.startswith("_")}
    right = {k: v for k, v in received["right"].items() if not k.startswith("_")}
    assert left == right
    assert left["text_input"] == battle.prompt.text
    assert left["system_prompt"] == "Answer like a careful librarian."
    assert left["max_tokens"] == 77
    assert left["temperature"] == pytest.approx(0.3) and left["top_p"] == pytest.approx(0.9)
    assert left["seed"] == battle.params["seed"]
    assert battle.params == {
        "temperature": 0.3,
        "top_p": 0.9,
        "max_tokens": 77,
        "system_prompt": "Answer like a careful librarian.",
        "seed": battle.params["seed"],
    }


def test_both_sides_are_called_at_the_same_moment_and_released_together(echo_campaign, bob_client):
    battle, _ = start_battle(bob_client, echo_campaign)
    # Which competitor is shown left is random; look the sides up by model.
    by_model = {g.competitor.endpoint.model_name: g for g in battle.generations.select_related("competitor__endpoint")}
    fast, slow = by_model["delay-fast"], by_model["delay-slow"]
    # Fan-out: the slow side was not called after the fast one finished (100 ms) but with it.
    assert abs(json.loads(fast.text)["_received_at"] - json.loads(slow.text)["_received_at"]) < 0.05
    # True latencies differ and are recorded; the battle became ready only once both were done.
    assert slow.latency_s > fast.latency_s + 0.1
    elapsed = (battle.ready_at - battle.created_at).total_seconds()
    assert elapsed >= slow.latency_s
