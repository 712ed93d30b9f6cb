"""Roles: only owners (and superusers) grant or revoke owner and manager; an organisation always keeps
an owner; every change goes through the services and leaves an audit row."""

from __future__ import annotations

import pytest
from django.urls import reverse

from core.errors import Conflict, PermissionDenied
from raters import services
from raters.models import AuditEvent, Membership, Role
from tests.factories import UserFactory

from .admin_forms import form_errors

pytestmark = pytest.mark.django_db


def membership(user, tenant):  # type: ignore[no-untyped-def]
    return Membership.objects.get(user=user, organization=tenant.organization)


def change(client, m, role):  # type: ignore[no-untyped-def]
    return client.post(reverse("admin:raters_membership_change", args=[m.pk]), {"role": role})


def delete(client, m):  # type: ignore[no-untyped-def]
    return client.post(reverse("admin:raters_membership_delete", args=[m.pk]), {"post": "yes"})


def test_manager_cannot_demote_the_owner(acme, alice, dave_client):
    response = change(dave_client, membership(alice, acme), Role.RATER)
    assert response.status_code == 200
    assert "Only an owner" in form_errors(response)
    assert membership(alice, acme).role == Role.OWNER


def test_manager_cannot_promote_themselves(acme, dave, dave_client):
    response = change(dave_client, membership(dave, acme), Role.OWNER)
    assert response.status_code == 200
    assert "Only an owner" in form_errors(response)
    assert membership(dave, acme).role == Role.MANAGER


def test_manager_cannot_make_a_rater_manager(acme, bob, dave_client):
    response = change(dave_client, membership(bob, acme), Role.MANAGER)
    assert response.status_code == 200
    assert "Only an owner" in form_errors(response)
    assert membership(bob, acme).role == Role.RATER


def test_manager_cannot_remove_the_owner(acme, alice, dave_client):
    assert delete(dave_client, membership(alice, acme)).status_code == 403
    assert membership(alice, acme).role == Role.OWNER


def test_manager_changes_a_raters_role_with_an_audit_row(acme, bob, dave, dave_client):
    response = change(dave_client, membership(bob, acme), Role.VIEWER)
    assert response.status_code == 302, form_errors(response)
    assert membership(bob, acme).role == Role.VIEWER
    event = AuditEvent.objects.get(organization=acme.organization, action="membership.changed", actor=dave)
    assert event.data == {"user": bob.pk, "role": Role.VIEWER, "previous_role": Role.RATER}


def test_last_owner_can_neither_step_down_nor_leave(acme, alice, alice_client):
    response = change(alice_client, membership(alice, acme), Role.MANAGER)
    assert response.status_code == 200
    assert "last owner" in form_errors(response)
    assert delete(alice_client, membership(alice, acme)).status_code == 403
    assert membership(alice, acme).role == Role.OWNER


def test_owner_hands_over_then_steps_down(acme, alice, dave, alice_client):
    assert change(alice_client, membership(dave, acme), Role.OWNER).status_code == 302
    response = change(alice_client, membership(alice, acme), Role.MANAGER)
    assert response.status_code == 302, form_errors(response)
    assert membership(dave, acme).role == Role.OWNER and membership(alice, acme).role == Role.MANAGER
    assert (
        AuditEvent.objects.filter(organization=acme.organization, action="membership.changed", actor=alice).count() == 2
    )


def test_owner_removes_a_rater_from_the_organisation_and_its_pools(acme, alice, bob, alice_client):
    assert delete(alice_client, membership(bob, acme)).status_code == 302
    assert not Membership.objects.filter(user=bob, organization=acme.organization).exists()
    assert not acme.pool.members.filter(pk=bob.pk).exists()
    event = AuditEvent.objects.get(organization=acme.organization, action="membership.removed")
    assert event.actor == alice and event.data["user"] == bob.pk and event.data["pools"] == [acme.pool.pk]


def test_bulk_delete_is_not_offered(acme, alice_client):
    html = alice_client.get(reverse("admin:raters_membership_changelist")).content.decode()
    assert "delete_selected" not in html


def test_manager_cannot_add_a_manager_but_can_add_a_rater(acme, dave):
    newcomer = UserFactory.create(email="erin@acme.test")
    with pytest.raises(PermissionDenied, match="Only an owner"):
        services.membership_set(organization=acme.organization, user=newcomer, role=Role.MANAGER, actor=dave)
    assert not Membership.objects.filter(user=newcomer).exists()
    services.membership_set(organization=acme.organization, user=newcomer, role=Role.RATER, actor=dave)
    assert AuditEvent.objects.filter(action="membership.created", actor=dave).exists()


def test_services_keep_the_last_owner_whoever_asks(acme, alice):
    admin = UserFactory.create(email="root@platform.test", is_superuser=True)
    for actor in (alice, admin, None):
        with pytest.raises(Conflict, match="last owner"):
            services.membership_set(organization=acme.organization, user=alice, role=Role.RATER, actor=actor)
        with pytest.raises(Conflict, match="last owner"):
            services.membership_remove(organization=acme.organization, user=alice, actor=actor)
    assert membership(alice, acme).role == Role.OWNER


def test_superuser_may_grant_owner(acme, bob):
    admin = UserFactory.create(email="root@platform.test", is_superuser=True)
    services.membership_set(organization=acme.organization, user=bob, role=Role.OWNER, actor=admin)
    assert membership(bob, acme).role == Role.OWNER
    assert AuditEvent.objects.filter(action="membership.changed", actor=admin).exists()
