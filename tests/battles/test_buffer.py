"""Battles generated ahead: the campaign's buffer is filled by generation workers (pair and prompt by the
sampling policy, side at random) and claimed atomically by raters, with every rule of the rater checked at
claim time; a rater who finds nothing claimable gets a battle prepared for them, on a page that polls."""

from __future__ import annotations

import threading
import time
from collections import Counter
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.urls import reverse
from django.utils import timezone

from battles import selectors, services
from battles.models import Battle, Campaign, Prompt, Vote
from battles.services import generation as generation_services
from battles.tasks import buffer_maintain_open_task
from raters.tenancy import principal_scope, scopes_disabled
from tests.conftest import Tenant, generation_worker_run, login, start_battle
from tests.factories import MembershipFactory, PromptFactory, UserFactory
from tests.ranking.synth import votes_write

pytestmark = [pytest.mark.django_db]


def _buffered(campaign: Campaign, status: str | None = None) -> list[Battle]:
    battles = Battle.objects.filter(campaign=campaign, rater__isnull=True)
    if status is not None:
        battles = battles.filter(status=status)
    return list(battles.order_by("created_at"))


def _with_buffer(tenant: Tenant, size: int) -> Campaign:
    Campaign.objects.filter(pk=tenant.campaign.pk).update(buffer_size=size)
    tenant.campaign.refresh_from_db()
    return tenant.campaign


def _claim(campaign: Campaign, user, session_key: str = "s") -> services.Assignment:  # type: ignore[no-untyped-def]
    return services.battle_assign(campaign=campaign, user=user, session_key=session_key)


def test_fill_tops_the_buffer_up_with_distinct_prompts_and_queues_each_battle(acme):
    campaign = _with_buffer(acme, 5)
    created = services.buffer_fill(campaign_id=campaign.pk)
    assert len(created) == 5
    battles = _buffered(campaign, Battle.Status.GENERATING)
    assert len(battles) == 5 and len({b.prompt_id for b in battles}) == 5
    assert all(b.pool_id is None and b.claimed_at is None for b in battles)
    assert all({b.left_id, b.right_id} == {acme.left.pk, acme.right.pk} for b in battles)
    assert all(b.params["max_tokens"] == campaign.max_tokens and "seed" in b.params for b in battles)
    # Full: a second fill (another worker, or a repeated request) adds nothing.
    assert services.buffer_fill(campaign_id=campaign.pk) == []
    assert len(_buffered(campaign)) == 5


def test_pair_side_is_a_coin_flip_in_filled_battles(acme):
    campaign = _with_buffer(acme, 60)
    for _ in range(12):
        PromptFactory.create_batch(5, campaign=campaign)
    services.buffer_fill(campaign_id=campaign.pk)
    lefts = Counter(b.left_id for b in _buffered(campaign))
    assert sum(lefts.values()) == 60
    assert 15 <= lefts[acme.left.pk] <= 45  # P(outside) < 1e-4 for a fair coin


def test_prompt_pick_prefers_the_least_used_prompts(acme, bob):
    campaign = acme.campaign
    prompts = list(Prompt.objects.filter(campaign=campaign))
    busy = prompts[:-1]
    for prompt in busy:  # every prompt but one already has battles
        Battle.objects.create(
            organization=acme.organization,
            campaign=campaign,
            prompt=prompt,
            left=acme.left,
            right=acme.right,
            status=Battle.Status.VOTED,
        )
    import random

    picked = selectors.buffer_prompt_pick(campaign=campaign, exclude=set(), rng=random.Random(1))
    assert picked == prompts[-1]
    assert (
        selectors.buffer_prompt_pick(campaign=campaign, exclude={p.pk for p in prompts}, rng=random.Random(1)) is None
    )


@pytest.mark.triton
def test_a_rater_claims_the_oldest_ready_battle_and_the_buffer_is_refilled(acme, bob, bob_client, triton_server):
    campaign = _with_buffer(acme, 3)
    services.buffer_fill(campaign_id=campaign.pk)
    assert generation_worker_run() == 3
    ready = _buffered(campaign, Battle.Status.READY)
    assert len(ready) == 3 and all(len(b.generations.all()) == 2 for b in ready)

    response = bob_client.post(reverse("battles:next", args=[campaign.pk]))
    assert response.status_code == 302 and response["Location"] == reverse("battles:battle", args=[ready[0].pk])
    claimed = Battle.objects.get(pk=ready[0].pk)
    assert claimed.rater == bob and claimed.pool == acme.pool and claimed.claimed_at is not None
    assert claimed.session_key  # the session cap counts it
    page = bob_client.get(response["Location"]).content.decode()
    assert "Answer A" in page and 'name="choice"' in page  # no waiting: the answers were ready
    # The claim asked a worker to refill (tasks queued on commit in the test's transaction are not run
    # here): what the worker would do keeps the buffer at its size.
    services.buffer_fill(campaign_id=campaign.pk)
    assert len(_buffered(campaign)) == 3


