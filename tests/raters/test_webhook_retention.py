"""The delivery log's retention: beat deletes finished deliveries (succeeded, gave up) older than
ARENA_WEBHOOK_DELIVERY_RETENTION_DAYS, in batches; deliveries still waiting for an attempt stay."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.conf import settings as django_settings
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from raters import services
from raters.models import WebhookDelivery, WebhookEndpoint, WebhookEvent
from raters.tasks import webhook_deliveries_purge_task
from raters.tenancy import scopes_disabled
from tests.conftest import Tenant

Status = WebhookDelivery.Status


def _endpoint(tenant: Tenant) -> WebhookEndpoint:
    return WebhookEndpoint.objects.create(organization=tenant.organization, url="https://hooks.example.test/arena")


def _delivery(endpoint: WebhookEndpoint, status: str, *, age_days: float) -> WebhookDelivery:
    return WebhookDelivery.objects.create(
        organization_id=endpoint.organization_id,
        endpoint=endpoint,
        event_id=uuid.uuid4(),
        event=WebhookEvent.CAMPAIGN_CLOSED,
        status=status,
        attempts=0 if status == Status.PENDING else 1,
        next_attempt_at=timezone.now() if status in (Status.PENDING, Status.FAILED) else None,
        created_at=timezone.now() - timedelta(days=age_days),
    )


def test_the_default_keeps_30_days():
    # What docs/deployment/configuration.md states (the variable is unset in the test environment).
    assert django_settings.ARENA_WEBHOOK_DELIVERY_RETENTION_DAYS == 30


def test_old_finished_deliveries_go_recent_and_waiting_ones_stay(acme, settings):
    settings.ARENA_WEBHOOK_DELIVERY_RETENTION_DAYS = 30
    endpoint = _endpoint(acme)
    old_succeeded = _delivery(endpoint, Status.SUCCEEDED, age_days=31)
    old_gave_up = _delivery(endpoint, Status.GAVE_UP, age_days=45)
    kept = [
        _delivery(endpoint, Status.SUCCEEDED, age_days=29),
        _delivery(endpoint, Status.GAVE_UP, age_days=1),
        # Old but not finished: a retry is still due, so the row is the only record of what to send.
        _delivery(endpoint, Status.PENDING, age_days=60),
        _delivery(endpoint, Status.FAILED, age_days=60),
    ]
    assert services.webhook_deliveries_purge() == 2
    remaining = set(WebhookDelivery.objects.values_list("pk", flat=True))
    assert remaining == {d.pk for d in kept}
    assert old_succeeded.pk not in remaining and old_gave_up.pk not in remaining
    assert services.webhook_deliveries_purge() == 0  # nothing left to purge


def test_retention_zero_keeps_everything(acme, settings):
    settings.ARENA_WEBHOOK_DELIVERY_RETENTION_DAYS = 0
    endpoint = _endpoint(acme)
    for status in (Status.SUCCEEDED, Status.GAVE_UP, Status.PENDING):
        _delivery(endpoint, status, age_days=3650)
    assert services.webhook_deliveries_purge() == 0
    assert WebhookDelivery.objects.count() == 3


def test_the_purge_deletes_in_batches(acme, settings):
    settings.ARENA_WEBHOOK_DELIVERY_RETENTION_DAYS = 30
    endpoint = _endpoint(acme)
    for _ in range(5):
        _delivery(endpoint, Status.SUCCEEDED, age_days=40)
    recent = _delivery(endpoint, Status.SUCCEEDED, age_days=2)
    with CaptureQueriesContext(connection) as queries:
        assert services.webhook_deliveries_purge(batch_size=2) == 5
    deletes = [q["sql"] for q in queries.captured_queries if q["sql"].lstrip().upper().startswith("DELETE")]
    assert len(deletes) == 3  # 2 + 2 + 1 rows, each batch its own statement
    assert list(WebhookDelivery.objects.values_list("pk", flat=True)) == [recent.pk]


def test_the_cutoff_is_measured_from_now(acme, settings):
    settings.ARENA_WEBHOOK_DELIVERY_RETENTION_DAYS = 7
    endpoint = _endpoint(acme)
    delivery = _delivery(endpoint, Status.SUCCEEDED, age_days=1)
    assert services.webhook_deliveries_purge(now=timezone.now() + timedelta(days=5)) == 0
    assert services.webhook_deliveries_purge(now=timezone.now() + timedelta(days=7)) == 1
    assert not WebhookDelivery.objects.filter(pk=delivery.pk).exists()


@pytest.mark.tenant_scoped
def test_beat_purges_every_organisations_log_without_a_scope(acme, globex, settings):
    settings.ARENA_WEBHOOK_DELIVERY_RETENTION_DAYS = 30
    entry = settings.CELERY_BEAT_SCHEDULE["webhook-deliveries-purge"]
    assert entry["task"] == webhook_deliveries_purge_task.name
    with scopes_disabled():
        for tenant in (acme, globex):
            endpoint = _endpoint(tenant)
            _delivery(endpoint, Status.SUCCEEDED, age_days=31)
            _delivery(endpoint, Status.FAILED, age_days=31)
    assert webhook_deliveries_purge_task() == 2  # no scope open here: the service opens its own
    with scopes_disabled():
        assert set(WebhookDelivery.objects.values_list("status", flat=True)) == {Status.FAILED}
        assert WebhookDelivery.objects.count() == 2
