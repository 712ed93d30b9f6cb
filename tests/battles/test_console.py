"""The campaign console's rules live in services (the admin maps their refusals to form errors and
messages), and its rough edges: organisation preselected, a default version label, Triton readiness
warnings, links to the leaderboard, prompts not used up by voided battles."""

from __future__ import annotations

import pytest
from django.contrib.messages import get_messages
from django.urls import reverse
from django.utils import timezone

from battles import selectors, services
from battles.models import Battle, Campaign, Competitor, Prompt
from core.errors import Conflict, Invalid
from raters.models import AuditAction, AuditEvent, Role
from tests.conftest import endpoint_for, login, start_battle
from tests.factories import MembershipFactory, ModelEndpointFactory, RaterPoolFactory, UserFactory
from tests.raters.admin_forms import campaign_form_data, form_errors

pytestmark = pytest.mark.django_db


def change_url(campaign: Campaign) -> str:
    return reverse("admin:battles_campaign_change", args=[campaign.pk])


def messages_of(response) -> list[str]:  # type: ignore[no-untyped-def]
    return [str(m) for m in get_messages(response.wsgi_request)]


def _battle(tenant, rater, prompt=None, status=Battle.Status.READY) -> Battle:  # type: ignore[no-untyped-def]
    return Battle.objects.create(
        organization=tenant.organization,
        campaign=tenant.campaign,
        rater=rater,
        pool=tenant.pool,
        prompt=prompt or tenant.campaign.prompts.first(),
        left=tenant.left,
        right=tenant.right,
        status=status,
    )


# --- Writes through services ---------------------------------------------------------------------


def test_deleting_a_competitor_that_fought_is_refused(acme, bob, alice_client):
    _battle(acme, bob)
    with pytest.raises(Conflict, match="has battles and cannot be deleted"):
        services.competitor_delete(competitor=acme.left, actor=None)
    data = campaign_form_data(acme.campaign)
    data["competitors-0-DELETE"] = "on"
    response = alice_client.post(change_url(acme.campaign), data)
    assert response.status_code == 200  # the inline's check, in the service's words (retire it instead)
    errors = form_errors(response)
    assert "has battles and cannot be deleted" in errors and "Retire it instead" in errors
    assert "protected related objects" not in errors
    assert Competitor.objects.filter(pk=acme.left.pk).exists()
    assert not AuditEvent.objects.filter(action=AuditAction.COMPETITOR_DELETED).exists()


def test_a_refusal_on_save_is_a_form_error_and_nothing_of_the_save_stays(acme, globex, alice_client, monkeypatch):
    def refuse(**kwargs):  # type: ignore[no-untyped-def]
        raise Invalid("No competitors today.", field_errors={"nonexistent": "x"})

    monkeypatch.setattr(services, "competitor_save", refuse)
    endpoint = ModelEndpointFactory.create(organization=acme.organization, name="Acme-new", url="127.0.0.1:1")
    data = campaign_form_data(
        acme.campaign, description="changed", new_competitors=[{"endpoint": endpoint.pk, "version_label": "x"}]
    )
    response = alice_client.post(change_url(acme.campaign), data)
    assert response.status_code == 200
    assert "No competitors today." in form_errors(response)
    assert ">\nchanged</textarea>" in response.content.decode()  # what the manager typed is kept
    acme.campaign.refresh_from_db()
    assert acme.campaign.description == ""  # the campaign's save was rolled back with the refusal
    assert not AuditEvent.objects.filter(action=AuditAction.CAMPAIGN_CHANGED).exists()


def test_deleting_a_competitor_without_battles_is_audited(acme, alice, alice_client):
    extra = Competitor.objects.create(
        organization=acme.organization, campaign=acme.campaign, endpoint=acme.left.endpoint, version_label="spare"
    )
    data = campaign_form_data(acme.campaign)
    index = list(acme.campaign.competitors.order_by("id")).index(extra)
    data[f"competitors-{index}-DELETE"] = "on"
    response = alice_client.post(change_url(acme.campaign), data)
    assert response.status_code == 302, form_errors(response)
    assert not Competitor.objects.filter(pk=extra.pk).exists()
    event = AuditEvent.objects.get(action=AuditAction.COMPETITOR_DELETED)
    assert event.object_id == str(extra.pk) and event.actor == alice and event.data["version"] == "spare"


def test_a_campaigns_pools_belong_to_its_organisation_in_the_service(acme, globex):
    with pytest.raises(Invalid, match="Not pools of Acme") as refused:
        services.campaign_save(
            campaign=acme.campaign, actor=None, changed=["rater_pools"], rater_pools=[acme.pool, globex.pool]
        )
    assert "rater_pools" in refused.value.field_errors
    assert list(acme.campaign.rater_pools.all()) == [acme.pool]


