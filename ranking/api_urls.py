from django.urls import path

from . import apis

urlpatterns = [
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
