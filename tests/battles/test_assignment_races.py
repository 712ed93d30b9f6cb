"""Assignment under races and failures: one open battle per rater, stale and crashed generations."""

from __future__ import annotations

import json
import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from battles import services
from battles.models import Battle, Campaign, Vote
from battles.services import generation as generation_services
from raters.tenancy import principal_scope
from tests.conftest import generation_worker_run, start_battle


@pytest.mark.django_db(transaction=True)
@pytest.mark.triton
def test_concurrent_next_requests_share_one_battle(vote_log_purge, acme, bob, triton_server):
    n = 4
    barrier = threading.Barrier(n)
    outcomes: list[str] = []
    lock = threading.Lock()

    def ask() -> None:
        try:
            barrier.wait()
            with principal_scope(bob):  # a thread is its own edge: it opens the rater's scope
                assignment = services.battle_assign(campaign=acme.campaign, user=bob, session_key="s")
            result = str(assignment.battle.pk)
        except services.NothingToRate:
            result = "still generating"
        finally:
            connection.close()
        with lock:
            outcomes.append(result)

    threads = [threading.Thread(target=ask) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert Battle.objects.filter(rater=bob).count() == 1
    battle_id = str(Battle.objects.get(rater=bob).pk)
    assert set(outcomes) <= {battle_id, "still generating"} and battle_id in outcomes


@pytest.mark.django_db
@pytest.mark.triton
def test_stale_generating_battle_is_voided_and_replaced(acme, bob, bob_client, triton_server):
    stuck, _ = start_battle(bob_client, acme.campaign)
    Battle.objects.filter(pk=stuck.pk).update(
        status=Battle.Status.GENERATING,
        requested_at=timezone.now() - timedelta(seconds=services.STALE_GENERATION_S + 1),
    )
    fresh, _ = start_battle(bob_client, acme.campaign)
    assert fresh.pk != stuck.pk and fresh.status == Battle.Status.READY
    stuck.refresh_from_db()
    assert stuck.status == Battle.Status.VOID


@pytest.mark.django_db
@pytest.mark.triton
def test_recent_generating_battle_is_handed_out_again_as_preparing(acme, bob, bob_client, triton_server):
    stuck, _ = start_battle(bob_client, acme.campaign)
    Battle.objects.filter(pk=stuck.pk).update(status=Battle.Status.GENERATING)
    response = bob_client.post(reverse("battles:next", args=[acme.campaign.pk]))
    assert response.status_code == 302 and response["Location"] == reverse("battles:battle", args=[stuck.pk])
    page = bob_client.get(response["Location"]).content.decode()
    assert "Preparing your next battle" in page and 'name="choice"' not in page


@pytest.mark.django_db
def test_crash_during_generation_voids_instead_of_leaving_it_generating(acme, bob, monkeypatch):
    def explode(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise RuntimeError("client library bug")

    monkeypatch.setattr(generation_services, "generate_pair", explode)
    assignment = services.battle_assign(campaign=acme.campaign, user=bob, session_key="s")
    assert assignment.battle.status == Battle.Status.GENERATING  # queued for a generation worker
    assert generation_worker_run() == 1
    assignment.battle.refresh_from_db()
    assert assignment.battle.status == Battle.Status.VOID
    generation = assignment.battle.generations.first()
    assert generation is not None
    assert "client library bug" in generation.error


@pytest.mark.django_db
@pytest.mark.triton
def test_rater_removed_from_pool_cannot_vote_on_a_pending_battle(acme, bob, bob_client, triton_server):
    battle, _ = start_battle(bob_client, acme.campaign)
    acme.pool.members.remove(bob)
    response = bob_client.post(reverse("battles:vote", args=[battle.pk]), {"choice": "left"})
    assert response.status_code == 409 and "no longer in a rater pool" in response.content.decode()
    assert not Vote.objects.exists()


@pytest.mark.django_db
def test_a_battle_whose_generation_task_was_lost_is_sent_again_by_the_next_request_or_the_pages_poll(
    acme, bob, bob_client, settings, django_capture_on_commit_callbacks
):
    """The web worker that created the battle died between the commit and the send (the fault campaign's
    web-worker kill): no generation worker ever starts it. The rater's next request sends its task again
    (once per LOST_TASK_S) instead of leaving the rater on "Preparing" until the battle is stale."""
    import redis

    if not settings.REDIS_URL:
        pytest.fail("needs the Redis broker (scripts/test sets REDIS_URL)")
    broker = redis.Redis.from_url(settings.REDIS_URL)

    def generation_queued() -> int:
        return int(broker.llen("generation"))  # type: ignore[arg-type]  # the sync client

    lost = Battle.objects.create(
        organization=acme.organization,
        campaign=acme.campaign,
        rater=bob,
        pool=acme.pool,
        prompt=acme.campaign.prompts.earliest("id"),
        left=acme.left,
        right=acme.right,
    )
    Battle.objects.filter(pk=lost.pk).update(requested_at=timezone.now() - timedelta(seconds=services.LOST_TASK_S + 5))
    Campaign.objects.filter(pk=acme.campaign.pk).update(status=Campaign.Status.OPEN)
    queued = generation_queued()
    with django_capture_on_commit_callbacks(execute=True):
        response = bob_client.post(reverse("battles:next", args=[acme.campaign.pk]))
    assert response["Location"] == reverse("battles:battle", args=[lost.pk])  # the same battle, preparing
    assert generation_queued() == queued + 1  # its task, sent again
    with django_capture_on_commit_callbacks(execute=True):
        bob_client.post(reverse("battles:next", args=[acme.campaign.pk]))
    assert generation_queued() == queued + 1  # not again within LOST_TASK_S
    message = json.loads(broker.lindex("generation", 0))  # type: ignore[arg-type]  # the newest: Celery's message for this battle
    assert message["headers"]["task"] == "battles.tasks.battle_generate_task"
    assert message["headers"]["argsrepr"] == repr((str(lost.pk),))
    # A rater who just waits on the "preparing" page is served too: its poll sends the task (once per
    # LOST_TASK_S; the mark of the send above is cleared to stand for the time passing).
    from django.core.cache import cache

    cache.delete(f"battles:generation-resent:{lost.pk}")
    with django_capture_on_commit_callbacks(execute=True):
        assert bob_client.get(reverse("battles:state", args=[lost.pk])).json() == {"status": "generating"}
    assert generation_queued() == queued + 2
    with django_capture_on_commit_callbacks(execute=True):
        bob_client.get(reverse("battles:state", args=[lost.pk]))
    assert generation_queued() == queued + 2
