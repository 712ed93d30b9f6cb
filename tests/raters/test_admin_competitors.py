"""Competitors in the campaign admin: managers (not Django staff) add them through the inline, only
with endpoints of the campaign's own organisation, and cannot rewrite one that has battles."""

from __future__ import annotations

import pytest
from django.urls import reverse

from battles.models import Battle, Competitor
from raters.models import AuditEvent
from tests.factories import ModelEndpointFactory

from .admin_forms import campaign_form_data, form_errors

pytestmark = pytest.mark.django_db


def change_url(campaign):  # type: ignore[no-untyped-def]
    return reverse("admin:battles_campaign_change", args=[campaign.pk])


def test_owner_sees_the_competitor_inline(acme, alice_client):
    html = alice_client.get(change_url(acme.campaign)).content.decode()
    assert "competitors-TOTAL_FORMS" in html
    assert 'name="competitors-0-version_label"' in html


def test_owner_adds_competitor_through_the_admin(acme, alice, alice_client):
    endpoint = ModelEndpointFactory.create(organization=acme.organization, name="Acme-new", url=acme.left.endpoint.url)
    data = campaign_form_data(acme.campaign, new_competitors=[{"endpoint": endpoint.pk, "version_label": "2026-12"}])
    response = alice_client.post(change_url(acme.campaign), data)
    assert response.status_code == 302, form_errors(response)
    competitor = Competitor.objects.get(campaign=acme.campaign, endpoint=endpoint)
    assert competitor.version_label == "2026-12"
    assert competitor.organization == acme.organization
    assert AuditEvent.objects.filter(
        organization=acme.organization, actor=alice, action="competitor.added", object_id=str(competitor.pk)
    ).exists()


def test_endpoint_outside_the_managers_organisations_is_not_a_choice(acme, globex, alice_client):
    data = campaign_form_data(
        acme.campaign, new_competitors=[{"endpoint": globex.left.endpoint.pk, "version_label": "x"}]
    )
    response = alice_client.post(change_url(acme.campaign), data)
    assert response.status_code == 200
    assert "Select a valid choice" in form_errors(response)
    assert not Competitor.objects.filter(campaign=acme.campaign, endpoint=globex.left.endpoint).exists()


def test_endpoint_of_another_managed_organisation_is_a_form_error(acme, globex, dana_client):
    # dana manages Globex too, so its endpoints are among her choices: the form itself must refuse.
    data = campaign_form_data(
        acme.campaign, new_competitors=[{"endpoint": globex.left.endpoint.pk, "version_label": "x"}]
    )
    response = dana_client.post(change_url(acme.campaign), data)
    assert response.status_code == 200
    assert "must belong to the campaign's organisation" in form_errors(response)
    assert not Competitor.objects.filter(campaign=acme.campaign, endpoint=globex.left.endpoint).exists()


def test_competitor_with_battles_keeps_its_endpoint_and_version(acme, bob, alice_client):
    other = ModelEndpointFactory.create(organization=acme.organization, name="Acme-other", url=acme.left.endpoint.url)
    Battle.objects.create(
        organization=acme.organization,
        campaign=acme.campaign,
        rater=bob,
        pool=acme.pool,
        prompt=acme.campaign.prompts.first(),
        left=acme.left,
        right=acme.right,
    )
    fought = acme.left
    assert "disabled" in alice_client.get(change_url(acme.campaign)).content.decode()
    data = campaign_form_data(
        acme.campaign,
        competitor_changes={
            fought.pk: {"endpoint": other.pk, "version_label": "rewritten", "active": False},
        },
    )
    response = alice_client.post(change_url(acme.campaign), data)
    assert response.status_code == 302, form_errors(response)
    fought.refresh_from_db()
    assert (fought.endpoint_id, fought.version_label) == (acme.left.endpoint_id, "2026-11")
    assert fought.active is False  # switching a competitor off stays possible


def test_competitor_without_battles_can_still_be_corrected(acme, alice_client):
    data = campaign_form_data(acme.campaign, competitor_changes={acme.right.pk: {"version_label": "2026-11b"}})
    response = alice_client.post(change_url(acme.campaign), data)
    assert response.status_code == 302, form_errors(response)
    acme.right.refresh_from_db()
    assert acme.right.version_label == "2026-11b"
