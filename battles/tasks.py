"""Celery tasks: take ids, call one service. Generation has its own queue (``generation``, see
CELERY_TASK_ROUTES): model calls take seconds and must not queue behind, or ahead of, leaderboards.

Each task lives beside the service it runs (``battles/services/<module>.py``), registered under its
name here (``battles.tasks.<function>``: settings' routes and beat schedule, and messages in flight
across a deploy, name tasks by that string). This module is their face: Celery's autodiscovery
imports it, and callers find the tasks where they always have."""

from __future__ import annotations

from .services.buffer import buffer_fill_task, buffer_maintain_open_task, buffer_maintain_task
from .services.exports import export_job_run_task, export_jobs_purge_task
from .services.generation import battle_generate_live_task, battle_generate_task
from .services.judges import judge_run_task
from .services.studies import participants_time_out_task

__all__ = [
    "battle_generate_live_task",
    "battle_generate_task",
    "buffer_fill_task",
    "buffer_maintain_open_task",
    "buffer_maintain_task",
    "export_job_run_task",
    "export_jobs_purge_task",
    "judge_run_task",
    "participants_time_out_task",
]
