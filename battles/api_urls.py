from django.urls import re_path

from . import apis

app_name = "api"

urlpatterns = [
    re_path(
        r"^campaigns/(?P<campaign_id>[0-9]+)/votes\.(?P<kind>jsonl|csv)$", apis.VoteLogExportApi.as_view(), name="votes"
    ),
]