def _ready_buffer(tenant: Tenant, prompts: list[Prompt]) -> list[Battle]:
    battles = []
    for prompt in prompts:
        battle = Battle.objects.create(
            organization=tenant.organization,
            campaign=tenant.campaign,
            prompt=prompt,
            left=tenant.left,
            right=tenant.right,
            status=Battle.Status.READY,
            ready_at=timezone.now(),
        )
        battles.append(battle)
    return battles


def _rated_by(tenant: Tenant, rater, prompts: list[Prompt]) -> None:  # type: ignore[no-untyped-def]
    """The rater has had a battle on each of these prompts, and voted."""
    Battle.objects.bulk_create(
        Battle(
            organization=tenant.organization,
            campaign=tenant.campaign,
            rater=rater,
            pool=tenant.pool,
            prompt=prompt,
            left=tenant.left,
            right=tenant.right,
            status=Battle.Status.VOTED,
        )
        for prompt in prompts
    )


def test_claim_skips_a_prompt_the_rater_has_seen_by_its_normalised_text(acme, bob):
    campaign = _with_buffer(acme, 2)
    seen = Prompt.objects.filter(campaign=campaign).first()
    assert seen is not None
    _rated_by(acme, bob, [seen])
    duplicate = PromptFactory.create(campaign=campaign, text=seen.text.upper() + "  ")
    assert duplicate.text_hash == seen.text_hash
    other = Prompt.objects.filter(campaign=campaign).exclude(text_hash=seen.text_hash).first()
    first, second = _ready_buffer(acme, [duplicate, other])  # type: ignore[list-item]
    assignment = _claim(campaign, bob)
    assert assignment.battle.pk == second.pk  # the older battle has a prompt bob already rated


def test_claim_skips_a_prompt_at_its_hash_cap(acme, bob, alice):
    campaign = _with_buffer(acme, 2)
    Campaign.objects.filter(pk=campaign.pk).update(prompt_hash_cap=1)
    campaign.refresh_from_db()
    full, fresh = list(Prompt.objects.filter(campaign=campaign)[:2])
    votes_write(
        campaign=campaign,
        pool=acme.pool,
        raters=[alice],
        prompts=[full],
        competitors=[acme.left, acme.right],
        strengths=[1.0, 1.0],
        n=1,
    )
    assert Vote.objects.filter(prompt_hash=full.text_hash).count() == 1
    _, second = _ready_buffer(acme, [full, fresh])
    assert _claim(campaign, bob).battle.pk == second.pk


def test_claim_skips_battles_older_than_the_buffer_age_and_unavailable_competitors(acme, bob):
    campaign = _with_buffer(acme, 3)
    old, withdrawn_pair, good = _ready_buffer(acme, list(Prompt.objects.filter(campaign=campaign)[:3]))
    Battle.objects.filter(pk=old.pk).update(
        created_at=timezone.now() - timedelta(seconds=campaign.buffer_max_age_s + 5)
    )
    # A competitor that is not available (withdrawn here; a model that is down is the same rule): the
    # claim reads selectors.competitors_available, as pair_pick does.
    spare = type(acme.left).objects.create(
        organization=acme.organization,
        campaign=campaign,
        endpoint=acme.left.endpoint,
        version_label="old",
        active=False,
    )
    Battle.objects.filter(pk=withdrawn_pair.pk).update(left=spare)
    assert _claim(campaign, bob).battle.pk == good.pk


def test_nothing_claimable_prepares_a_battle_for_the_rater_behind_a_polling_page(acme, bob, bob_client):
    campaign = _with_buffer(acme, 2)  # empty buffer
    response = bob_client.post(reverse("battles:next", args=[campaign.pk]))
    battle = Battle.objects.get(rater=bob)
    assert response["Location"] == reverse("battles:battle", args=[battle.pk])
    assert battle.status == Battle.Status.GENERATING and battle.generation_started_at is None  # a worker's job
    page = bob_client.get(response["Location"]).content.decode()
    assert "Preparing your next battle" in page and 'name="choice"' not in page
    assert reverse("battles:state", args=[battle.pk]) in page  # what battle.js polls
    assert '<meta http-equiv="refresh"' in page  # inside <noscript>: without script the page refreshes
    state = bob_client.get(reverse("battles:state", args=[battle.pk]))
    assert state.json() == {"status": "generating"} and state["Cache-Control"] == "no-store"
    # Reloading, or asking again from a second tab, hands out the same battle (never a second one).
    again = bob_client.post(reverse("battles:next", args=[campaign.pk]))
    assert again["Location"] == response["Location"] and Battle.objects.filter(rater=bob).count() == 1
    generation_worker_run()  # the worker: no model listens at this tenant's address, so it is voided
    assert bob_client.get(reverse("battles:state", args=[battle.pk])).json() == {"status": "void"}


