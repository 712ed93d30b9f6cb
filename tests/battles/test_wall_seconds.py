"""Timings named for what they are, and none stored rather than a wrong one: a battle answered in one
piece has no time to first token (it was its latency), judge runs report the summed wall-clock seconds
of their calls (never "GPU seconds"), and migration 0026 clears the figures stored wrong before."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps
from django.db import DatabaseError, connection, transaction
from django.utils import timezone

from battles.models import Battle, Generation, JudgeRun
from tests.battles.judge_world import judge_make
from tests.conftest import MODEL_SERVER_URL, Tenant
from tests.factories import PromptFactory

pytestmark = pytest.mark.django_db

MIGRATION = importlib.import_module("battles.migrations.0026_session_window_and_wall_seconds")


def _battle(tenant: Tenant, *, latency_s: float, ttft_s: float | None, source: str = "generated") -> list[Generation]:
    """A ready battle whose two answers carry these timings from their creation (answers are append-only:
    never updated after)."""
    battle = Battle.objects.create(
        organization=tenant.organization,
        campaign=tenant.campaign,
        prompt=PromptFactory.create(campaign=tenant.campaign),
        left=tenant.left,
        right=tenant.right,
        status=Battle.Status.READY,
        source=source,
        ready_at=timezone.now(),
    )
    return [
        Generation.objects.create(
            battle=battle,
            side=side,
            competitor=competitor,
            text=f"{side} answer",
            output_tokens=5,
            finish_reason="stop",
            latency_s=latency_s,
            ttft_s=ttft_s,
        )
        for side, competitor in (("left", tenant.left), ("right", tenant.right))
    ]


def _answers_append_only() -> None:
    """The append-only trigger on answers, as the append-only migration creates it, where this database has
    none yet (inside the test's transaction: rolled back with it), so the migration is tested against it."""
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_trigger WHERE tgname = %s", [MIGRATION.ANSWER_TRIGGER])
        if cursor.fetchone() is None:
            cursor.execute(
                "CREATE FUNCTION test_answer_no_update() RETURNS trigger AS $$ BEGIN "
                "RAISE EXCEPTION 'answers are append-only'; END; $$ LANGUAGE plpgsql"
            )
            cursor.execute(
                f"CREATE TRIGGER {MIGRATION.ANSWER_TRIGGER} BEFORE UPDATE ON battles_generation "
                "FOR EACH ROW EXECUTE FUNCTION test_answer_no_update()"
            )


def test_the_migration_clears_a_latency_stored_as_ttft_and_keeps_true_ones(acme: Tenant) -> None:
    wrong = _battle(acme, latency_s=1.25, ttft_s=1.25)  # asked for in one piece: the latency was copied
    true = _battle(acme, latency_s=1.25, ttft_s=0.18)  # streamed: a real first token
    sent = _battle(acme, latency_s=0.9, ttft_s=0.9, source=Battle.Source.SHADOW)  # the caller's own figures
    judge = judge_make(acme, url=MODEL_SERVER_URL)
    run = JudgeRun.objects.create(
        organization=acme.organization,
        campaign=acme.campaign,
        judge=judge,
        rubric=judge.rubric,
        status=JudgeRun.Status.DONE,
        stats={"refusal_rate": 0.0, "gpu_seconds": 12.5},
    )
    _answers_append_only()
    if connection.vendor == "postgresql":
        # The rows above were written in this transaction: their deferred foreign-key checks run now, as
        # they would have at its commit (ALTER TABLE refuses a table with checks pending; a migration has none).
        with connection.cursor() as cursor:
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
    with connection.schema_editor(atomic=False) as schema_editor:
        MIGRATION.timings_tell_the_truth(apps, schema_editor)
    assert all(Generation.objects.get(pk=g.pk).ttft_s is None for g in wrong)
    assert [Generation.objects.get(pk=g.pk).ttft_s for g in true] == [0.18, 0.18]
    assert [Generation.objects.get(pk=g.pk).ttft_s for g in sent] == [0.9, 0.9]
    run.refresh_from_db()
    assert run.stats == {"refusal_rate": 0.0, "call_wall_seconds": 12.5}
    if connection.vendor == "postgresql":  # the answers are append-only again afterwards
        with pytest.raises(DatabaseError), transaction.atomic():
            Generation.objects.filter(pk=true[0].pk).update(ttft_s=None)
    with connection.schema_editor(atomic=False) as schema_editor:
        MIGRATION.judge_stats_back(apps, schema_editor)
    run.refresh_from_db()
    assert run.stats == {"refusal_rate": 0.0, "gpu_seconds": 12.5}


def test_a_judge_run_names_its_seconds_wall_clock_seconds_of_its_calls(acme: Tenant) -> None:
    judge = judge_make(acme, url=MODEL_SERVER_URL)
    run = JudgeRun.objects.create(
        organization=acme.organization,
        campaign=acme.campaign,
        judge=judge,
        rubric=judge.rubric,
        call_wall_seconds=3.21,
        calls=2,
    )
    derived = run.stats_derived()
    assert derived["call_wall_seconds"] == 3.21 and "gpu_seconds" not in derived
