"""Per-organisation limits on model calls (issue 21: one tenant must never slow another). A task declared
with ``organization_slots="generation"`` (battles, judge, golden and attribute runs) runs in one of its
organisation's ARENA_ORGANIZATION_SLOTS["generation"] slots; with every slot taken it goes back to the queue
for a moment (Celery's retry with a countdown, never blocking the worker), while another organisation's
task runs. Slots are leases in the shared cache, renewed while their task runs."""

from __future__ import annotations

import time
import uuid

import pytest
from celery.exceptions import Retry

from battles.services.generation import battle_generate_task
from battles.services.judges import judge_run_task
from core.slots import organization_slot
from ranking.services.attribute_runs import attribute_run_task
from ranking.services.judges import golden_run_task
from raters.tenancy import scopes_disabled

pytestmark = pytest.mark.django_db


def _run_as_worker(task, *args, **kwargs):  # type: ignore[no-untyped-def]
    """The task's ``__call__`` as a worker runs it (a request of a delivered message, not eager)."""
    task.push_request(id=uuid.uuid4().hex, is_eager=False, args=args, kwargs=kwargs)
    try:
        return task(*args, **kwargs)
    finally:
        task.pop_request()


def test_every_model_calling_task_is_limited_per_organisation() -> None:
    for task in (battle_generate_task, judge_run_task, attribute_run_task, golden_run_task):
        assert task.organization_slots == "generation", task.name


def test_a_saturated_organisation_waits_in_the_queue_while_another_runs(acme, globex, settings, monkeypatch) -> None:
    settings.ARENA_ORGANIZATION_SLOTS = {"generation": 2}
    retried: list[dict[str, object]] = []

    def retry(**options: object) -> Retry:
        retried.append(options)
        return Retry("busy")

    monkeypatch.setattr(battle_generate_task, "retry", retry)
    missing = str(uuid.uuid4())
    lease = 60
    with (
        organization_slot("generation", acme.organization.pk, limit=2, lease_s=lease) as first,
        organization_slot("generation", acme.organization.pk, limit=2, lease_s=lease) as second,
    ):
        assert first and second  # two of acme's battles are being generated
        with pytest.raises(Retry):
            _run_as_worker(battle_generate_task, missing, organization_id=acme.organization.pk)
        assert len(retried) == 1 and retried[0]["max_retries"] is None
        assert 1.0 <= float(retried[0]["countdown"]) < 2.0  # type: ignore[arg-type]
        with scopes_disabled():  # globex's runs at once (the body: no such battle here)
            assert _run_as_worker(battle_generate_task, missing, organization_id=globex.organization.pk) == "missing"
    # A slot of acme's is free again: its task runs, and gives the slot back.
    assert _run_as_worker(battle_generate_task, missing, organization_id=acme.organization.pk) == "missing"
    assert len(retried) == 1
    with organization_slot("generation", acme.organization.pk, limit=1, lease_s=lease) as held:
        assert held


def test_no_limit_when_set_to_zero_or_run_eagerly(acme, settings, monkeypatch) -> None:
    monkeypatch.setattr(battle_generate_task, "retry", lambda **options: pytest.fail("retried"))
    missing = str(uuid.uuid4())
    with organization_slot("generation", acme.organization.pk, limit=1, lease_s=60):
        settings.ARENA_ORGANIZATION_SLOTS = {"generation": 1}
        assert battle_generate_task.apply(args=(missing,), kwargs={"organization_id": acme.organization.pk}).get() == (
            "missing"
        )  # eager (the demo without Redis, the tests): nothing to wait for
        settings.ARENA_ORGANIZATION_SLOTS = {"generation": 0}
        assert _run_as_worker(battle_generate_task, missing, organization_id=acme.organization.pk) == "missing"


def test_a_renewed_slot_outlives_its_lease_while_held_and_frees_when_released() -> None:
    organization = 987654  # (leases in whole seconds: Redis keeps a key's time to live in seconds here)
    with organization_slot("generation", organization, limit=1, lease_s=1, renew=True) as held:
        assert held
        time.sleep(2.5)  # two and a half leases: renewed meanwhile
        with organization_slot("generation", organization, limit=1, lease_s=1) as other:
            assert not other
    with organization_slot("generation", organization, limit=1, lease_s=1) as other:
        assert other
    # Not renewed (a holder killed mid-task never gives its slot back): the slot frees itself when its lease ends.
    with organization_slot("generation", organization, limit=1, lease_s=1) as held:
        assert held
        time.sleep(1.5)
        with organization_slot("generation", organization, limit=1, lease_s=1) as other:
            assert other


def test_a_holder_whose_lease_ran_out_leaves_the_next_holders_slot(monkeypatch) -> None:
    """A holder that outlived its lease must not free the slot another worker took since. Simulated at the worst
    moment: the slot changes hands right after any read of it by the releasing holder (a release that read,
    then deleted, would delete the new holder's slot; the release compares and deletes in one step instead)."""
    from django.core.cache import cache

    organization = 987653
    key = f"arena:slot:generation:{organization}:0"
    original_get = cache.get
    handed_over: list[bool] = []

    def get_then_hand_over(name, *args, **kwargs):  # type: ignore[no-untyped-def]
        value = original_get(name, *args, **kwargs)
        if name == key and releasing:
            cache.set(key, "the next holder", timeout=60)
            handed_over.append(True)
        return value

    releasing = False
    monkeypatch.setattr(cache, "get", get_then_hand_over)
    with organization_slot("generation", organization, limit=1, lease_s=60) as held:
        assert held
        releasing = True
    if handed_over:  # a release that read the slot: the next holder, who took it after the read, keeps it
        assert original_get(key) == "the next holder"
        cache.delete(key)
    assert original_get(key) is None  # else the holder's own slot is free again
    # And when the slot was handed over while the work ran, the release leaves it with the next holder.
    releasing = False
    with organization_slot("generation", organization, limit=1, lease_s=60) as held:
        assert held
        cache.set(key, "the next holder", timeout=60)  # our lease ran out; another worker took the slot
    assert original_get(key) == "the next holder"
    cache.delete(key)
