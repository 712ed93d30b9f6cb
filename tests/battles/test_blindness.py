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
