"""The guided set-up (the walk itself is tests/browser/test_first_campaign.py): the console's index grouped by task
within the user's rights, the campaign's checklist as the selector computes it, its *Open* button (tenant-scoped),
the return to the checklist after a form opened from it, and the health check an endpoint's save records."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib import admin
from django.contrib.messages import get_messages
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from arena.admin_site import CONSOLE_GROUPS
from battles import selectors
from battles.models import Campaign, Competitor
from raters.models import Invitation, RaterPool, Role
from serving import services as serving_services
from serving.models import Health, ModelEndpoint
from tests.conftest import Tenant, endpoint_of, login
from tests.factories import MembershipFactory, UserFactory

pytestmark = pytest.mark.django_db


def test_the_index_groups_every_console_page_by_task_within_the_users_rights(acme: Tenant, alice_client: Client):
    grouped = {key for _, entries in CONSOLE_GROUPS for key, _ in entries}
    registered = {f"{m._meta.app_label}.{m._meta.model_name}" for m in admin.site._registry}
    # Every page of the project's apps has a place and a purpose; Django's own (users, groups) go to "Other".
    assert {key for key in registered if key.split(".")[0] in {"battles", "raters", "ranking", "serving"}} == grouped

    page = alice_client.get(reverse("admin:index"))  # alice owns Acme
    titles = [title for title, _ in page.context["task_groups"]]
    assert titles[0] == "Run a campaign" and "Other" not in titles
    assert page.context["start_steps"][0].url == reverse("admin:battles_campaign_add")
    assert "Webhooks" in page.content.decode()

    dana = UserFactory.create()
    MembershipFactory.create(user=dana, organization=acme.organization, role=Role.MANAGER)
    html = login(dana).get(reverse("admin:index")).content.decode()
    assert "Start here: set up a campaign" in html and "Model endpoints" in html
    assert "Webhooks" not in html  # owners only: a manager's index does not list it


def test_the_checklist_reads_each_step_from_the_database(acme: Tenant, alice: object) -> None:
    campaign = acme.campaign  # two competitors, eight prompts, a pool with bob in it
    Campaign.objects.filter(pk=campaign.pk).update(status=Campaign.Status.DRAFT)
    campaign.refresh_from_db()
    checklist = selectors.campaign_checklist(campaign=campaign)
    assert [s.key for s in checklist.steps if s.done] == ["competitors", "prompts", "pool", "raters"]
    endpoints = checklist.step("endpoints")
    assert endpoints.state == "0 of 2 ready (the competitors' endpoints)."
    assert all(": Unknown (not checked yet)" in line for line in endpoints.items)

    for competitor in (acme.left, acme.right):
        serving_services.endpoint_health_record(endpoint=endpoint_of(competitor), detail="")
    # A third endpoint of the organisation, down, that no competitor uses: it does not hold the step back.
    ModelEndpoint.objects.create(
        organization=acme.organization, name="spare", url="127.0.0.1:9", model_name="x", health=Health.DOWN
    )
    Competitor.objects.filter(pk=acme.right.pk).update(active=False)
    checklist = selectors.campaign_checklist(campaign=campaign)
    assert (
        checklist.step("endpoints").done
        and checklist.step("endpoints").state == "1 of 1 ready (the competitors' endpoints)."
    )
    assert not checklist.step("competitors").done
    assert checklist.step("competitors").state.startswith("1 active competitor: add them below")

    invitation = Invitation.objects.create(organization=acme.organization, pool=acme.pool, max_uses=2)
    Invitation.objects.create(  # expired: not offered
        organization=acme.organization, pool=acme.pool, expires_at=timezone.now() - timedelta(days=1)
    )
    raters = selectors.campaign_checklist(campaign=campaign)
    assert raters.invitation_paths == (invitation.path,)
    assert raters.step("raters").state == "1 rater in the campaign's pools; 1 invitation link open."

    campaign.rater_pools.clear()
    checklist = selectors.campaign_checklist(campaign=campaign)
    assert not checklist.step("pool").done and not checklist.step("raters").done
    assert checklist.step("raters").state == "Name a rater pool first."
    assert checklist.pools_in_organization == 1 and checklist.first_pool_id is None


def test_the_open_button_opens_refuses_in_the_services_words_and_is_tenant_scoped(
    acme: Tenant, globex: Tenant, alice_client: Client, charlie_client: Client
) -> None:
    Campaign.objects.filter(pk=acme.campaign.pk).update(status=Campaign.Status.DRAFT)
    url = reverse("admin:battles_campaign_open", args=[acme.campaign.pk])
    assert alice_client.get(url).status_code == 405
    assert charlie_client.post(url).status_code == 404  # another organisation's campaign
    acme.campaign.refresh_from_db()
    assert acme.campaign.status == Campaign.Status.DRAFT

    page = alice_client.get(reverse("admin:battles_campaign_change", args=[acme.campaign.pk])).content.decode()
    assert f'action="{url}"' in page and "Open for voting" in page
    acme.campaign.rater_pools.clear()
    response = alice_client.post(url, follow=True)
    assert "needs at least one rater pool" in response.content.decode()
    acme.campaign.refresh_from_db()
    assert acme.campaign.status == Campaign.Status.DRAFT
    acme.campaign.rater_pools.add(acme.pool)
    response = alice_client.post(url)
    assert response.status_code == 302 and response["Location"] == reverse(
        "admin:battles_campaign_change", args=[acme.campaign.pk]
    )
    acme.campaign.refresh_from_db()
    assert acme.campaign.status == Campaign.Status.OPEN


def test_a_form_opened_from_the_checklist_returns_to_it_and_only_inside_the_console(
    acme: Tenant, alice_client: Client
) -> None:
    add = reverse("admin:raters_raterpool_add")
    back = reverse("admin:battles_campaign_change", args=[acme.campaign.pk])
    data = {"organization": acme.organization.pk, "name": "Experts", "kind": "expert"}
    response = alice_client.post(f"{add}?next={back}", data)
    assert response.status_code == 302 and response["Location"] == back
    for elsewhere in ("https://elsewhere.test/admin/", "//elsewhere.test/admin/", "/accounts/logout/"):
        response = alice_client.post(f"{add}?next={elsewhere}", {**data, "name": f"Pool {elsewhere}"})
        assert response.status_code == 302 and response["Location"] == reverse("admin:raters_raterpool_changelist")
    assert RaterPool.objects.filter(organization=acme.organization).count() == 5

    # A new campaign opens on its own page (its checklist), not the list.
    response = alice_client.post(
        reverse("admin:battles_campaign_add"),
        {
            "organization": acme.organization.pk,
            "name": "Second",
            "slug": "second",
            **_campaign_defaults(),
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    created = Campaign.objects.get(slug="second")
    assert response["Location"] == reverse("admin:battles_campaign_change", args=[created.pk])


def _campaign_defaults() -> dict[str, object]:
    """The add form's required fields at the model's defaults, and an empty competitors inline."""
    values: dict[str, object] = {}
    for field in Campaign._meta.concrete_fields:
        if field.editable and not field.blank and field.has_default() and not isinstance(field.default, bool):
            values[field.name] = field.default
    for flag in ("exclude_identity_leaks", "both_bad_as_tie"):
        values[flag] = "on"
    prefix = "competitors"
    values.update({f"{prefix}-TOTAL_FORMS": 0, f"{prefix}-INITIAL_FORMS": 0, f"{prefix}-MAX_NUM_FORMS": 1000})
    return values


def test_the_check_a_save_runs_is_recorded_and_downs_an_endpoint_never_seen_ready_at_once(acme: Tenant) -> None:
    fresh = endpoint_of(acme.left)
    assert (
        serving_services.endpoint_health_record(endpoint=fresh, detail="x: server unreachable", on_save=True) == "down"
    )
    stored = ModelEndpoint.objects.get(pk=fresh.pk)
    assert (stored.health, stored.health_detail) == (Health.DOWN, "x: server unreachable")

    # A ready endpoint keeps the hysteresis: saving its timeout during a blip does not pull it out of battles.
    ready = endpoint_of(acme.right)
    serving_services.endpoint_health_record(endpoint=ready, detail="")
    assert serving_services.endpoint_health_record(endpoint=ready, detail="blip", on_save=True) == ""
    stored = ModelEndpoint.objects.get(pk=ready.pk)
    assert (stored.health, stored.health_failures) == (Health.READY, 1)


def test_saving_an_endpoint_in_the_console_records_its_state_at_once(acme: Tenant, alice_client: Client) -> None:
    response = alice_client.post(
        reverse("admin:serving_modelendpoint_add"),
        {
            "organization": acme.organization.pk,
            "name": "nowhere",
            "url": "127.0.0.1:9",  # loopback is allowed in tests; nothing listens there
            "protocol": "http",
            "model_name": "zen-bigram",
            "model_version": "",
            "timeout_s": 20,
            "contract": "arena",
            "prompt_format": "raw",
        },
        follow=True,
    )
    assert response.status_code == 200
    endpoint = ModelEndpoint.objects.get(name="nowhere")
    assert endpoint.health == Health.DOWN and "server unreachable" in endpoint.health_detail
    notes = [str(m) for m in get_messages(response.wsgi_request)]
    assert len(notes) == 2 and "added successfully" in notes[0]
    assert notes[1].startswith("Saved, but Triton does not report the model ready: Down since")
    assert notes[1].endswith(": zen-bigram at http://127.0.0.1:9: server unreachable")
