"""A side that fails, times out or returns garbage voids the battle; no vote can be cast on it."""

from __future__ import annotations

import pytest
from django.urls import reverse

from battles.models import Battle, Generation, Vote
from tests.conftest import endpoint_for, start_battle

pytestmark = [pytest.mark.django_db, pytest.mark.triton, pytest.mark.usefixtures("triton_server")]


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


REASONS = {
    "timeout": "did not answer in time",
    "failing": "failed with an error",
    "broken": "returned a malformed answer",
    "server_down": "could not be reached",
    "unknown_model": "is not being served",
}


@pytest.mark.parametrize("case", sorted(REASONS))
def test_failed_side_voids_the_battle_with_a_clear_message(acme, bob_client, triton_server, case):
    model, url, timeout = {
        "timeout": ("sleepy", triton_server.grpc_url, 1.0),
        "failing": ("failing", triton_server.grpc_url, 20.0),
        "broken": ("broken", triton_server.grpc_url, 20.0),
        "server_down": ("zen-bigram", f"127.0.0.1:{_free_port()}", 5.0),
        "unknown_model": ("no-such-model", triton_server.grpc_url, 20.0),
    }[case]
    acme.right.endpoint = endpoint_for(acme, model=model, url=url, timeout_s=timeout)
    acme.right.save()
    battle, page = start_battle(bob_client, acme.campaign)
    assert battle.status == Battle.Status.VOID
    html = page.content.decode()
    assert "This battle was voided" in html and REASONS[case] in html
    # Blind even when void: neither model, endpoint nor server address appears, nor which side failed.
    for competitor in (acme.left, acme.right):
        for secret in (competitor.endpoint.name, competitor.endpoint.model_name, competitor.endpoint.url):
            assert secret not in html
    assert "left" not in battle.void_reason and "right" not in battle.void_reason
    failed = Generation.objects.get(battle=battle, competitor=acme.right)
    assert model in failed.error  # the full reason is kept for managers
    assert 'name="choice"' not in html  # no vote buttons
    # The working side's answer is not shown either: a voided battle reveals nothing.
    good = Generation.objects.get(battle=battle, competitor=acme.left)
    # (A stretch of the answer that is not also part of the prompt, which the page does show: the n-gram
    # models often begin by echoing it.)
    own = [good.text[i : i + 30] for i in range(0, max(len(good.text) - 30, 1))]
    own = [piece for piece in own if piece not in battle.prompt.text]
    assert own and all(piece not in html for piece in own)
    response = bob_client.post(reverse("battles:vote", args=[battle.pk]), {"choice": "left"})
    assert response.status_code == 409 and "voided" in response.content.decode()
    assert not Vote.objects.exists()


def test_after_a_void_the_rater_gets_a_fresh_battle(acme, bob_client, triton_server):
    acme.right.endpoint = endpoint_for(acme, model="failing", url=triton_server.grpc_url)
    acme.right.save()
    first, _ = start_battle(bob_client, acme.campaign)
    assert first.status == Battle.Status.VOID
    acme.right.endpoint = endpoint_for(acme, model="stdlib-trigram", url=triton_server.grpc_url)
    acme.right.save()
    second, _ = start_battle(bob_client, acme.campaign)
    assert second.pk != first.pk and second.status == Battle.Status.READY
