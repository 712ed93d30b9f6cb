from django.urls import path

from . import apis

urlpatterns = [
    path("webhooks/", apis.WebhookListApi.as_view(), name="api-webhooks"),
    path("webhooks/<int:webhook_id>/", apis.WebhookDetailApi.as_view(), name="api-webhook"),
    path("webhooks/<int:webhook_id>/deliveries/", apis.WebhookDeliveryListApi.as_view(), name="api-webhook-deliveries"),
    path("webhooks/<int:webhook_id>/ping", apis.WebhookPingApi.as_view(), name="api-webhook-ping"),
]
