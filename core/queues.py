"""The platform's Celery queues: each kind of background work has its own, consumed by its own workers
(docker/compose.yaml runs one service per queue), so that one kind of work, or one organisation's flood
of it, never waits in front of another (docs/reliability/index.md, "Queues").

``ROUTES`` sends each task to its queue (``CELERY_TASK_ROUTES``); a task not named here goes to the
default queue, which holds beat's light sweeps. A worker that must run everything (``manage.py demo``,
a single-host test) consumes ``ALL``."""

from __future__ import annotations

DEFAULT = "celery"  # Celery's default queue: beat's sweeps, purges, health checks
RECOMPUTE = "recompute"  # leaderboards, rater figures and flags, judge boards: CPU, never a network wait
GENERATION = "generation"  # model calls: battles, buffers, judges, attribute runs
DELIVERY = "delivery"  # webhooks: a tenant's receiver may be slow or down
EXPORTS = "exports"  # export files: long reads of the vote log

ALL = (DEFAULT, RECOMPUTE, GENERATION, DELIVERY, EXPORTS)

_BY_QUEUE = {
    RECOMPUTE: (
        "ranking.tasks.leaderboards_recompute_task",
        "ranking.tasks.leaderboards_recompute_open_task",
        "ranking.tasks.rater_flags_check_task",
        "ranking.tasks.rater_figures_refresh_task",
        "ranking.tasks.judge_run_settle_task",
    ),
    GENERATION: (
        "battles.tasks.battle_generate_task",
        "battles.tasks.battle_generate_live_task",
        "battles.tasks.buffer_fill_task",
        "battles.tasks.buffer_maintain_task",
        "battles.tasks.judge_run_task",
        "ranking.tasks.attribute_run_task",
        "ranking.tasks.golden_run_task",
    ),
    DELIVERY: (
        "raters.tasks.webhook_deliver_task",
        "raters.tasks.webhook_deliveries_due_task",
    ),
    EXPORTS: ("battles.tasks.export_job_run_task",),
}

ROUTES: dict[str, dict[str, str]] = {task: {"queue": queue} for queue, tasks in _BY_QUEUE.items() for task in tasks}
