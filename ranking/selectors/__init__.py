"""Reads for rankings: the vote log straight into arrays, and the stored snapshots. One module per concern:

- ``arrays``: the vote log as the estimators read it (``vote_arrays``, ``vote_items``) and the campaign's
  exclusion policy in force (``exclusion_policy_for``).
- ``leaderboards``: snapshots (newest, one version, history, categories), their rows with the competitors'
  names and families, the pairwise table; the intervals active sampling reads; the campaigns a rater voted in.
- ``statistics``: campaign statistics over a time window (``campaign_statistics``, ``exclusions_in_window``).
- ``publication``: published boards (``public_board``).
- ``log_cache``: figures from the vote log cached per state of the log, and the latest one computed.
- ``raters``: per-rater figures: the quality report (``rater_quality``) and the dashboard's rater reports.
- ``dashboard``: the managers' dashboard's series, pair coverage, decision times and the cadence check.
- ``preference_data``: preference pairs (reward-model / DPO training data) and their length audit.
- ``judges``: judges' verdicts as arrays, their boards and calibrations (against the human votes the human
  board uses: ``judge_calibration_pairs``).
- ``promotions``: promotions (staged rollouts watched on a board) a principal may see or stop.
- ``planning``: the sample-size planner with the campaign's figures as defaults (``campaign_plan``).
- ``attribute_boards``: attribute boards (ratio judgements), their runs, fits and comparisons.
"""

from __future__ import annotations

from .arrays import exclusion_policy_for, vote_arrays, vote_items, vote_log
from .attribute_boards import (
    RUN_FIT_OPTIONS,
    RunObservations,
    attribute_board_entities,
    attribute_board_latest_run,
    attribute_board_public,
    attribute_board_viewable_by,
    attribute_board_writable_by,
    attribute_boards_viewable_by,
    attribute_fit_hash,
    attribute_run_fit,
    attribute_run_observations,
    attribute_run_viewable_by,
    attribute_runs_compare,
    judge_writable_by,
)
from .board_index import HASH_METHOD, canonical_json, content_hash, public_board_index, public_board_index_cached
from .board_quality import BoardSide, board_comparisons_for_page, board_side, boards_compared
from .dashboard import (
    CADENCE_WINDOW_DAYS,
    DECISION_BINS_S,
    Cadence,
    CadencePair,
    DashboardCounts,
    active_raters_per_day,
    cadence,
    competitor_labels,
    dashboard_counts,
    dashboard_counts_of,
    day_series,
    decision_time_histogram,
    pair_coverage,
    votes_per_day,
)
from .judges import (
    CalibrationPairs,
    JudgeVerdictRows,
    judge_board_latest,
    judge_calibration_latest,
    judge_calibration_pairs,
    judge_calibrations_of_rubric,
    judge_of_campaign,
    judge_verdicts_for_board,
)
from .leaderboards import (
    SELECTION_NOTE,
    campaigns_voted_in,
    competitor_names,
    current_intervals,
    family_disclosure,
    snapshot_categories,
    snapshot_history,
    snapshot_latest,
    snapshot_latest_id,
    snapshot_pairwise,
    snapshot_pairwise_grids,
    snapshot_pairwise_stored,
    snapshot_rows,
)
from .log_cache import LOG_CACHE_S, LOG_LATEST_S, OnLog
from .planning import campaign_plan
from .preference_data import (
    PairSelection,
    preference_pair_row,
    preference_pair_selection,
    preference_pairs,
    preference_pairs_audit,
)
from .promotions import promotion_offers, promotions_of_campaign, promotions_viewable_by, promotions_writable_by
from .publication import PUBLIC_PROMPTS_PAGE, PublicBoard, board_publication_by_slug, public_board
from .raters import (
    QUALITY_BOOTSTRAP_ROUNDS,
    RATER_FIGURES,
    SESSION_GAP_S,
    RaterFigures,
    RaterReport,
    RaterReports,
    dashboard_log,
    log_mark_of,
    rater_figures_at,
    rater_figures_cached,
    rater_figures_compute,
    rater_figures_viewed,
    rater_quality,
    rater_reports,
    rater_reports_of,
    raters_of,
)
from .statistics import Percentiles, campaign_statistics, exclusions_in_window

__all__ = [
    # arrays
    "exclusion_policy_for",
    "vote_arrays",
    "vote_items",
    "vote_log",
    # board_index
    "HASH_METHOD",
    "canonical_json",
    "content_hash",
    "public_board_index",
    "public_board_index_cached",
    # board_quality
    "BoardSide",
    "board_comparisons_for_page",
    "board_side",
    "boards_compared",
    # leaderboards
    "SELECTION_NOTE",
    "campaigns_voted_in",
    "competitor_names",
    "current_intervals",
    "family_disclosure",
    "snapshot_categories",
    "snapshot_history",
    "snapshot_latest",
    "snapshot_latest_id",
    "snapshot_pairwise",
    "snapshot_pairwise_grids",
    "snapshot_pairwise_stored",
    "snapshot_rows",
    # planning
    "campaign_plan",
    # promotions
    "promotion_offers",
    "promotions_of_campaign",
    "promotions_viewable_by",
    "promotions_writable_by",
    # statistics
    "Percentiles",
    "campaign_statistics",
    "exclusions_in_window",
    # publication
    "PUBLIC_PROMPTS_PAGE",
    "PublicBoard",
    "board_publication_by_slug",
    "public_board",
    # log_cache
    "LOG_CACHE_S",
    "LOG_LATEST_S",
    "OnLog",
    # raters
    "QUALITY_BOOTSTRAP_ROUNDS",
    "RATER_FIGURES",
    "SESSION_GAP_S",
    "RaterFigures",
    "RaterReport",
    "RaterReports",
    "rater_figures_at",
    "rater_figures_cached",
    "rater_figures_compute",
    "rater_figures_viewed",
    "rater_quality",
    "rater_reports",
    "rater_reports_of",
    "raters_of",
    # dashboard
    "CADENCE_WINDOW_DAYS",
    "DECISION_BINS_S",
    "Cadence",
    "CadencePair",
    "DashboardCounts",
    "active_raters_per_day",
    "cadence",
    "competitor_labels",
    "dashboard_counts",
    "dashboard_counts_of",
    "dashboard_log",
    "log_mark_of",
    "day_series",
    "decision_time_histogram",
    "pair_coverage",
    "votes_per_day",
    # preference_data
    "PairSelection",
    "preference_pair_row",
    "preference_pair_selection",
    "preference_pairs",
    "preference_pairs_audit",
    # judges
    "CalibrationPairs",
    "JudgeVerdictRows",
    "judge_board_latest",
    "judge_calibration_latest",
    "judge_calibration_pairs",
    "judge_calibrations_of_rubric",
    "judge_of_campaign",
    "judge_verdicts_for_board",
    # attribute_boards
    "RUN_FIT_OPTIONS",
    "RunObservations",
    "attribute_board_entities",
    "attribute_board_latest_run",
    "attribute_board_public",
    "attribute_board_viewable_by",
    "attribute_board_writable_by",
    "attribute_boards_viewable_by",
    "attribute_fit_hash",
    "attribute_run_fit",
    "attribute_run_observations",
    "attribute_run_viewable_by",
    "attribute_runs_compare",
    "judge_writable_by",
]
