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
    path("campaigns/<int:campaign_id>/pairwise/", apis.PairwiseApi.as_view(), name="api-pairwise"),
    path("campaigns/<int:campaign_id>/statistics/", apis.StatisticsApi.as_view(), name="api-statistics"),
    path("campaigns/<int:campaign_id>/publication/", apis.PublicationApi.as_view(), name="api-publication"),
    path("public/boards/<str:slug>/", apis.PublicBoardApi.as_view(), name="api-public-board"),
    path("campaigns/<int:campaign_id>/rater-quality/", apis.RaterQualityApi.as_view(), name="api-rater-quality"),
    path("campaigns/<int:campaign_id>/raters/report/", apis.RaterReportApi.as_view(), name="api-rater-reports"),
    path("campaigns/<int:campaign_id>/cadence/", apis.CadenceApi.as_view(), name="api-cadence"),
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