def test_a_campaign_with_battles_is_not_deleted(acme, bob):
    _battle(acme, bob)
    with pytest.raises(Conflict, match="has battles and cannot be deleted"):
        services.campaign_delete(campaign=acme.campaign, actor=None)
    assert Campaign.objects.filter(pk=acme.campaign.pk).exists()


def test_a_refused_delete_in_the_console_is_an_error_message(acme, alice_client, monkeypatch):
    def refuse(**kwargs):  # type: ignore[no-untyped-def]
        raise Conflict("Not this one.")

    monkeypatch.setattr(services, "campaign_delete", refuse)
    Prompt.objects.filter(campaign=acme.campaign).delete()
    response = alice_client.post(reverse("admin:battles_campaign_delete", args=[acme.campaign.pk]), {"post": "yes"})
    assert response.status_code == 302 and response["Location"] == change_url(acme.campaign)
    assert "Not this one." in messages_of(response)
    assert Campaign.objects.filter(pk=acme.campaign.pk).exists()


def test_a_prompt_with_battles_keeps_its_text(acme, bob, alice_client):
    prompt = acme.campaign.prompts.first()
    _battle(acme, bob, prompt=prompt)
    url = reverse("admin:battles_prompt_change", args=[prompt.pk])
    form = {
        "campaign": acme.campaign.pk,
        "text": "Something else entirely.",
        "category": "other",
        "language": "en",
        "active": "on",
    }
    response = alice_client.post(url, form)
    assert response.status_code == 200
    assert "Fixed once the prompt has battles" in form_errors(response)
    prompt.refresh_from_db()
    assert prompt.text != "Something else entirely."
    response = alice_client.post(url, {**form, "text": prompt.text, "active": ""})
    assert response.status_code == 302, form_errors(response)
    prompt.refresh_from_db()
    assert prompt.active is False
    assert AuditEvent.objects.filter(action=AuditAction.PROMPT_CHANGED, object_id=str(prompt.pk)).exists()


def test_a_new_prompt_from_the_console_is_hashed_and_audited(acme, alice_client):
    response = alice_client.post(
        reverse("admin:battles_prompt_add"),
        {
            "campaign": acme.campaign.pk,
            "text": "  Why   is the sea salty? ",
            "category": "knowledge",
            "language": "en",
            "active": "on",
        },
    )
    assert response.status_code == 302, form_errors(response)
    prompt = Prompt.objects.get(text="Why   is the sea salty?")
    assert prompt.organization == acme.organization and len(prompt.text_hash) == 64
    assert AuditEvent.objects.filter(action=AuditAction.PROMPT_CREATED, object_id=str(prompt.pk)).exists()


# --- Rough edges ----------------------------------------------------------------------------------


def test_the_organisation_is_preselected_for_a_manager_of_one(acme, globex, alice_client):
    selected = f'<option value="{acme.organization.pk}" selected>'
    for name in ("battles_campaign_add", "raters_raterpool_add", "serving_modelendpoint_add"):
        assert selected in alice_client.get(reverse(f"admin:{name}")).content.decode(), name
    # dana manages two organisations: she chooses.
    dana = UserFactory.create(email="dana@consultancy.test")
    for tenant in (acme, globex):
        MembershipFactory.create(user=dana, organization=tenant.organization, role=Role.MANAGER)
    page = login(dana).get(reverse("admin:battles_campaign_add")).content.decode()
    assert f'value="{acme.organization.pk}" selected' not in page and f'value="{acme.organization.pk}"' in page


@pytest.mark.parametrize(("model_version", "expected"), [("3", "3"), ("", None)])
def test_a_competitor_added_without_a_version_label_gets_a_default(acme, alice_client, model_version, expected):
    endpoint = ModelEndpointFactory.create(
        organization=acme.organization, name="Acme-new", url=acme.left.endpoint.url, model_version=model_version
    )
    data = campaign_form_data(acme.campaign, new_competitors=[{"endpoint": endpoint.pk, "version_label": ""}])
    response = alice_client.post(change_url(acme.campaign), data)
    assert response.status_code == 302, form_errors(response)
    label = Competitor.objects.get(campaign=acme.campaign, endpoint=endpoint).version_label
    assert label == (expected or timezone.localdate().isoformat())


