"""Celery tasks: take ids, call one service. Each lives beside the service it runs (``ranking/services/``),
under its name here (``ranking.tasks.<function>``: the settings' routes and beat schedule, and messages
in flight, name tasks by it); this module is their face, which Celery's autodiscovery imports."""

from __future__ import annotations

from .services.attribute_runs import attribute_run_task
from .services.judges import golden_run_task, judge_run_settle_task
from .services.promotions import promotions_check_task
from .services.rater_figures import rater_figures_refresh_task
from .services.rater_flags import rater_flags_check_task
from .services.recompute import leaderboards_recompute_open_task, leaderboards_recompute_task

__all__ = [
    "attribute_run_task",
    "golden_run_task",
    "judge_run_settle_task",
    "leaderboards_recompute_open_task",
    "leaderboards_recompute_task",
    "promotions_check_task",
    "rater_figures_refresh_task",
    "rater_flags_check_task",
]
