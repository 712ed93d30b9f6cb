from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from raters.models import AuditEvent, Invitation, Membership
from raters.services import invitation_create
from raters.signals import PENDING_INVITATION_SESSION_KEY
from tests.factories import PASSWORD, UserFactory

pytestmark = pytest.mark.django_db


SIGNUP = {"email": "dana@acme.test", "password1": "a-long-enough-pass-1", "password2": "a-long-enough-pass-1"}


def test_logged_out_invitee_sees_the_invitation_signs_up_and_is_in_the_pool_without_another_click(acme, alice):
    from django.test import Client

    invitation = invitation_create(pool=acme.pool, actor=alice)
    client = Client()
    page = client.get(invitation.path)
    assert page.status_code == 200
    html = page.content.decode()
    assert acme.organization.name in html and acme.pool.name in html and "Sign up and join" in html
    assert PENDING_INVITATION_SESSION_KEY not in client.session  # a GET keeps nothing

    chosen = client.post(invitation.path, {"then": "signup"})
    assert chosen.status_code == 302
    assert chosen["Location"] == reverse("account_signup") + "?next=%2F"
    signup = client.post(chosen["Location"], SIGNUP)
    assert signup.status_code == 302 and signup["Location"] == "/"

    assert acme.pool.members.filter(email="dana@acme.test").exists()
    assert Membership.objects.get(user__email="dana@acme.test").role == "rater"
    assert Invitation.objects.get(pk=invitation.pk).uses == 1
    assert AuditEvent.objects.filter(action="pool.member_added", organization=acme.organization).exists()
    home = client.get("/").content.decode()
    assert acme.campaign.name in home and f"You joined {acme.pool.name}" in home
    assert PENDING_INVITATION_SESSION_KEY not in client.session


def test_logged_out_invitee_with_an_account_logs_in_and_joins(acme, alice):
    from django.test import Client

    invitation = invitation_create(pool=acme.pool, actor=alice)
    dana = UserFactory.create(email="dana@acme.test")
    client = Client()
    chosen = client.post(invitation.path, {"then": "login"})
    assert chosen["Location"] == reverse("account_login") + "?next=%2F"
    login_response = client.post(chosen["Location"], {"login": dana.email, "password": PASSWORD})
    assert login_response.status_code == 302 and login_response["Location"] == "/"
    assert acme.pool.members.filter(pk=dana.pk).exists()
    assert acme.campaign.name in client.get("/").content.decode()


def test_a_link_preview_or_a_mere_visit_joins_nobody(acme, alice):
    """Only the visitor's own POST keeps the token: a GET (a preview, an image pointing at the link)
    followed by a login leaves the person out of the pool."""
    from django.test import Client

    invitation = invitation_create(pool=acme.pool, actor=alice)
    dana = UserFactory.create(email="dana@acme.test")
    client = Client()
    client.get(invitation.path)
    client.post(reverse("account_login"), {"login": dana.email, "password": PASSWORD})
    assert not acme.pool.members.filter(pk=dana.pk).exists()
    assert Invitation.objects.get(pk=invitation.pk).uses == 0


def test_logged_out_invitee_is_told_before_signing_up_that_a_link_is_used_up_or_expired(acme, alice):
    from django.test import Client

    used = invitation_create(pool=acme.pool, actor=alice, max_uses=1)
    Invitation.objects.filter(pk=used.pk).update(uses=1)
    expired = invitation_create(pool=acme.pool, actor=alice)
    Invitation.objects.filter(pk=expired.pk).update(expires_at=timezone.now() - timedelta(minutes=1))
    client = Client()
    for invitation, words in ((used, "already been used"), (expired, "expired")):
        page = client.get(invitation.path)
        assert page.status_code == 410 and words in page.content.decode()
        assert "Sign up and join" not in page.content.decode()
        assert client.post(invitation.path, {"then": "signup"}).status_code == 410
        assert PENDING_INVITATION_SESSION_KEY not in client.session


def test_an_invitation_for_another_address_is_refused_at_login_with_a_message(acme, alice):
    from django.test import Client

    invitation = invitation_create(pool=acme.pool, actor=alice, email="someone@acme.test")
    dana = UserFactory.create(email="dana@acme.test")
    client = Client()
    client.post(invitation.path, {"then": "login"})
    response = client.post(reverse("account_login"), {"login": dana.email, "password": PASSWORD}, follow=True)
    assert "another email address" in response.content.decode()
    assert not acme.pool.members.filter(pk=dana.pk).exists()


def test_logged_in_invitee_still_confirms_with_a_post(acme, alice):
    from tests.conftest import login

    invitation = invitation_create(pool=acme.pool, actor=alice)
    dana = UserFactory.create(email="dana@acme.test")
    client = login(dana)
    assert "Join as a rater" in client.get(invitation.path).content.decode()  # GET never joins
    assert not acme.pool.members.filter(pk=dana.pk).exists()
    assert client.post(invitation.path).status_code == 302
    assert acme.pool.members.filter(pk=dana.pk).exists()


def test_used_up_expired_and_wrong_email_invitations_are_refused(acme, alice):
    from tests.conftest import login

    used = invitation_create(pool=acme.pool, actor=alice, max_uses=1)
    first, second = UserFactory.create(), UserFactory.create()
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


def test_an_invitation_made_in_the_console_is_mailed_with_its_absolute_link(
    acme, alice, settings, mailoutbox, django_capture_on_commit_callbacks
):
    from django.test import Client

    manager = Client()
    manager.force_login(alice)
    expires = timezone.localtime(timezone.now() + timedelta(days=3))
    form = {"pool": acme.pool.pk, "email": "erin@acme.test", "max_uses": 1}
    form |= {"expires_at_0": expires.date().isoformat(), "expires_at_1": expires.strftime("%H:%M:%S")}
    with django_capture_on_commit_callbacks(execute=True):
        assert manager.post(reverse("admin:raters_invitation_add"), form).status_code == 302
    invitation = Invitation.objects.get(pool=acme.pool, email="erin@acme.test")
    link = f"http://testserver/invite/{invitation.token}/"
    (mail,) = mailoutbox
    assert mail.to == ["erin@acme.test"] and acme.pool.name in mail.subject and link in mail.body
    # The console shows the same absolute link, on the list and on the invitation's page.
    assert link in manager.get(reverse("admin:raters_invitation_changelist")).content.decode()
    assert link in manager.get(reverse("admin:raters_invitation_change", args=[invitation.pk])).content.decode()
    # Behind a proxy the operator names the site's address, and every link is built from it.
    settings.ARENA_SITE_URL = "https://arena.example.org"
    page = manager.get(reverse("admin:raters_invitation_changelist")).content.decode()
    assert f"https://arena.example.org/invite/{invitation.token}/" in page and link not in page
    # An invitation with no address (a link for many) sends nothing.
    with django_capture_on_commit_callbacks(execute=True):
        invitation_create(pool=acme.pool, actor=alice, max_uses=5)
    assert len(mailoutbox) == 1


def test_a_crowd_study_link_in_the_console_is_absolute(acme, alice):
    from django.test import Client

    from battles.models import Study

    study = Study.objects.create(
        organization=acme.organization, campaign=acme.campaign, name="wave", pool=acme.pool, completion_code="C0DE"
    )
    manager = Client()
    manager.force_login(alice)
    page = manager.get(reverse("admin:battles_study_change", args=[study.pk])).content.decode()
    assert f"http://testserver/s/{study.slug}/?PROLIFIC_PID=" in page
