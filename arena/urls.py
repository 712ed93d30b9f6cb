from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/", include("allauth.urls")),
    path("api/v1/", include("battles.api_urls")),
    path("api/v1/", include("ranking.api_urls")),
    path("", include("ranking.urls")),
    path("", include("raters.urls")),
    path("", include("battles.urls")),
]