def test_the_state_endpoint_is_the_raters_own(acme, globex, bob, charlie_client):
    assignment = _claim(_with_buffer(acme, 0), bob)
    assert charlie_client.get(reverse("battles:state", args=[assignment.battle.pk])).status_code == 404
    other = UserFactory.create()
    MembershipFactory.create(user=other, organization=acme.organization)
    acme.pool.members.add(other)
    assert login(other).get(reverse("battles:state", args=[assignment.battle.pk])).status_code == 404


def test_a_redelivered_generation_task_does_not_call_the_models_twice(acme, bob, monkeypatch):
    calls = []

    def once(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(args)
        raise RuntimeError("model call")

    monkeypatch.setattr(generation_services, "generate_pair", once)
    assignment = _claim(acme.campaign, bob)
    services.battle_generate_queued(battle_id=str(assignment.battle.pk))
    services.battle_generate_queued(battle_id=str(assignment.battle.pk))  # late-ack redelivery
    assert len(calls) == 1


def test_closing_the_campaign_voids_the_buffer_and_a_closed_campaign_gets_none(acme, alice):
    campaign = _with_buffer(acme, 3)
    services.buffer_fill(campaign_id=campaign.pk)
    services.campaign_close(campaign=campaign, actor=alice)
    assert _buffered(campaign, Battle.Status.GENERATING) == []
    assert len(_buffered(campaign, Battle.Status.VOID)) == 3
    assert services.buffer_fill(campaign_id=campaign.pk) == []


def test_withdrawing_a_competitor_voids_its_buffered_battles(acme, alice):
    campaign = _with_buffer(acme, 2)
    services.buffer_fill(campaign_id=campaign.pk)
    acme.left.active = False
    services.competitor_save(competitor=acme.left, actor=alice, changed=["active"])
    assert {b.void_reason for b in _buffered(campaign, Battle.Status.VOID)} == {
        "A competitor was withdrawn before the vote."
    }


def test_maintenance_voids_stale_and_lost_battles_and_refills(acme):
    campaign = _with_buffer(acme, 3)
    services.buffer_fill(campaign_id=campaign.pk)
    old, lost, fresh = _buffered(campaign)
    now = timezone.now()
    Battle.objects.filter(pk=old.pk).update(
        status=Battle.Status.READY, created_at=now - timedelta(seconds=campaign.buffer_max_age_s + 1)
    )
    Battle.objects.filter(pk=lost.pk).update(
        generation_started_at=now, requested_at=now - timedelta(seconds=services.STALE_GENERATION_S + 1)
    )
    assert services.buffer_maintain(campaign_id=campaign.pk) == 2
    assert Battle.objects.get(pk=old.pk).void_reason.startswith("Not claimed within")
    assert Battle.objects.get(pk=lost.pk).void_reason == "The answers were never completed."
    waiting = [b for b in _buffered(campaign) if b.status != Battle.Status.VOID]
    assert len(waiting) == 3 and fresh in waiting  # two replacements


@pytest.mark.tenant_scoped
def test_beat_maintenance_lists_campaigns_across_tenants_without_a_scope(acme, globex):
    from raters.tenancy import scopes_disabled

    with scopes_disabled():
        for tenant in (acme, globex):
            Campaign.objects.filter(pk=tenant.campaign.pk).update(buffer_size=2)
    # Queues one maintenance task per open campaign with a buffer, each in its organisation's scope.
    assert buffer_maintain_open_task() == 2


@pytest.mark.django_db(transaction=True)
def test_concurrent_fills_never_overfill(vote_log_purge, acme, alice):
    campaign = _with_buffer(acme, 4)
    if connection.vendor != "postgresql":
        pytest.fail("row locks are PostgreSQL's: run on PostgreSQL (scripts/test)")
    barrier = threading.Barrier(4)

    def fill() -> None:
        try:
            barrier.wait()
            with principal_scope(alice):
                services.buffer_fill(campaign_id=campaign.pk)
        finally:
            connection.close()

    threads = [threading.Thread(target=fill) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(_buffered(campaign)) == 4


@pytest.mark.django_db(transaction=True)
def test_raters_racing_for_one_battle_each_get_a_different_one(vote_log_purge, acme, bob):
    campaign = _with_buffer(acme, 0)
    raters = [bob] + [UserFactory.create() for _ in range(3)]
    for rater in raters[1:]:
        MembershipFactory.create(user=rater, organization=acme.organization)
        acme.pool.members.add(rater)
    ready = _ready_buffer(acme, list(Prompt.objects.filter(campaign=campaign)[:2]))
    barrier = threading.Barrier(len(raters))
    got: dict[int, str] = {}

    def ask(rater) -> None:  # type: ignore[no-untyped-def]
        try:
            barrier.wait()
            with principal_scope(rater):
                assignment = services.battle_assign(campaign=campaign, user=rater, session_key="s")
            got[rater.pk] = str(assignment.battle.pk)
        finally:
            connection.close()

    threads = [threading.Thread(target=ask, args=(rater,)) for rater in raters]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(got) == 4 and len(set(got.values())) == 4  # nobody shares a battle
    buffered_ids = {str(b.pk) for b in ready}
    assert len(buffered_ids & set(got.values())) == 2  # both ready battles were claimed, once each
    for battle in Battle.objects.filter(pk__in=[b.pk for b in ready]):
        assert battle.rater_id in {r.pk for r in raters}


@pytest.mark.django_db(transaction=True)
def test_a_claim_skips_a_battle_another_claim_holds_instead_of_waiting_for_it(vote_log_purge, acme, bob):
    """The claim's one statement passes over a battle that another transaction holds (FOR UPDATE SKIP LOCKED):
    it takes the next one at once, where a plain conditional update would wait for the holder and then find
    the battle gone. The holder here keeps its lock until the claim returns; the claim's session would give
    up after 5 s of waiting for a lock, and it does not wait at all."""
    from django.db import connections

    campaign = _with_buffer(acme, 0)
    first, second = _ready_buffer(acme, list(Prompt.objects.filter(campaign=campaign)[:2]))
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        try:
            with transaction.atomic():
                with scopes_disabled():
                    Battle.objects.select_for_update().get(pk=first.pk)
                held.set()
                release.wait(timeout=30)
        finally:
            connections.close_all()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert held.wait(timeout=30)
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = '5s'")
        started = time.monotonic()
        with principal_scope(bob):
            claimed = services.battle_claim(campaign=campaign, user=bob, pool=acme.pool, session_key="s")
        waited = time.monotonic() - started
    finally:
        release.set()
        holder.join(timeout=30)
        with connection.cursor() as cursor:
            cursor.execute("RESET lock_timeout")
    assert claimed is not None and claimed.pk == second.pk and claimed.rater_id == bob.pk
    assert waited < 4  # not the lock's 5 s: it never waited
    first.refresh_from_db()
    assert first.rater_id is None  # the held battle is still there for the next claim
    with principal_scope(bob):
        Battle.objects.filter(pk=second.pk).update(status=Battle.Status.VOTED)
        assert services.battle_claim(campaign=campaign, user=bob, pool=acme.pool, session_key="s") == first


@pytest.mark.triton
def test_a_second_tab_gets_the_claimed_battle_not_another(acme, bob, bob_client, triton_server):
    campaign = _with_buffer(acme, 2)
    services.buffer_fill(campaign_id=campaign.pk)
    generation_worker_run()
    first, _ = start_battle(bob_client, campaign)
    second = login(bob).post(reverse("battles:next", args=[campaign.pk]))
    assert second["Location"] == reverse("battles:battle", args=[first.pk])
    assert Battle.objects.filter(rater=bob).count() == 1


def test_prompt_pick_draws_at_random_but_never_a_rated_prompt(acme, bob):
    import random

    campaign = acme.campaign
    PromptFactory.create_batch(60, campaign=campaign)
    prompts = list(Prompt.objects.filter(campaign=campaign).order_by("pk"))
    rated, left_over = prompts[:-3], prompts[-3:]
    _rated_by(acme, bob, rated)
    # Most draws hit rated prompts; whatever the draws, only the three unrated ones come out (by the
    # draws or by the fallback that lists every candidate), and each of them can.
    picks = {selectors.prompt_pick(campaign=campaign, user=bob, rng=random.Random(seed)) for seed in range(40)}
    assert picks == set(left_over)
    _rated_by(acme, bob, left_over)
    assert selectors.prompt_pick(campaign=campaign, user=bob, rng=random.Random(1)) is None


def test_a_claim_looks_past_every_battle_the_rater_may_not_have(acme, bob):
    """The claim asks every rule of the database in its one statement: the battle handed out is the oldest the
    rater may rate, however many older ones they may not (here 12 prompts they rated, then an identity question
    under the "refuse" policy)."""
    campaign = _with_buffer(acme, 0)
    campaign.identity_policy = Campaign.IdentityPolicy.REFUSE
    campaign.save(update_fields=["identity_policy"])
    prompts = [PromptFactory.create(campaign=campaign) for _ in range(14)]
    _rated_by(acme, bob, prompts[:12])  # bob has rated these: the 12 oldest will not do
    Prompt.objects.filter(pk=prompts[12].pk).update(asks_identity=True)
    ready = _ready_buffer(acme, prompts)
    assert _claim(campaign, bob).battle.pk == ready[13].pk


@pytest.mark.django_db(transaction=True)
def test_a_claim_in_autocommit_sends_no_transaction_and_a_refusal_leaves_the_connection_usable(
    vote_log_purge, acme, bob
):
    """The claim's one update is a transaction of its own in autocommit (no BEGIN and COMMIT around it). When
    the one-open-battle constraint refuses it (a second tab got a battle first), the error reaches the caller,
    which hands out that battle, and the connection goes on working."""
    from django.db import IntegrityError
    from django.test.utils import CaptureQueriesContext

    campaign = _with_buffer(acme, 0)
    first, second = _ready_buffer(acme, list(Prompt.objects.filter(campaign=campaign)[:2]))
    with principal_scope(bob), CaptureQueriesContext(connection) as sent:
        claimed = services.battle_claim(campaign=campaign, user=bob, pool=acme.pool, session_key="s")
    assert claimed is not None and claimed.pk == first.pk
    assert not any(q["sql"] in ("BEGIN", "COMMIT") or q["sql"].startswith("SAVEPOINT") for q in sent.captured_queries)
    first.refresh_from_db()
    assert first.rater_id == bob.pk  # committed: another connection sees it
    # bob holds an open battle now: the database refuses a second claim (the race of two tabs).
    with principal_scope(bob), pytest.raises(IntegrityError):
        services.battle_claim(campaign=campaign, user=bob, pool=acme.pool, session_key="s")
    second.refresh_from_db()
    assert second.rater_id is None  # nothing written
    with principal_scope(bob):  # the connection is usable, and the caller's path hands out the open battle
        assert _claim(campaign, bob).battle.pk == first.pk


def test_claims_made_while_a_refill_waits_ride_along_with_it(
    acme, settings, monkeypatch, django_capture_on_commit_callbacks
):
    """A claim asks a worker to refill the buffer only where no refill it asked for is still waiting to begin:
    the fill counts the buffer when it runs, so the claims meanwhile ride along (before, each queued a fill of
    its own). The fill clears the mark as it begins, and the next claim asks again; a broker that refuses the
    task clears it too, so the next claim retries at once."""
    import json

    import redis

    from battles.services import buffer as buffer_services

    if not settings.REDIS_URL:
        pytest.fail("needs the Redis broker (scripts/test sets REDIS_URL)")
    broker = redis.Redis.from_url(settings.REDIS_URL)

    def fills_queued() -> int:
        messages = [json.loads(m) for m in broker.lrange("generation", 0, -1)]  # type: ignore[union-attr]
        return sum(m["headers"]["task"] == "battles.tasks.buffer_fill_task" for m in messages)

    campaign = _with_buffer(acme, 3)
    before = fills_queued()
    for _ in range(3):  # three claims in a row
        with django_capture_on_commit_callbacks(execute=True):
            services.buffer_refill_request(campaign=campaign)
    assert fills_queued() == before + 1
    # The worker begins the fill: a claim after that asks again.
    buffer_services.buffer_fill_task.run(campaign.pk, organization_id=campaign.organization_id)
    with django_capture_on_commit_callbacks(execute=True):
        services.buffer_refill_request(campaign=campaign)
    assert fills_queued() == before + 2

    # A broker that refuses the task leaves no mark behind.
    buffer_services.buffer_fill_task.run(campaign.pk, organization_id=campaign.organization_id)

    def refuse(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise redis.exceptions.ConnectionError("broker down")

    from celery import Task

    with monkeypatch.context() as patched:  # the broker boundary only
        patched.setattr(Task, "apply_async", refuse)
        with django_capture_on_commit_callbacks(execute=True):
            services.buffer_refill_request(campaign=campaign)
    with django_capture_on_commit_callbacks(execute=True):
        services.buffer_refill_request(campaign=campaign)
    assert fills_queued() == before + 3
