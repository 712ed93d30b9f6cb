from django.urls import path

from . import views

app_name = "raters"

urlpatterns = [
    path("invite/<str:token>/", views.invitation_accept, name="invitation"),
]
