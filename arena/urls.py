from django.contrib import admin
from django.urls import include, path, re_path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from core.api import api_not_found

# The API's schema and its interactive page. SpectacularSwaggerSplitView serves the page's set-up as a
# script file, so the page runs under the site's Content-Security-Policy (no inline script).
api_docs = [
    path("api/v1/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/v1/docs/", SpectacularSwaggerSplitView.as_view(url_name="api-schema"), name="api-docs"),
    path("api/schema/", RedirectView.as_view(pattern_name="api-schema", permanent=False)),
    path("api/docs/", RedirectView.as_view(pattern_name="api-docs", permanent=False)),
]

# A database that cannot serve the request (down, restarting, out of connections) is a 503 with
# Retry-After, never the 500 of a bug (core/http.py).
handler500 = "core.http.server_error"

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/", include("allauth.urls")),
    *api_docs,
    path("api/v1/", include("battles.api_urls")),
    path("api/v1/", include("ranking.api_urls")),
    path("api/v1/", include("raters.api_urls")),
    # Anything else under /api/ answers in the API's error body, not with the site's HTML 404.
    re_path(r"^api/(?P<path>[\s\S]*)$", api_not_found),
    path("", include("ranking.urls")),
    path("", include("raters.urls")),
    path("", include("battles.urls")),
]
