"""Tenancy: charlie (Globex, fully privileged there) gets 404 and no data for anything of Acme's."""

from __future__ import annotations

import pytest
from django.urls import reverse

from battles.models import Battle, Vote
from tests.conftest import start_battle

pytestmark = pytest.mark.django_db


@pytest.fixture
def acme_battle(acme, bob_client):  # type: ignore[no-untyped-def]
    battle, _ = start_battle(bob_client, acme.campaign)
    return battle


def test_outsider_cannot_see_campaign_list_entry(acme, globex, charlie_client):
    html = charlie_client.get(reverse("battles:campaigns")).content.decode()
    assert globex.campaign.name in html
    assert acme.campaign.name not in html


@pytest.mark.parametrize(
    "method,name,args",
    [
        ("get", "battles:campaign", ["campaign"]),
        ("post", "battles:next", ["campaign"]),
        ("get", "battles:battle", ["battle"]),
        ("post", "battles:vote", ["battle"]),
        ("get", "api:votes", ["campaign", "jsonl"]),
        ("get", "api:votes", ["campaign", "csv"]),
    ],
)
@pytest.mark.triton
def test_outsider_gets_404_on_every_view(acme, globex, acme_battle, charlie_client, method, name, args, triton_server):
    ids = {"campaign": acme.campaign.pk, "battle": acme_battle.pk}
    url = reverse(name, args=[ids.get(arg, arg) for arg in args])
    response = getattr(charlie_client, method)(url, {"choice": "left"} if method == "post" else None)
    assert response.status_code == 404
    body = b"".join(response.streaming_content) if response.streaming else response.content
    assert acme.campaign.name.encode() not in body
    assert not Vote.objects.exists()
    assert Battle.objects.filter(rater__email="charlie@globex.test").count() == 0


@pytest.mark.parametrize(
    "name,row",
    [
        ("admin:battles_campaign_change", "campaign"),
        ("admin:battles_battle_change", "battle"),
        ("admin:raters_raterpool_change", "pool"),
        ("admin:serving_modelendpoint_change", "endpoint"),
        ("admin:raters_organization_change", "org"),
    ],
)
@pytest.mark.triton
def test_outsider_manager_cannot_open_other_tenants_rows_in_admin(
    acme, globex, acme_battle, charlie_client, name, row, triton_server
):
    ids = {
        "campaign": acme.campaign.pk,
        "battle": acme_battle.pk,
        "pool": acme.pool.pk,
        "endpoint": acme.left.endpoint.pk,
        "org": acme.organization.pk,
    }
    url = reverse(name, args=[ids[row]])
    response = charlie_client.get(url, follow=True)
    # The admin answers a row outside the queryset with a redirect to its index and a "doesn't exist"
    # message: no data of Acme's on the way.
    assert acme.campaign.name not in response.content.decode()
    assert acme.pool.name not in response.content.decode()
    assert response.redirect_chain and response.redirect_chain[0][0] == reverse("admin:index")


def test_admin_lists_only_own_tenant_rows(acme, globex, charlie_client, alice_client):
    charlie_html = charlie_client.get(reverse("admin:battles_campaign_changelist")).content.decode()
    assert globex.campaign.name in charlie_html and acme.campaign.name not in charlie_html
    alice_html = alice_client.get(reverse("admin:battles_campaign_changelist")).content.decode()
    assert acme.campaign.name in alice_html and globex.campaign.name not in alice_html
    endpoints_html = charlie_client.get(reverse("admin:serving_modelendpoint_changelist")).content.decode()
    assert "Acme-" not in endpoints_html and "Globex-" in endpoints_html


def test_admin_foreign_key_choices_are_scoped(acme, globex, charlie_client):
    html = charlie_client.get(reverse("admin:battles_campaign_add")).content.decode()
    assert acme.pool.name not in html and acme.organization.name not in html
    assert globex.pool.name in html


def test_outsider_cannot_attach_other_tenants_pool_via_admin_post(acme, globex, charlie_client):
    # A saved campaign's organisation is read-only: a posted one is ignored.
    response = charlie_client.post(
        reverse("admin:battles_campaign_change", args=[globex.campaign.pk]),
        {
            "organization": acme.organization.pk,
            "name": "hijack",
            "slug": "hijack",
        },
    )
    assert response.status_code == 200  # the form comes back with an error
    globex.campaign.refresh_from_db()
    assert globex.campaign.organization == globex.organization
    # On a new campaign the organisation is a choice, among the user's own only.
    response = charlie_client.post(
        reverse("admin:battles_campaign_add"),
        {
            "organization": acme.organization.pk,
            "name": "hijack",
            "slug": "hijack",
        },
    )
    assert response.status_code == 200
    assert "Select a valid choice" in response.content.decode()
    assert not acme.organization.campaigns.filter(slug="hijack").exists()


def test_rater_cannot_reach_the_admin(acme, bob_client):
    for path in (
        reverse("admin:index"),
        reverse("admin:battles_campaign_changelist"),
        reverse("admin:battles_campaign_change", args=[acme.campaign.pk]),
    ):
        response = bob_client.get(path, follow=True)
        assert response.request["PATH_INFO"] == reverse("battles:campaigns")  # back to the rater's campaigns
        assert "Campaign console" not in response.content.decode()


def test_anonymous_is_sent_to_login(acme):
    from django.test import Client

    client = Client()
    assert client.get(reverse("battles:campaigns")).status_code == 302
    assert client.get(reverse("battles:campaign", args=[acme.campaign.pk])).status_code == 302
    response = client.get(reverse("api:votes", args=[acme.campaign.pk, "jsonl"]))
    assert response.status_code == 401 and response["WWW-Authenticate"] == "Api-Key"


def test_rater_in_org_but_not_in_campaign_pool_gets_404(acme, alice, alice_client):
    assert alice_client.get(reverse("battles:campaign", args=[acme.campaign.pk])).status_code == 404
    assert alice_client.post(reverse("battles:next", args=[acme.campaign.pk])).status_code == 404
