from django.urls import path

from . import views

app_name = "ranking"

urlpatterns = [
    path("boards/", views.board_index, name="board-index"),
    path("boards/<str:slug>/", views.board_public, name="board-public"),
    path("attribute-boards/<str:slug>/", views.attribute_board_public, name="attribute-board-public"),
    path("leaderboard/<int:campaign_id>/", views.leaderboard, name="leaderboard"),
    path("leaderboard/<int:campaign_id>/v/<int:version>/", views.leaderboard_version, name="leaderboard-version"),
    path(
        "leaderboard/<int:campaign_id>/v/<int:version>/snapshot.<str:fmt>",
        views.leaderboard_download,
        name="leaderboard-download",
    ),
    path("campaigns/<int:campaign_id>/dashboard/", views.campaign_dashboard, name="campaign-dashboard"),
    path("campaigns/<int:campaign_id>/dashboard/raters.csv", views.campaign_raters_csv, name="campaign-raters-csv"),
]
