"""Lower apps announce, higher apps subscribe: signals are sent after commit (never for a rolled-back
change), a failing receiver does not fail the write, and tasks queued in a transaction leave on commit."""

from __future__ import annotations

import pytest
from celery.app.task import Task
from django.db import transaction
from django.urls import reverse

from battles import hooks as battle_hooks
from battles import services as battle_services
from battles.models import Vote
from ranking import selectors as ranking_selectors
from ranking.tasks import leaderboards_recompute_task
from raters import hooks as rater_hooks
from serving import hooks as serving_hooks
from tests.conftest import start_battle


@pytest.fixture
def sent(monkeypatch):  # type: ignore[no-untyped-def]
    """Records what ranking's receivers would schedule, instead of scheduling it."""
    calls: list[tuple[str, int]] = []
    monkeypatch.setattr(
        "ranking.services.leaderboards_schedule",
        lambda campaign_id, **kwargs: calls.append(("schedule", campaign_id)),
    )
    monkeypatch.setattr(
        "ranking.services.leaderboards_recompute_soon", lambda campaign_id: calls.append(("now", campaign_id))
    )
    return calls


@pytest.mark.django_db
@pytest.mark.triton
@pytest.mark.usefixtures("triton_server")
def test_a_stored_vote_is_announced_after_commit_and_ranking_schedules_a_recompute(
    acme, bob, bob_client, sent, django_capture_on_commit_callbacks
):
    battle, _ = start_battle(bob_client, acme.campaign)
    heard: list[dict[str, object]] = []

    def listener(sender, **kwargs):  # type: ignore[no-untyped-def]
        heard.append(kwargs)

    battle_hooks.vote_stored.connect(listener)
    try:
        with django_capture_on_commit_callbacks(execute=False) as callbacks:
            vote = battle_services.vote_submit(battle_id=battle.pk, user=bob, choice="left")
        assert heard == [] and sent == []  # nothing before the commit
        for callback in callbacks:
            callback()
    finally:
        battle_hooks.vote_stored.disconnect(listener)
    assert heard == [
        {
            "signal": battle_hooks.vote_stored,
            "campaign_id": acme.campaign.pk,
            "vote_id": vote.pk,
            "organization_id": acme.organization.pk,
        }
    ]
    assert sent == [("schedule", acme.campaign.pk)]


@pytest.mark.django_db
def test_a_rolled_back_change_announces_nothing(acme, sent, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        try:
            with transaction.atomic():
                battle_services.leaderboards_refresh_request(campaign=acme.campaign)
                raise RuntimeError("roll back")
        except RuntimeError:
            pass
    assert callbacks == [] and sent == []
    with django_capture_on_commit_callbacks(execute=True):
        battle_services.leaderboards_refresh_request(campaign=acme.campaign)
    assert sent == [("now", acme.campaign.pk)]


@pytest.mark.django_db
@pytest.mark.triton
@pytest.mark.usefixtures("triton_server")
def test_a_failing_receiver_does_not_fail_the_vote(acme, bob_client, monkeypatch, django_capture_on_commit_callbacks):
    def broker_down(campaign_id):  # type: ignore[no-untyped-def]
        raise ConnectionError("broker down")

    monkeypatch.setattr("ranking.services.leaderboards_schedule", broker_down)
    battle, _ = start_battle(bob_client, acme.campaign)
    with django_capture_on_commit_callbacks(execute=True):
        response = bob_client.post(reverse("battles:vote", args=[battle.pk]), {"choice": "tie"})
    assert response.status_code == 302
    assert Vote.objects.filter(battle=battle).exists()


@pytest.mark.django_db
@pytest.mark.triton
@pytest.mark.usefixtures("triton_server")
def test_a_flag_change_schedules_the_campaigns_the_rater_voted_in(
    acme, bob, bob_client, sent, django_capture_on_commit_callbacks
):
    battle, _ = start_battle(bob_client, acme.campaign)
    bob_client.post(reverse("battles:vote", args=[battle.pk]), {"choice": "left"})
    sent.clear()
    with django_capture_on_commit_callbacks(execute=True):
        rater_hooks.send_on_commit(
            rater_hooks.rater_flag_changed, sender=None, organization_id=acme.organization.pk, rater_id=bob.pk
        )
    assert sent == [("schedule", acme.campaign.pk)]


def test_higher_apps_registered_their_answers():
    assert battle_hooks._interval_source == [ranking_selectors.current_intervals]
    assert battle_services.endpoint_has_battles in serving_hooks._usage_checks


@pytest.fixture
def queued(monkeypatch):  # type: ignore[no-untyped-def]
    calls: list[tuple[object, ...]] = []
    monkeypatch.setattr(Task, "apply_async", lambda self, *args, **kwargs: calls.append(args))
    return calls


@pytest.mark.django_db
def test_a_task_queued_inside_a_transaction_leaves_on_commit(queued, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        leaderboards_recompute_task.delay(7)
    assert queued == [] and len(callbacks) == 1
    callbacks[0]()
    assert queued == [((7,), {})]


def test_a_task_queued_outside_a_transaction_leaves_at_once(queued):
    leaderboards_recompute_task.delay(7)
    assert queued == [((7,), {})]
