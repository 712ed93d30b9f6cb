from django.urls import path

from . import apis

urlpatterns = [
    # Names without the "api-" prefix predate v1 and are kept (tests and clients reverse them).
    path("campaigns/<int:campaign_id>/leaderboard/", apis.LeaderboardLatestApi.as_view(), name="leaderboard"),
    path(
        "campaigns/<int:campaign_id>/leaderboard/history/",
        apis.LeaderboardHistoryApi.as_view(),
        name="leaderboard-history",
    ),
    path(
        "campaigns/<int:campaign_id>/leaderboard/<int:version>/",
        apis.LeaderboardVersionApi.as_view(),
        name="leaderboard-version",
    ),
    path(
        "campaigns/<int:campaign_id>/leaderboards/compare/",
        apis.LeaderboardCompareApi.as_view(),
        name="api-leaderboards-compare",
    ),
    path("campaigns/<int:campaign_id>/pairwise/", apis.PairwiseApi.as_view(), name="api-pairwise"),
    path("campaigns/<int:campaign_id>/statistics/", apis.StatisticsApi.as_view(), name="api-statistics"),
    path("campaigns/<int:campaign_id>/publication/", apis.PublicationApi.as_view(), name="api-publication"),
    path("public/boards/", apis.PublicBoardIndexApi.as_view(), name="api-public-board-index"),
    path("public/boards/<str:slug>/", apis.PublicBoardApi.as_view(), name="api-public-board"),
    path("campaigns/<int:campaign_id>/rater-quality/", apis.RaterQualityApi.as_view(), name="api-rater-quality"),
    path("campaigns/<int:campaign_id>/raters/report/", apis.RaterReportApi.as_view(), name="api-rater-reports"),
    path("campaigns/<int:campaign_id>/cadence/", apis.CadenceApi.as_view(), name="api-cadence"),
    path("campaigns/<int:campaign_id>/plan/", apis.CampaignPlanApi.as_view(), name="api-campaign-plan"),
]

# Preference pairs (reward-model / DPO training data) and their length audit.
urlpatterns += [
    path(
        "campaigns/<int:campaign_id>/preference-pairs.jsonl",
        apis.PreferencePairsExportApi.as_view(),
        name="api-preference-pairs",
    ),
    path(
        "campaigns/<int:campaign_id>/preference-pairs/audit",
        apis.PreferencePairsAuditApi.as_view(),
        name="api-preference-pairs-audit",
    ),
]

# Judges' boards and calibration (the judges and their runs: battles/api_urls.py).
urlpatterns += [
    path(
        "campaigns/<int:campaign_id>/judges/<int:judge_id>/board/",
        apis.JudgeBoardApi.as_view(),
        name="api-judge-board",
    ),
    path(
        "campaigns/<int:campaign_id>/judges/<int:judge_id>/calibration/",
        apis.JudgeCalibrationApi.as_view(),
        name="api-judge-calibration",
    ),
]

# Attribute boards (ratio judgements).
urlpatterns += [
    path("attribute-boards/", apis.AttributeBoardListApi.as_view(), name="api-attribute-boards"),
    path("attribute-boards/<int:board_id>/", apis.AttributeBoardDetailApi.as_view(), name="api-attribute-board"),
    path(
        "attribute-boards/<int:board_id>/entities/",
        apis.AttributeEntitiesApi.as_view(),
        name="api-attribute-board-entities",
    ),
    path("attribute-boards/<int:board_id>/runs/", apis.AttributeRunsApi.as_view(), name="api-attribute-board-runs"),
    path(
        "attribute-boards/<int:board_id>/publication/",
        apis.AttributePublicationApi.as_view(),
        name="api-attribute-board-publication",
    ),
    path("attribute-runs/<int:run_id>/", apis.AttributeRunDetailApi.as_view(), name="api-attribute-run"),
    path("attribute-runs/<int:run_id>/scores/", apis.AttributeRunScoresApi.as_view(), name="api-attribute-run-scores"),
    path(
        "attribute-runs/<int:run_id>/judgements/",
        apis.AttributeRunJudgementsApi.as_view(),
        name="api-attribute-run-judgements",
    ),
    path(
        "attribute-runs/<int:run_id>/compare/<int:other_id>/",
        apis.AttributeRunCompareApi.as_view(),
        name="api-attribute-run-compare",
    ),
    path(
        "public/attribute-boards/<str:slug>/",
        apis.PublicAttributeBoardApi.as_view(),
        name="api-public-attribute-board",
    ),
    path(
        "public/attribute-boards/<str:slug>/judgements/",
        apis.PublicAttributeJudgementsApi.as_view(),
        name="api-public-attribute-board-judgements",
    ),
]

# Promotions: a variant rolled out in stages through an A/B experiment, watched on a board.
urlpatterns += [
    path("promotions/", apis.PromotionListApi.as_view(), name="api-promotions"),
    path("promotions/<int:promotion_id>/", apis.PromotionDetailApi.as_view(), name="api-promotion"),
    path("promotions/<int:promotion_id>/stop", apis.PromotionStopApi.as_view(), name="api-promotion-stop"),
]
