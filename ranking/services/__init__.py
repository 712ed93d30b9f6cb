"""Writes for rankings: recompute every leaderboard of a campaign from its vote log, and schedule it. One
module per concern, each with the Celery tasks that run its services (named ``ranking.tasks.<function>``;
``ranking/tasks.py`` re-exports them):

- ``recompute``: the recompute and its scheduling (debounce, the running lease, beat's safety net).
- ``rater_figures``: the per-rater figures, served stale-while-revalidate and refreshed by a worker.
- ``publication``: publishing a campaign's leaderboard at a random address, and unpublishing it.
- ``judges``: a judge's boards, its calibration against the humans, golden-run checks.
- ``attribute_boards``: attribute boards (ratio judgements): create, entities, settings, publication, delete.
- ``attribute_runs``: an attribute board's runs: queued, then executed on a worker.
- ``promotions``: a board's winner rolled out in stages through an A/B experiment, watched on the board.
- ``rater_flags``: rater flags stored from the quality checks (outliers, gold accuracy).
- ``log_copy``: the vote log's narrow copy the recompute reads (written by a trigger; the backfill after a load).
"""

from __future__ import annotations

from .attribute_boards import (
    BOARD_ENTITIES_MAX,
    BOARD_SETTINGS,
    ENTITY_TEXT_MAX,
    AttributeBoardHasRuns,
    EntityInput,
    attribute_board_change,
    attribute_board_create,
    attribute_board_delete,
    attribute_board_publish,
    attribute_board_unpublish,
    attribute_entities_add,
)
from .attribute_runs import JUDGE_CONCURRENCY, attribute_run_execute, attribute_run_start
from .judges import (
    golden_check,
    golden_check_validate,
    golden_run_and_check,
    judge_board_recompute,
    judge_calibrate,
    judge_run_settle,
)
from .log_copy import log_copy_backfill
from .promotions import promotion_check, promotion_start, promotion_stop, promotion_validate, promotions_check
from .publication import board_publish, board_unpublish
from .rater_figures import (
    RATER_REFRESH_LOCK_S,
    rater_figures_refresh,
    rater_figures_refresh_schedule,
    rater_reports_serve,
)
from .rater_flags import rater_flags_check
from .recompute import (
    leaderboards_rearm,
    leaderboards_recompute,
    leaderboards_recompute_pending,
    leaderboards_recompute_soon,
    leaderboards_schedule,
    leaderboards_schedule_open_campaigns,
    method_for,
)

__all__ = [
    # promotions
    "promotion_check",
    "promotion_start",
    "promotion_stop",
    "promotion_validate",
    "promotions_check",
    # log copy
    "log_copy_backfill",
    # recompute
    "leaderboards_recompute",
    "leaderboards_recompute_pending",
    "leaderboards_recompute_soon",
    "leaderboards_schedule",
    "leaderboards_rearm",
    "leaderboards_schedule_open_campaigns",
    "method_for",
    # rater_figures
    "RATER_REFRESH_LOCK_S",
    "rater_figures_refresh",
    "rater_figures_refresh_schedule",
    "rater_reports_serve",
    # publication
    "board_publish",
    "board_unpublish",
    # judges
    "golden_check",
    "golden_check_validate",
    "golden_run_and_check",
    "judge_board_recompute",
    "judge_calibrate",
    "judge_run_settle",
    # attribute_boards
    "BOARD_ENTITIES_MAX",
    "BOARD_SETTINGS",
    "ENTITY_TEXT_MAX",
    "AttributeBoardHasRuns",
    "EntityInput",
    "attribute_board_change",
    "attribute_board_create",
    "attribute_board_delete",
    "attribute_board_publish",
    "attribute_board_unpublish",
    "attribute_entities_add",
    # attribute_runs
    "JUDGE_CONCURRENCY",
    "attribute_run_execute",
    "attribute_run_start",
    # rater_flags
    "rater_flags_check",
]
