"""Blindness: nothing that identifies a model reaches the rater before the vote is stored."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from tests.conftest import start_battle

pytestmark = [pytest.mark.django_db, pytest.mark.triton, pytest.mark.usefixtures("triton_server")]


def _identity_strings(battle):  # type: ignore[no-untyped-def]
    strings = set()
    for competitor in (battle.left, battle.right):
        strings |= {
            competitor.endpoint.name,
            competitor.endpoint.model_name,
            competitor.version_label,
            competitor.endpoint.url,
        }
    return strings


def test_battle_page_before_vote_has_no_names_versions_or_latency(acme, bob_client):
    battle, page = start_battle(bob_client, acme.campaign)
    html = page.content.decode()
    for secret in _identity_strings(battle):
        assert secret not in html, f"{secret!r} leaked before the vote"
    for generation in battle.generations.all():
        assert f"{generation.latency_s:.2f}" not in html
        assert f"{generation.latency_s}" not in html
    assert not re.search(r"\d+(\.\d+)?\s*s\b\s*·", html)  # no timing line
    assert "Answer A" in html and "Answer B" in html


def test_both_panes_are_rendered_by_the_same_markup(acme, bob_client):
    _, page = start_battle(bob_client, acme.campaign)
    html = page.content.decode()
    panes = re.findall(
        r'<article class="pane" id="pane-([AB])">\s*<h2 class="pane-label">Answer \1</h2>\s*'
        r'<div class="md">',
        html,
    )
    assert panes == ["A", "B"]


def test_names_are_revealed_only_after_the_vote(acme, bob_client):
    battle, _ = start_battle(bob_client, acme.campaign)
    bob_client.post(reverse("battles:vote", args=[battle.pk]), {"choice": "left"})
    html = bob_client.get(reverse("battles:battle", args=[battle.pk])).content.decode()
    a = html.index('id="pane-A"')
    b = html.index('id="pane-B"')
    assert battle.left.endpoint.name in html[a:b]
    assert battle.right.endpoint.name in html[b:]
    assert "You voted" in html


def test_no_page_caching_of_the_blind_battle(acme, bob_client):
    _, page = start_battle(bob_client, acme.campaign)
    assert page["Cache-Control"] == "no-store"


@pytest.mark.django_db(transaction=True)
def test_a_streamed_battle_sends_only_text_before_the_vote(acme, bob, bob_client):
    """The live path (rater-typed prompts): the battle page while it streams and every server-sent
    event carry the panes' text and nothing else: no timing, no token counts, no names."""
    import threading

    from battles.models import Generation
    from tests.battles.test_streaming import _run_task, live_battle, read_stream

    battle = live_battle(acme, bob)
    page = bob_client.get(reverse("battles:battle", args=[battle.pk])).content.decode()
    worker = threading.Thread(target=_run_task(battle), daemon=True)
    worker.start()
    stream = read_stream(bob, battle)
    worker.join(30)
    assert [event for event, _, _ in stream.events][-1] == "complete"
    for event, data, _ in stream.events:
        assert set(data) <= {"a", "b", "reset"}, (event, data)
    generations = list(Generation.objects.filter(battle=battle))
    # The shipped models answer in one piece: no first token to time (null), tokens per second measured.
    assert len(generations) == 2 and all(g.ttft_s is None and g.tokens_per_s for g in generations)
    for body in (stream.raw, page):
        for secret in _identity_strings(battle):
            assert secret not in body, f"{secret!r} leaked before the vote"
        for word in ("ttft", "latency", "tokens_per", "tokens/s", "output_tokens", "finish_reason"):
            assert word not in body.lower(), word
        for generation in generations:
            for value in (generation.latency_s, generation.tokens_per_s):
                assert value is not None and f"{value:.2f}" not in body and f"{value:.3f}" not in body
    assert "id:" not in stream.raw  # no frame numbers either (a count of ticks is a clock)
