"""Timings named for what they are, and none stored rather than a wrong one: a battle answered in one
piece has no time to first token (it was its latency), judge runs report the summed wall-clock seconds
of their calls (never "GPU seconds"), and migration 0026 clears the figures stored wrong before."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps
from django.db import connection

from battles.models import Battle, Generation, JudgeRun
from tests.battles.judge_world import battle_plant, judge_make
from tests.conftest import MODEL_SERVER_URL, Tenant

pytestmark = pytest.mark.django_db

MIGRATION = importlib.import_module("battles.migrations.0026_session_window_and_wall_seconds")


def _timed(generation: Generation, *, latency_s: float, ttft_s: float | None) -> Generation:
    Generation.objects.filter(pk=generation.pk).update(latency_s=latency_s, ttft_s=ttft_s)
    generation.refresh_from_db()
    return generation


def test_the_migration_clears_a_latency_stored_as_ttft_and_keeps_true_ones(acme: Tenant) -> None:
    one_piece, streamed, shadow = (
        battle_plant(acme, left=acme.left, right=acme.right, better="left", index=i).battle for i in range(3)
    )
    Battle.objects.filter(pk=shadow.pk).update(source=Battle.Source.SHADOW)
    wrong = [_timed(g, latency_s=1.25, ttft_s=1.25) for g in one_piece.generations.all()]
    true = [_timed(g, latency_s=1.25, ttft_s=0.18) for g in streamed.generations.all()]
    # A shadow answer's figures are its caller's: an equal pair is kept as sent.
    sent = [_timed(g, latency_s=0.9, ttft_s=0.9) for g in shadow.generations.all()]
    judge = judge_make(acme, url=MODEL_SERVER_URL)
    run = JudgeRun.objects.create(
        organization=acme.organization,
        campaign=acme.campaign,
        judge=judge,
        rubric=judge.rubric,
        status=JudgeRun.Status.DONE,
        stats={"refusal_rate": 0.0, "gpu_seconds": 12.5},
    )
    with connection.schema_editor(atomic=False) as schema_editor:
        MIGRATION.timings_tell_the_truth(apps, schema_editor)
    assert all(Generation.objects.get(pk=g.pk).ttft_s is None for g in wrong)
    assert [Generation.objects.get(pk=g.pk).ttft_s for g in true] == [0.18, 0.18]
    assert [Generation.objects.get(pk=g.pk).ttft_s for g in sent] == [0.9, 0.9]
    run.refresh_from_db()
    assert run.stats == {"refusal_rate": 0.0, "call_wall_seconds": 12.5}
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
