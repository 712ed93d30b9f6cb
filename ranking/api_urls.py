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
    path("campaigns/<int:campaign_id>/rater-quality/", apis.RaterQualityApi.as_view(), name="api-rater-quality"),
]
