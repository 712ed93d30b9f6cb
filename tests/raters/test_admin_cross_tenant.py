"""dana manages both Acme and Globex, so both tenants' rows are among her choices: every tenant-owned
row keeps its organisation, and what it links to must be of that same organisation."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from battles.models import Campaign, Prompt
from raters import services
from raters.models import AuditEvent, Invitation, Membership, RaterFlag
from serving.models import ModelEndpoint

from .admin_forms import campaign_form_data, form_errors

pytestmark = pytest.mark.django_db


def test_campaign_cannot_be_moved_to_another_tenant(acme, globex, dana_client):
    assert (
        'name="organization"'
        not in dana_client.get(reverse("admin:battles_campaign_change", args=[acme.campaign.pk])).content.decode()
    )
    data = campaign_form_data(acme.campaign, organization=globex.organization.pk, rater_pools=[])
    response = dana_client.post(reverse("admin:battles_campaign_change", args=[acme.campaign.pk]), data)
    assert response.status_code == 302, form_errors(response)
    assert Campaign.objects.get(pk=acme.campaign.pk).organization == acme.organization


def test_endpoint_cannot_be_moved_to_another_tenant(acme, globex, dana_client):
    endpoint = acme.left.endpoint
    response = dana_client.post(
        reverse("admin:serving_modelendpoint_change", args=[endpoint.pk]),
        {
            "organization": globex.organization.pk,
            "name": endpoint.name,
            "url": endpoint.url,
            "protocol": endpoint.protocol,
            "model_name": endpoint.model_name,
            "model_version": "",
            "timeout_s": endpoint.timeout_s,
        },
    )
    assert response.status_code == 302, form_errors(response)
    assert ModelEndpoint.objects.get(pk=endpoint.pk).organization == acme.organization


def test_campaign_takes_only_pools_of_its_organisation(acme, globex, dana_client):
    data = campaign_form_data(acme.campaign, rater_pools=[acme.pool.pk, globex.pool.pk])
    response = dana_client.post(reverse("admin:battles_campaign_change", args=[acme.campaign.pk]), data)
    assert response.status_code == 200
    assert "Not pools of Acme: Globex staff" in form_errors(response)
    assert list(acme.campaign.rater_pools.all()) == [acme.pool]


def test_new_campaign_takes_only_pools_of_its_organisation(acme, globex, dana_client):
    data = campaign_form_data(
        acme.campaign, organization=acme.organization.pk, rater_pools=[globex.pool.pk], name="New", slug="new"
    )
    data = {k: v for k, v in data.items() if not k.startswith("competitors-")}
    data.update({"competitors-TOTAL_FORMS": 0, "competitors-INITIAL_FORMS": 0})
    response = dana_client.post(reverse("admin:battles_campaign_add"), data)
    assert response.status_code == 200
    assert "Not pools of Acme" in form_errors(response)
    assert not Campaign.objects.filter(slug="new").exists()


def test_invitation_cannot_point_at_another_tenants_pool(acme, globex, alice, dana_client):
    invitation = services.invitation_create(pool=acme.pool, actor=alice)
    expires = timezone.localtime(timezone.now() + timedelta(days=3))
    response = dana_client.post(
        reverse("admin:raters_invitation_change", args=[invitation.pk]),
        {
            "pool": globex.pool.pk,
            "email": "",
            "max_uses": 5,
            "expires_at_0": expires.date().isoformat(),
            "expires_at_1": expires.strftime("%H:%M:%S"),
        },
    )
    assert response.status_code == 200
    assert "must belong to the invitation's organisation" in form_errors(response)
    invitation.refresh_from_db()
    assert invitation.pool == acme.pool and invitation.organization == acme.organization


def test_new_invitation_belongs_to_its_pools_organisation(acme, globex, dana_client):
    expires = timezone.localtime(timezone.now() + timedelta(days=3))
    response = dana_client.post(
        reverse("admin:raters_invitation_add"),
        {
            "pool": globex.pool.pk,
            "email": "",
            "max_uses": 5,
            "expires_at_0": expires.date().isoformat(),
            "expires_at_1": expires.strftime("%H:%M:%S"),
        },
    )
    assert response.status_code == 302, form_errors(response)
    assert Invitation.objects.get(pool=globex.pool).organization == globex.organization


def test_flagged_rater_must_be_a_member_of_the_flags_organisation(acme, globex, bob, charlie, dana_client):
    response = dana_client.post(
        reverse("admin:raters_raterflag_add"),
        {
            "organization": acme.organization.pk,
            "rater": charlie.pk,
            "reason": "script",
        },
    )
    assert response.status_code == 200
    assert "Only a member of the organisation" in form_errors(response)
    assert not RaterFlag.objects.exists()
    response = dana_client.post(
        reverse("admin:raters_raterflag_add"),
        {
            "organization": acme.organization.pk,
            "rater": bob.pk,
            "reason": "script",
        },
    )
    assert response.status_code == 302, form_errors(response)
    assert RaterFlag.objects.get().organization == acme.organization


def test_pool_members_must_already_belong_to_the_pools_organisation(
    acme, globex, alice, bob, charlie, dana, dana_client
):
    url = reverse("admin:raters_raterpool_change", args=[acme.pool.pk])
    base = {"name": acme.pool.name, "kind": acme.pool.kind}
    response = dana_client.post(url, {**base, "members": [bob.pk, charlie.pk]})
    assert response.status_code == 200
    assert "Not members of Acme: charlie@globex.test" in form_errors(response)
    assert not Membership.objects.filter(user=charlie, organization=acme.organization).exists()
    assert list(acme.pool.members.all()) == [bob]

    response = dana_client.post(url, {**base, "members": [alice.pk]})
    assert response.status_code == 302, form_errors(response)
    assert list(acme.pool.members.all()) == [alice]
    events = AuditEvent.objects.filter(action__startswith="pool.member_", actor=dana)
    actions = {(e.action, e.data["user"]) for e in events}
    assert {("pool.member_added", alice.pk), ("pool.member_removed", bob.pk)} <= actions


def test_prompt_cannot_move_to_another_tenants_campaign(acme, globex, dana_client):
    prompt = acme.campaign.prompts.first()
    assert prompt is not None
    response = dana_client.post(
        reverse("admin:battles_prompt_change", args=[prompt.pk]),
        {
            "campaign": globex.campaign.pk,
            "text": prompt.text,
            "category": prompt.category,
            "language": prompt.language,
            "active": "on",
        },
    )
    assert response.status_code == 200
    assert "must belong to the prompt's organisation" in form_errors(response)
    prompt.refresh_from_db()
    assert prompt.campaign == acme.campaign and prompt.organization == acme.organization
    assert not Prompt.objects.filter(organization=globex.organization, text=prompt.text).exists()
