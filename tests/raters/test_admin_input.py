"""Bad input in the admin comes back as a form error, never as a server error."""

from __future__ import annotations

import pytest
from django.urls import reverse

from battles.models import Campaign, Prompt
from battles.prompting import PROMPT_MAX_CHARS

from .admin_forms import campaign_form_data, form_errors

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "text,message",
    [
        ("x" * (PROMPT_MAX_CHARS + 1), "too long"),
        ("   ", "required"),
        ("hello\x00world", "Null characters are not allowed"),
    ],
    ids=["too-long", "blank", "nul"],
)
def test_bad_prompt_is_a_form_error(acme, alice_client, text, message):
    before = Prompt.objects.count()
    response = alice_client.post(
        reverse("admin:battles_prompt_add"),
        {
            "campaign": acme.campaign.pk,
            "text": text,
            "category": "other",
            "language": "und",
            "active": "on",
        },
    )
    assert response.status_code == 200
    assert message in form_errors(response)
    assert Prompt.objects.count() == before


def test_good_prompt_is_stored_stripped_and_hashed(acme, alice_client):
    response = alice_client.post(
        reverse("admin:battles_prompt_add"),
        {
            "campaign": acme.campaign.pk,
            "text": "  Why is the sky blue?  ",
            "category": "knowledge",
            "language": "und",
            "active": "on",
        },
    )
    assert response.status_code == 302, form_errors(response)
    prompt = Prompt.objects.get(text="Why is the sky blue?")
    assert prompt.organization == acme.organization and len(prompt.text_hash) == 64


@pytest.mark.parametrize(
    "field,value,message",
    [
        ("ranking_bootstrap_rounds", 5000, "less than or equal to 2000"),
        ("ranking_min_votes", 0, "greater than or equal to 1"),
    ],
)
def test_ranking_settings_are_bounded(acme, alice_client, field, value, message):
    data = campaign_form_data(acme.campaign, **{field: value})
    response = alice_client.post(reverse("admin:battles_campaign_change", args=[acme.campaign.pk]), data)
    assert response.status_code == 200
    assert message in form_errors(response)
    assert getattr(Campaign.objects.get(pk=acme.campaign.pk), field) != value


def test_ranking_settings_within_bounds_are_saved(acme, alice_client):
    data = campaign_form_data(acme.campaign, ranking_bootstrap_rounds=2000, ranking_min_votes=1)
    response = alice_client.post(reverse("admin:battles_campaign_change", args=[acme.campaign.pk]), data)
    assert response.status_code == 302, form_errors(response)
    campaign = Campaign.objects.get(pk=acme.campaign.pk)
    assert (campaign.ranking_bootstrap_rounds, campaign.ranking_min_votes) == (2000, 1)
