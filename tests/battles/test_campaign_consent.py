"""A campaign's own instructions (markdown, sanitised) and consent step, for every rater (invited, signed
up or from a study): no battle before the rater has agreed to the consent text the page showed; the
agreement is a row per rater and text, so a changed text is asked again; declining records nothing;
an outsider cannot post it; a crowd participant who agreed to their study's consent is not asked twice."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from battles.models import Battle, Campaign, Participant, RaterConsent, Study, consent_hash
from battles.selectors import campaign_consent_due
from tests.conftest import Tenant
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

CONSENT = "I agree that my **votes** are stored with my account id. <script>alert(1)</script>"


def _with_consent(tenant: Tenant, text: str = CONSENT) -> Campaign:
    Campaign.objects.filter(pk=tenant.campaign.pk).update(consent_text=text)
    tenant.campaign.refresh_from_db()
    return tenant.campaign


def _next(client: Client, campaign: Campaign) -> str:
    response = client.post(reverse("battles:next", args=[campaign.pk]))
    assert response.status_code == 302
    return str(response["Location"])


def test_instructions_are_rendered_markdown_and_sanitised(acme: Tenant, bob_client: Client) -> None:
    Campaign.objects.filter(pk=acme.campaign.pk).update(
        instructions="## How to judge\n\nPrefer the **correct** answer. <img src=x onerror=alert(1)>"
    )
    page = bob_client.get(reverse("battles:campaign", args=[acme.campaign.pk])).content.decode()
    assert 'id="instructions"' in page and "How to judge</p>" in page and "<strong>correct</strong>" in page
    assert "<img" not in page and "&lt;img" in page  # markup in the text is shown as text, never run
    assert 'id="consent"' not in page  # no consent text: no consent step, the start button as before
    assert 'id="start"' in page


def test_no_battle_before_consent_then_one_after(acme: Tenant, bob: User, bob_client: Client) -> None:
    campaign = _with_consent(acme)
    detail = reverse("battles:campaign", args=[campaign.pk])
    page = bob_client.get(detail).content.decode()
    assert 'id="consent"' in page and "<strong>votes</strong>" in page and "<script>alert" not in page
    assert 'id="start"' not in page
    assert _next(bob_client, campaign) == detail  # sent back to read it
    assert not Battle.objects.filter(campaign=campaign).exists()
    agreed = bob_client.post(
        reverse("battles:campaign_consent", args=[campaign.pk]), {"agree": "yes", "text": consent_hash(CONSENT)}
    )
    assert agreed.status_code == 302 and agreed["Location"] == detail
    [row] = RaterConsent.objects.filter(campaign=campaign, rater=bob)
    assert row.text_hash == consent_hash(CONSENT) and row.organization_id == campaign.organization_id
    assert not campaign_consent_due(campaign=campaign, user=bob)
    assert "/b/" in _next(bob_client, campaign)  # now a battle
    assert Battle.objects.filter(campaign=campaign, rater=bob).count() == 1
    # Agreeing again keeps the one row.
    bob_client.post(
        reverse("battles:campaign_consent", args=[campaign.pk]), {"agree": "yes", "text": consent_hash(CONSENT)}
    )
    assert RaterConsent.objects.filter(campaign=campaign, rater=bob).count() == 1


def test_declining_records_nothing_and_shows_no_battle(acme: Tenant, bob: User, bob_client: Client) -> None:
    campaign = _with_consent(acme)
    declined = bob_client.post(reverse("battles:campaign_consent", args=[campaign.pk]), {"agree": "no"})
    assert declined.status_code == 200 and "No battles without consent" in declined.content.decode()
    assert not RaterConsent.objects.exists()
    assert _next(bob_client, campaign) == reverse("battles:campaign", args=[campaign.pk])


def test_a_changed_text_is_asked_again_and_the_old_one_cannot_be_agreed_to(
    acme: Tenant, bob: User, bob_client: Client
) -> None:
    campaign = _with_consent(acme)
    url = reverse("battles:campaign_consent", args=[campaign.pk])
    bob_client.post(url, {"agree": "yes", "text": consent_hash(CONSENT)})
    campaign = _with_consent(acme, CONSENT + "\n\nAnd the answers you type may be published.")
    assert campaign_consent_due(campaign=campaign, user=bob)
    stale = bob_client.post(url, {"agree": "yes", "text": consent_hash(CONSENT)})
    assert stale.status_code == 409 and "changed" in stale.content.decode()
    assert RaterConsent.objects.filter(rater=bob).count() == 1  # only the first text's
    bob_client.post(url, {"agree": "yes", "text": consent_hash(campaign.consent_text)})
    assert RaterConsent.objects.filter(rater=bob).count() == 2 and not campaign_consent_due(campaign=campaign, user=bob)


def test_an_outsider_cannot_consent_or_see_it(acme: Tenant, globex: Tenant, charlie_client: Client) -> None:
    campaign = _with_consent(acme)
    url = reverse("battles:campaign_consent", args=[campaign.pk])
    assert charlie_client.post(url, {"agree": "yes", "text": consent_hash(CONSENT)}).status_code == 404
    assert charlie_client.get(reverse("battles:campaign", args=[campaign.pk])).status_code == 404
    assert not RaterConsent.objects.exists()
    assert Client().post(url, {"agree": "yes"}).status_code == 302  # to the login page


def test_a_participant_who_agreed_to_the_studys_consent_is_not_asked_again(acme: Tenant) -> None:
    campaign = _with_consent(acme)
    study = Study.objects.create(
        organization=acme.organization,
        campaign=campaign,
        pool=acme.pool,
        name="wave 1",
        consent_text="The study's own consent.",
        completion_code="C0DE",
    )
    user = UserFactory.create()
    acme.pool.members.add(user)
    participant = Participant.objects.create(
        organization=acme.organization, study=study, user=user, vendor_participant_id="p1"
    )
    assert campaign_consent_due(campaign=campaign, user=user)  # not yet agreed to the study's either
    Participant.objects.filter(pk=participant.pk).update(consented_at=participant.entered_at)
    assert not campaign_consent_due(campaign=campaign, user=user)
    # Without a consent of its own, the study's participant agrees to the campaign's like anyone.
    Study.objects.filter(pk=study.pk).update(consent_text="")
    assert campaign_consent_due(campaign=campaign, user=user)