@pytest.mark.triton
def test_saving_an_endpoint_warns_when_triton_does_not_have_the_model_ready(acme, alice_client, triton_server):
    url = reverse("admin:serving_modelendpoint_add")
    base = {"organization": acme.organization.pk, "protocol": "grpc", "model_version": "", "timeout_s": 20}
    response = alice_client.post(
        url, {**base, "name": "ready", "url": triton_server.grpc_url, "model_name": "zen-bigram"}
    )
    assert response.status_code == 302, form_errors(response)
    assert not [m for m in messages_of(response) if "not report" in m]
    response = alice_client.post(
        url, {**base, "name": "absent", "url": triton_server.grpc_url, "model_name": "no-such-model"}
    )
    assert response.status_code == 302, form_errors(response)
    warnings = [m for m in messages_of(response) if "does not report the model ready" in m]
    assert len(warnings) == 1 and "no-such-model" in warnings[0]
    response = alice_client.post(
        url, {**base, "name": "down", "url": "127.0.0.1:1", "protocol": "http", "model_name": "zen-bigram"}
    )
    assert any("server unreachable" in m for m in messages_of(response))


@pytest.mark.triton
def test_opening_a_campaign_warns_about_models_triton_does_not_serve(acme, alice_client, triton_server):
    acme.right.endpoint = endpoint_for(acme, model="no-such-model", url=triton_server.grpc_url)
    acme.right.save()
    Campaign.objects.filter(pk=acme.campaign.pk).update(status=Campaign.Status.DRAFT)
    response = alice_client.post(
        reverse("admin:battles_campaign_changelist"),
        {"action": "open_campaigns", "_selected_action": [acme.campaign.pk]},
    )
    assert response.status_code == 302
    notes = messages_of(response)
    assert any("is open" in m for m in notes)
    warnings = [m for m in notes if "does not report a model ready" in m]
    assert len(warnings) == 1 and "no-such-model" in warnings[0]


def test_a_campaign_links_to_its_leaderboard(acme, alice_client):
    link = f'href="{reverse("ranking:leaderboard", args=[acme.campaign.pk])}"'
    assert link in alice_client.get(change_url(acme.campaign)).content.decode()
    assert link in alice_client.get(reverse("admin:battles_campaign_changelist")).content.decode()


@pytest.mark.triton
def test_a_voided_battle_does_not_use_up_its_prompt(acme, bob, bob_client, triton_server):
    Prompt.objects.filter(campaign=acme.campaign).exclude(pk=acme.campaign.prompts.first().pk).delete()
    only = acme.campaign.prompts.get()
    _battle(acme, bob, prompt=only, status=Battle.Status.VOID)
    assert list(selectors.prompt_candidates(campaign=acme.campaign, user=bob)) == [only]
    # End to end: after the void the same (only) prompt comes back; once voted on, it is used up.
    battle, _ = start_battle(bob_client, acme.campaign)
    assert battle.prompt == only and battle.status == Battle.Status.READY
    assert bob_client.post(reverse("battles:vote", args=[battle.pk]), {"choice": "tie"}).status_code == 302
    assert list(selectors.prompt_candidates(campaign=acme.campaign, user=bob)) == []


def test_open_refusal_is_a_message_not_a_crash(acme, alice_client):
    RaterPoolFactory.create(organization=acme.organization)
    acme.campaign.rater_pools.clear()
    Campaign.objects.filter(pk=acme.campaign.pk).update(status=Campaign.Status.DRAFT)
    response = alice_client.post(
        reverse("admin:battles_campaign_changelist"),
        {"action": "open_campaigns", "_selected_action": [acme.campaign.pk]},
    )
    assert any("at least one rater pool" in m for m in messages_of(response))
    with pytest.raises(Conflict):
        services.campaign_open(campaign=acme.campaign, actor=None)


def test_the_console_sets_turns_and_the_buffer_and_shows_what_waits(acme, alice_client):
    Battle.objects.create(
        organization=acme.organization,
        campaign=acme.campaign,
        prompt=acme.campaign.prompts.first(),
        left=acme.left,
        right=acme.right,
        status=Battle.Status.READY,
    )
    page = alice_client.get(change_url(acme.campaign)).content.decode()
    assert "Battles generated ahead" in page and "1 ready, 0 being generated (of 0)" in page
    data = campaign_form_data(acme.campaign, max_turns=3, buffer_size=8, buffer_max_age_s=600)
    response = alice_client.post(change_url(acme.campaign), data)
    assert response.status_code == 302, form_errors(response)
    acme.campaign.refresh_from_db()
    assert (acme.campaign.max_turns, acme.campaign.buffer_size, acme.campaign.buffer_max_age_s) == (3, 8, 600)
    refused = alice_client.post(change_url(acme.campaign), campaign_form_data(acme.campaign, max_turns=11))
    assert refused.status_code == 200 and "max_turns" in form_errors(refused)


def test_a_battles_turns_are_in_the_console(acme, bob, alice_client):
    from battles.models import Turn

    battle = _battle(acme, bob)
    Turn.objects.create(battle=battle, index=1, text="And in French?", text_hash="x")
    page = alice_client.get(reverse("admin:battles_battle_change", args=[battle.pk])).content.decode()
    assert "And in French?" in page
