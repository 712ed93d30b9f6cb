from django.urls import path, re_path

from . import apis

app_name = "api"

urlpatterns = [
    re_path(
        r"^campaigns/(?P<campaign_id>[0-9]+)/votes\.(?P<kind>jsonl|csv)$", apis.VoteLogExportApi.as_view(), name="votes"
    ),
    # Campaigns, competitors, categories, prompts; the prompt import.
    path("campaigns/", apis.CampaignListApi.as_view(), name="campaigns"),
    path("campaigns/<int:campaign_id>/", apis.CampaignDetailApi.as_view(), name="campaign"),
    path("campaigns/<int:campaign_id>/competitors/", apis.CompetitorListApi.as_view(), name="competitors"),
    path("campaigns/<int:campaign_id>/categories/", apis.CategoryListApi.as_view(), name="categories"),
    path("campaigns/<int:campaign_id>/prompts/", apis.PromptListApi.as_view(), name="prompts"),
    path("campaigns/<int:campaign_id>/prompts/import", apis.PromptImportApi.as_view(), name="prompts-import"),
    # Shadow battles and A/B experiments
    path("campaigns/<int:campaign_id>/shadow-battles/", apis.ShadowBattleCreateApi.as_view(), name="shadow-battles"),
    path(
        "campaigns/<int:campaign_id>/shadow-battles/batch/",
        apis.ShadowBattleBatchApi.as_view(),
        name="shadow-battles-batch",
    ),
    path(
        "campaigns/<int:campaign_id>/shadow-battles/<uuid:battle_id>/",
        apis.ShadowBattleDetailApi.as_view(),
        name="shadow-battle",
    ),
    # Crowd studies and their participants' progress
    path("campaigns/<int:campaign_id>/studies/", apis.StudyListCreateApi.as_view(), name="studies"),
    path("campaigns/<int:campaign_id>/studies/<int:study_id>/", apis.StudyDetailApi.as_view(), name="study"),
    path("campaigns/<int:campaign_id>/studies/<int:study_id>/close", apis.StudyCloseApi.as_view(), name="study-close"),
    path(
        "campaigns/<int:campaign_id>/studies/<int:study_id>/participants/",
        apis.ParticipantListApi.as_view(),
        name="study-participants",
    ),
    path("experiments/", apis.ExperimentListApi.as_view(), name="experiments"),
    path("experiments/<slug:key>/", apis.ExperimentDetailApi.as_view(), name="experiment"),
    path("experiments/<slug:key>/assign", apis.ExperimentAssignApi.as_view(), name="experiment-assign"),
    # Asynchronous exports (the vote log, preference pairs) written to a file by a worker.
    path("campaigns/<int:campaign_id>/exports/", apis.ExportJobListCreateApi.as_view(), name="exports"),
    path("campaigns/<int:campaign_id>/exports/<uuid:job_id>/", apis.ExportJobDetailApi.as_view(), name="export"),
    path(
        "campaigns/<int:campaign_id>/exports/<uuid:job_id>/download",
        apis.ExportJobDownloadApi.as_view(),
        name="export-download",
    ),
    # Judges and their runs (boards and calibration: ranking/api_urls.py).
    path("judges/", apis.JudgeListApi.as_view(), name="judges"),
    path("judges/<int:judge_id>/", apis.JudgeDetailApi.as_view(), name="judge"),
    path("campaigns/<int:campaign_id>/judge-runs/", apis.JudgeRunListCreateApi.as_view(), name="judge-runs"),
    path("campaigns/<int:campaign_id>/judge-runs/<int:run_id>/", apis.JudgeRunDetailApi.as_view(), name="judge-run"),
    path(
        "campaigns/<int:campaign_id>/judge-runs/<int:run_id>/verdicts/",
        apis.JudgeRunVerdictsApi.as_view(),
        name="judge-run-verdicts",
    ),
]
