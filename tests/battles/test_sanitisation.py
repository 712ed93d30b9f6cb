"""Prompts and answers are untrusted: no script or raw HTML survives to the rater's page."""

from __future__ import annotations

import pytest
from django.urls import reverse

from battles.models import Campaign
from tests.conftest import endpoint_for, generation_worker_run, start_battle
from tests.html_safety import unsafe_markup
from tests.planting import answers_planted, planting

pytestmark = [pytest.mark.django_db, pytest.mark.triton, pytest.mark.usefixtures("triton_server")]

PAYLOAD = (
    '<script>alert("x")</script> <img src=x onerror="alert(1)"> '
    '[click](javascript:alert(2)) <iframe src="https://evil.test"></iframe>'
)


def test_rater_prompt_and_echoed_answer_are_sanitised(acme, bob_client, triton_server):
    Campaign.objects.filter(pk=acme.campaign.pk).update(allow_rater_prompts=True)
    # The echo models put the prompt back into their answers, so the payload reaches both panes too.
    acme.left.endpoint = endpoint_for(acme, model="delay-fast", url=triton_server.grpc_url)
    acme.left.save()
    response = bob_client.post(reverse("battles:next", args=[acme.campaign.pk]), {"prompt": "Summarise: " + PAYLOAD})
    assert response.status_code == 302
    generation_worker_run()
    html = bob_client.get(response["Location"]).content.decode()
    body = html.split('<div class="battle"', 1)[1].split("<form", 1)[0]
    assert unsafe_markup(body) == []
    assert "<script" not in body
    assert body.count("&lt;script&gt;") >= 2  # prompt and echoed answer show it as text, not dropped


def test_stored_answer_with_markup_is_rendered_as_safe_markdown(acme, bob_client):
    battle, _ = start_battle(bob_client, acme.campaign)
    with planting():
        answers_planted(battle.generations.filter(side="left"), "# Title\n\n**bold** <b onclick=x>raw</b>\n\n- item")
    html = bob_client.get(reverse("battles:battle", args=[battle.pk])).content.decode()
    assert '<p class="md-h1">Title</p>' in html and "<strong>bold</strong>" in html and "<li>item</li>" in html
    assert unsafe_markup(html.split('<div class="battle"', 1)[1].split("<form", 1)[0]) == []
    assert "&lt;b onclick=x&gt;raw&lt;/b&gt;" in html
