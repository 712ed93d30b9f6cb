from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from raters.models import AuditEvent, Invitation, Membership
from raters.services import invitation_create
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def test_invited_person_signs_up_joins_the_pool_and_sees_the_campaign(acme, alice):
    from django.test import Client

    invitation = invitation_create(pool=acme.pool, actor=alice)
    client = Client()
    response = client.get(invitation.path)
    assert response.status_code == 302 and reverse("account_login") in response["Location"]
    signup = client.post(reverse("account_signup"), {
        "email": "dana@acme.test", "password1": "a-long-enough-pass-1", "password2": "a-long-enough-pass-1",
    })
    assert signup.status_code == 302
    assert "Join" in client.get(invitation.path).content.decode()  # GET never joins
    assert not acme.pool.members.filter(email="dana@acme.test").exists()
    client.post(invitation.path)
    assert acme.pool.members.filter(email="dana@acme.test").exists()
    assert Membership.objects.get(user__email="dana@acme.test").role == "rater"
    assert acme.campaign.name in client.get(reverse("battles:campaigns")).content.decode()
    assert AuditEvent.objects.filter(action="pool.member_added", organization=acme.organization).exists()


def test_used_up_expired_and_wrong_email_invitations_are_refused(acme, alice):
    from tests.conftest import login

    used = invitation_create(pool=acme.pool, actor=alice, max_uses=1)
    first, second = UserFactory(), UserFactory()
    login(first).post(used.path)
    response = login(second).post(used.path)
    assert response.status_code == 400 and "already been used" in response.content.decode()

    expired = invitation_create(pool=acme.pool, actor=alice)
    Invitation.objects.filter(pk=expired.pk).update(expires_at=timezone.now() - timedelta(minutes=1))
    assert "expired" in login(second).post(expired.path).content.decode()

    addressed = invitation_create(pool=acme.pool, actor=alice, email="someone@acme.test")
    assert "another email" in login(second).post(addressed.path).content.decode()
    assert not acme.pool.members.filter(pk=second.pk).exists()


def test_unknown_invitation_token(bob_client):
    assert bob_client.post(reverse("raters:invitation", args=["not-a-token"])).status_code == 404
    assert bob_client.get(reverse("raters:invitation", args=["not-a-token"])).status_code == 404
