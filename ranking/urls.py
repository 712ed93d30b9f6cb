from django.urls import path

from . import views

app_name = "ranking"

urlpatterns = [
    path("leaderboard/<int:campaign_id>/", views.leaderboard, name="leaderboard"),
]
