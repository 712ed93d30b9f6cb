from django.urls import path

from . import views

app_name = "battles"

urlpatterns = [
    path("", views.campaign_list, name="campaigns"),
    path("c/<int:campaign_id>/", views.campaign_detail, name="campaign"),
    path("c/<int:campaign_id>/next/", views.battle_next, name="next"),
    path("c/<int:campaign_id>/consent/", views.campaign_consent, name="campaign_consent"),
    path("b/<uuid:battle_id>/", views.battle_detail, name="battle"),
    path("b/<uuid:battle_id>/vote/", views.battle_vote, name="vote"),
    path("b/<uuid:battle_id>/state/", views.battle_state, name="state"),
    path("b/<uuid:battle_id>/continue/", views.battle_continue, name="continue"),
    path("b/<uuid:battle_id>/stream", views.battle_stream, name="stream"),
    # Crowd studies: the vendor's public link, then the participant's own page.
    path("s/<slug:slug>/", views.study_enter, name="study_enter"),
    path("s/<slug:slug>/study/", views.study_home, name="study"),
    path("s/<slug:slug>/consent/", views.study_consent, name="study_consent"),
    path("s/<slug:slug>/leave/", views.study_leave, name="study_leave"),
]
