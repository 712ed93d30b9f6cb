from django.urls import path, re_path

from . import apis

app_name = "api"

urlpatterns = [
    re_path(
        r"^campaigns/(?P<campaign_id>[0-9]+)/votes\.(?P<kind>jsonl|csv)$", apis.VoteLogExportApi.as_view(), name="votes"
    ),
    # Asynchronous exports (the vote log, preference pairs) written to a file by a worker.
    path("campaigns/<int:campaign_id>/exports/", apis.ExportJobListCreateApi.as_view(), name="exports"),
    path("campaigns/<int:campaign_id>/exports/<uuid:job_id>/", apis.ExportJobDetailApi.as_view(), name="export"),
    path(
        "campaigns/<int:campaign_id>/exports/<uuid:job_id>/download",
        apis.ExportJobDownloadApi.as_view(),
        name="export-download",
    ),
]
