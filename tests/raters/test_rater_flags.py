"""Flagging a rater: audited, and the leaderboards of the campaigns they voted in are recomputed."""

from __future__ import annotations

import pytest
from django.urls import reverse

from raters.models import AuditEvent, RaterFlag
from tests.conftest import start_battle

pytestmark = pytest.mark.django_db


@pytest.mark.triton
def test_flag_and_unflag_through_the_console(
    acme, alice, bob, bob_client, alice_client, monkeypatch, django_capture_on_commit_callbacks, triton_server
):
    battle, _ = start_battle(bob_client, acme.campaign)
    bob_client.post(reverse("battles:vote", args=[battle.pk]), {"choice": "left"})
    scheduled: list[int] = []
    monkeypatch.setattr("ranking.services.leaderboards_schedule", lambda campaign_id: scheduled.append(campaign_id))
    with django_capture_on_commit_callbacks(execute=True):
        response = alice_client.post(
            reverse("admin:raters_raterflag_add"),
            {"organization": acme.organization.pk, "rater": bob.pk, "reason": "answers in 300 ms"},
        )
    assert response.status_code == 302
    flag = RaterFlag.objects.get(rater=bob)
    assert AuditEvent.objects.filter(action="rater.flagged", object_id=str(flag.pk)).exists()
    assert scheduled == [acme.campaign.pk]
    with django_capture_on_commit_callbacks(execute=True):
        response = alice_client.post(
            reverse("admin:raters_raterflag_changelist"),
            {"action": "clear_selected", "_selected_action": [flag.pk]},
        )
    assert response.status_code == 302
    # Cleared, not deleted: the row stays with who cleared it and when, and the clear is audited.
    flag.refresh_from_db()
    assert flag.cleared_at is not None and flag.cleared_by == alice and not flag.in_force
    assert AuditEvent.objects.filter(action="rater.flag_cleared", object_id=str(flag.pk), actor=alice).exists()
    assert scheduled == [acme.campaign.pk, acme.campaign.pk]
    # A flag is never deleted from the console.
    assert (
        alice_client.post(reverse("admin:raters_raterflag_delete", args=[flag.pk]), {"post": "yes"}).status_code == 403
    )
    assert RaterFlag.objects.filter(pk=flag.pk).exists()


def test_recompute_action_queues_a_task(acme, alice_client, monkeypatch, django_capture_on_commit_callbacks):
    queued: list[int] = []
    monkeypatch.setattr(
        "ranking.tasks.leaderboards_recompute_task.delay",
        lambda campaign_id, organization_id: queued.append(campaign_id),
    )
    with django_capture_on_commit_callbacks(execute=True):
        response = alice_client.post(
            reverse("admin:battles_campaign_changelist"),
            {"action": "recompute_leaderboards", "_selected_action": [acme.campaign.pk]},
        )
    assert response.status_code == 302
    assert queued == [acme.campaign.pk]


def test_bulk_delete_in_the_console_is_audited(acme, alice_client):
    from raters.models import Invitation
    from raters.services import invitation_create

    invitations = [invitation_create(pool=acme.pool, actor=None) for _ in range(2)]
    response = alice_client.post(
        reverse("admin:raters_invitation_changelist"),
        {"action": "delete_selected", "_selected_action": [i.pk for i in invitations], "post": "yes"},
    )
    assert response.status_code == 302
    assert not Invitation.objects.exists()
    deleted = AuditEvent.objects.filter(action="invitation.deleted").values_list("object_id", flat=True)
    assert sorted(deleted) == sorted(str(i.pk) for i in invitations)
