"""REST API v1 for rankings, one module per resource (its serializers beside its views):

- ``leaderboards``: the newest leaderboard, one version, the history; the selection and snapshot
  serializers the other board endpoints share.
- ``board_index``: the public index of published and listed boards, with content hashes.
- ``board_compare``: one stored board against another (judge against human, category against overall, week
  against week).
- ``pairwise``: the pairwise table of a leaderboard.
- ``planning``: the sample-size planner.
- ``promotions``: promotions (a variant rolled out in stages, watched on a board).
- ``statistics``: campaign statistics over a time window, and the cadence check.
- ``publication``: publishing a campaign's leaderboard, and the public read of a published board.
- ``raters``: rater quality (agreement, outliers) and the per-rater reports.
- ``preference_pairs``: preference pairs (reward-model / DPO training data) and their length audit.
- ``judges``: judges' boards and calibration.
- ``attribute_boards``, ``attribute_runs``, ``attribute_publication``: attribute boards (ratio judgements),
  their runs, and their publication.
- ``access``: who is asking and what they may reach (shared by all of the above), and the public throttle.

This face holds the views ``ranking/api_urls.py`` routes, and the public endpoints' throttle.
"""

from __future__ import annotations

from .access import PublicRateThrottle
from .attribute_boards import AttributeBoardDetailApi, AttributeBoardListApi, AttributeEntitiesApi
from .attribute_publication import AttributePublicationApi, PublicAttributeBoardApi, PublicAttributeJudgementsApi
from .attribute_runs import (
    AttributeRunCompareApi,
    AttributeRunDetailApi,
    AttributeRunJudgementsApi,
    AttributeRunsApi,
    AttributeRunScoresApi,
)
from .board_compare import LeaderboardCompareApi
from .board_index import PublicBoardIndexApi
from .judges import JudgeBoardApi, JudgeCalibrationApi
from .leaderboards import LeaderboardHistoryApi, LeaderboardLatestApi, LeaderboardVersionApi
from .pairwise import PairwiseApi
from .planning import CampaignPlanApi
from .preference_pairs import PreferencePairsAuditApi, PreferencePairsExportApi
from .promotions import PromotionDetailApi, PromotionListApi, PromotionStopApi
from .publication import PublicationApi, PublicBoardApi
from .raters import RaterQualityApi, RaterReportApi
from .statistics import CadenceApi, StatisticsApi

__all__ = [
    "CampaignPlanApi",
    "PromotionDetailApi",
    "PromotionListApi",
    "PromotionStopApi",
    "AttributeBoardDetailApi",
    "AttributeBoardListApi",
    "AttributeEntitiesApi",
    "AttributePublicationApi",
    "AttributeRunCompareApi",
    "AttributeRunDetailApi",
    "AttributeRunJudgementsApi",
    "AttributeRunScoresApi",
    "AttributeRunsApi",
    "CadenceApi",
    "JudgeBoardApi",
    "JudgeCalibrationApi",
    "LeaderboardCompareApi",
    "LeaderboardHistoryApi",
    "LeaderboardLatestApi",
    "LeaderboardVersionApi",
    "PairwiseApi",
    "PreferencePairsAuditApi",
    "PreferencePairsExportApi",
    "PublicAttributeBoardApi",
    "PublicBoardIndexApi",
    "PublicAttributeJudgementsApi",
    "PublicBoardApi",
    "PublicRateThrottle",
    "PublicationApi",
    "RaterQualityApi",
    "RaterReportApi",
    "StatisticsApi",
]
