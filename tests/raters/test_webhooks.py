"""Webhooks: signed deliveries to a real receiver, retries, disabling, the address rule, the events the
services emit, and the console."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from battles.models import Battle, Campaign
from battles.services import battle_generations_record, battle_mark_shown, campaign_close, vote_submit
from core.errors import Conflict, Invalid
from ranking.services import leaderboards_recompute
from raters import services, webhook_transport
from raters.models import AuditAction, AuditEvent, WebhookDelivery, WebhookEndpoint, WebhookEvent
from raters.tasks import webhook_deliver_task
from raters.tenancy import scopes_disabled
from raters.webhook_signing import SignatureInvalid, signature_header, verify_signature
from serving.triton.client import GenerationResult
from tests.conftest import Tenant

from .webhook_receiver import TLS_CA, Receiver, receiver_running

pytestmark = pytest.mark.django_db

SUBSCRIBED = [WebhookEvent.CAMPAIGN_CLOSED, WebhookEvent.BATTLE_RATED, WebhookEvent.LEADERBOARD_UPDATED]


@pytest.fixture
def receiver(settings) -> Iterator[Receiver]:  # type: ignore[no-untyped-def]
    settings.ARENA_WEBHOOK_HOSTS = ["127.0.0.1"]
    with receiver_running() as running:
        yield running


def _endpoint(tenant: Tenant, receiver: Receiver, *, actor=None, events=None) -> WebhookEndpoint:  # type: ignore[no-untyped-def]
    endpoint = services.webhook_endpoint_create(
        organization=tenant.organization, url=receiver.url(), events=events or SUBSCRIBED, actor=actor
    )
    receiver.secret = endpoint.secret
    return endpoint


def _deliver(delivery: WebhookDelivery) -> WebhookDelivery:
    """What a worker does with a queued delivery: the task's body, in the delivery's organisation."""
    webhook_deliver_task(delivery.pk, organization_id=delivery.organization_id)
    delivery.refresh_from_db()
    return delivery


def _make_due(delivery: WebhookDelivery) -> None:
    WebhookDelivery.objects.filter(pk=delivery.pk).update(next_attempt_at=timezone.now())


def _emit(tenant: Tenant, event: str = WebhookEvent.CAMPAIGN_CLOSED, **payload) -> list[WebhookDelivery]:  # type: ignore[no-untyped-def]
    return services.webhook_event_emit(
        organization_id=tenant.organization.pk, event=event, payload={"campaign_id": tenant.campaign.pk, **payload}
    )


# --- Signatures --------------------------------------------------------------------------------------


def test_signature_round_trip_and_refusals():
    body = b'{"id":"e1","type":"ping"}'
    header = signature_header("whsec_s3cret", body)
    assert verify_signature("whsec_s3cret", body, header, 300) == int(header.split(",")[0][2:])
    with pytest.raises(SignatureInvalid, match="no signature matches"):
        verify_signature("whsec_s3cret", body.replace(b"ping", b"pong"), header, 300)  # tampered body
    with pytest.raises(SignatureInvalid, match="no signature matches"):
        verify_signature("whsec_other", body, header, 300)  # another endpoint's secret
    old = signature_header("whsec_s3cret", body, timestamp=int(time.time()) - 301)
    with pytest.raises(SignatureInvalid, match="300 s"):
        verify_signature("whsec_s3cret", body, old, 300)  # a replay after the window
    assert verify_signature("whsec_s3cret", body, old, 600)  # inside a wider window it is genuine
    for malformed in ("", "t=abc,v1=00", "v1=00", f"t={int(time.time())}"):
        with pytest.raises(SignatureInvalid):
            verify_signature("whsec_s3cret", body, malformed, 300)
    # Several v1 values (a secret being replaced): any one matching will do.
    t = int(time.time())
    both = f"t={t},v1={'0' * 64}," + signature_header("whsec_s3cret", body, timestamp=t).split(",")[1]
    assert verify_signature("whsec_s3cret", body, both, 300) == t


# --- Delivery to a real receiver ---------------------------------------------------------------------


def test_a_delivery_reaches_the_receiver_signed_with_the_documented_body_and_headers(acme, alice, receiver):
    endpoint = _endpoint(acme, receiver, actor=alice)
    assert endpoint.secret.startswith("whsec_") and len(endpoint.secret) > 40
    (delivery,) = _emit(acme, extra={"n": 1})
    delivered = _deliver(delivery)

    assert delivered.status == WebhookDelivery.Status.SUCCEEDED
    assert delivered.attempts == 1 and delivered.response_status == 200 and delivered.response_excerpt == "ok"
    assert delivered.delivered_at is not None and delivered.next_attempt_at is None
    assert delivered.duration_ms is not None
    (request,) = receiver.requests
    assert request.verified, request.refusal
    assert request.path == "/hooks/arena"
    document = json.loads(request.body)
    assert document == {
        "id": str(delivery.event_id),
        "type": "campaign.closed",
        "created": delivery.created_at.isoformat(),
        "data": {"campaign_id": acme.campaign.pk, "extra": {"n": 1}},
    }
    assert request.headers["X-Arena-Event"] == "campaign.closed"
    assert request.headers["X-Arena-Delivery"] == str(delivery.pk)
    assert request.headers["Content-Type"] == "application/json"
    timestamp = int(request.headers["X-Arena-Timestamp"])
    assert request.headers["X-Arena-Signature"].startswith(f"t={timestamp},v1=")
    # A second hand-off of the same delivery (a redelivered task, the sweep) sends nothing more.
    assert webhook_deliver_task(delivery.pk, organization_id=acme.organization.pk) == "not due"
    assert len(receiver.requests) == 1


def test_a_500_is_retried_later_and_later_then_given_up(acme, receiver, settings):
    settings.ARENA_WEBHOOK_MAX_ATTEMPTS = 4
    settings.ARENA_WEBHOOK_RETRY_BASE_S = 30
    receiver.statuses = [500, 500, 500, 500]
    receiver.answer = b"<h1>down\x00 for\x1b maintenance</h1>" + b"x" * 5000
    _endpoint(acme, receiver)
    (delivery,) = _emit(acme)
    waits = []
    for attempt in (1, 2, 3):
        before = timezone.now()
        delivery = _deliver(delivery)
        assert delivery.status == WebhookDelivery.Status.FAILED
        assert delivery.attempts == attempt and delivery.response_status == 500
        assert delivery.error == "The receiver answered 500."
        assert delivery.next_attempt_at is not None
        waits.append((delivery.next_attempt_at - before).total_seconds())
        # Not due yet: a worker handed it now leaves it alone.
        assert webhook_deliver_task(delivery.pk, organization_id=acme.organization.pk) == "not due"
        _make_due(delivery)
    # 30 s, 2 min, 8 min, each within +-20%: every wait longer than the last.
    assert 24 <= waits[0] <= 36.5 and 96 <= waits[1] <= 144.5 and 384 <= waits[2] <= 576.5
    # The excerpt is truncated and stripped of control characters.
    assert delivery.response_excerpt.startswith("<h1>down  for  maintenance</h1>")
    assert len(delivery.response_excerpt) == webhook_transport.EXCERPT_CHARS
    delivery = _deliver(delivery)
    assert delivery.status == WebhookDelivery.Status.GAVE_UP and delivery.attempts == 4
    assert delivery.next_attempt_at is None
    assert len(receiver.requests) == 4 and all(r.verified for r in receiver.requests)


def test_redirects_are_not_followed(acme, receiver):
    receiver.statuses = [302]
    receiver.extra_headers = {"Location": "http://169.254.169.254/latest/meta-data/"}
    _endpoint(acme, receiver)
    (delivery,) = _emit(acme)
    delivery = _deliver(delivery)
    assert delivery.status == WebhookDelivery.Status.FAILED and delivery.response_status == 302
    assert "not followed" in delivery.error and len(receiver.requests) == 1


def test_an_unreachable_receiver_is_a_failed_attempt(acme, settings):
    settings.ARENA_WEBHOOK_HOSTS = ["127.0.0.1"]
    endpoint = services.webhook_endpoint_create(
        organization=acme.organization, url="http://127.0.0.1:9/hook", events=SUBSCRIBED, actor=None
    )
    (delivery,) = _emit(acme)
    delivery = _deliver(delivery)
    assert delivery.status == WebhookDelivery.Status.FAILED and delivery.response_status is None
    assert delivery.error.startswith("Connection failed")
    endpoint.refresh_from_db()
    assert endpoint.consecutive_failures == 1 and endpoint.failing_since is not None


def test_failures_in_a_row_disable_the_endpoint_with_an_audit_row(acme, receiver, settings):
    settings.ARENA_WEBHOOK_DISABLE_AFTER_FAILURES = 3
    settings.ARENA_WEBHOOK_DISABLE_AFTER_S = 0
    receiver.statuses = [503] * 10
    endpoint = _endpoint(acme, receiver)
    # Each sent as it is emitted (a slot holder sends every due delivery of its organisation).
    for _ in range(2):
        assert _deliver(_emit(acme)[0]).status == WebhookDelivery.Status.FAILED
    endpoint.refresh_from_db()
    assert endpoint.active and endpoint.consecutive_failures == 2
    (waiting,) = _emit(acme)
    WebhookDelivery.objects.filter(pk=waiting.pk).update(next_attempt_at=timezone.now() + timedelta(minutes=5))
    _deliver(_emit(acme)[0])
    endpoint.refresh_from_db()
    assert not endpoint.active and endpoint.disabled_at is not None
    assert "3 failed attempts in a row" in endpoint.disabled_reason
    audit = AuditEvent.objects.get(action=AuditAction.WEBHOOK_DISABLED, object_id=str(endpoint.pk))
    assert audit.actor is None and audit.data["consecutive_failures"] == 3 and audit.data["abandoned_deliveries"] == 4
    assert "secret" not in json.dumps(audit.data) and endpoint.secret not in json.dumps(audit.data)
    # What was still waiting is abandoned, nothing is sent to it, and new events skip it.
    waiting.refresh_from_db()
    assert waiting.status == WebhookDelivery.Status.GAVE_UP
    assert webhook_deliver_task(waiting.pk, organization_id=acme.organization.pk) == "not due"
    assert _emit(acme) == []
    assert len(receiver.requests) == 3
    with pytest.raises(Conflict):
        services.webhook_ping(endpoint=endpoint, actor=None)
    # Re-enabled by a person: the count starts again and events flow.
    services.webhook_endpoint_enable(endpoint=endpoint, actor=None)
    endpoint.refresh_from_db()
    assert endpoint.active and endpoint.consecutive_failures == 0 and endpoint.disabled_reason == ""
    assert AuditEvent.objects.filter(action=AuditAction.WEBHOOK_ENABLED, object_id=str(endpoint.pk)).exists()
    receiver.statuses = []
    assert _deliver(_emit(acme)[0]).status == WebhookDelivery.Status.SUCCEEDED


def test_a_short_burst_of_failures_does_not_disable_before_the_time_threshold(acme, receiver, settings):
    settings.ARENA_WEBHOOK_DISABLE_AFTER_FAILURES = 2
    settings.ARENA_WEBHOOK_DISABLE_AFTER_S = 3600
    receiver.statuses = [500] * 5
    endpoint = _endpoint(acme, receiver)
    for _ in range(5):
        _deliver(_emit(acme)[0])
    endpoint.refresh_from_db()
    assert endpoint.active and endpoint.consecutive_failures == 5
    # The same run of failures, begun more than the threshold ago: the next failure disables.
    WebhookEndpoint.objects.filter(pk=endpoint.pk).update(failing_since=timezone.now() - timedelta(hours=2))
    receiver.statuses = [500]
    _deliver(_emit(acme)[0])
    endpoint.refresh_from_db()
    assert not endpoint.active


def test_a_success_resets_the_failure_count(acme, receiver):
    receiver.statuses = [500, 500]
    endpoint = _endpoint(acme, receiver)
    for _ in range(2):
        _deliver(_emit(acme)[0])
    endpoint.refresh_from_db()
    assert endpoint.consecutive_failures == 2 and endpoint.failing_since is not None
    assert _deliver(_emit(acme)[0]).status == WebhookDelivery.Status.SUCCEEDED
    endpoint.refresh_from_db()
    assert endpoint.consecutive_failures == 0 and endpoint.failing_since is None


def test_the_sweep_sends_what_is_due_and_a_lost_worker_is_retried_after_its_lease(acme, receiver):
    _endpoint(acme, receiver)
    (delivery,) = _emit(acme)
    # A worker claimed it and died: the claim's lease keeps it from the sweep until the lease passes.
    now = timezone.now()
    WebhookDelivery.objects.filter(pk=delivery.pk).update(attempts=1, next_attempt_at=now + timedelta(seconds=80))
    assert services.webhook_deliveries_due() == 0
    WebhookDelivery.objects.filter(pk=delivery.pk).update(next_attempt_at=now - timedelta(seconds=1))
    assert services.webhook_deliveries_due() == 1  # queued to the broker (or, without one, sent at once)
    delivery = _deliver(delivery)  # what the worker does with it (a no-op if it was sent at once)
    assert delivery.status == WebhookDelivery.Status.SUCCEEDED and delivery.attempts == 2


@pytest.mark.tenant_scoped
def test_the_sweep_runs_without_a_scope_and_each_send_is_a_tenant_task(acme, globex, receiver):
    from raters.tasks import webhook_deliveries_due_task
    from raters.tenancy import TenantTask, scopes_disabled

    with scopes_disabled():
        for tenant in (acme, globex):
            _endpoint(tenant, receiver)
            _emit(tenant)
    assert isinstance(webhook_deliver_task._get_current_object(), TenantTask)  # type: ignore[attr-defined]
    assert webhook_deliveries_due_task() == 2  # no ScopeError: it lists across tenants on purpose


def test_an_organisation_sends_in_at_most_its_slots_and_a_slot_holder_sends_the_rest(acme, globex, receiver, settings):
    """One tenant's flood holds its own slots only: with every acme slot taken, acme's delivery is left
    due (no attempt, no wait) while globex's goes out; a slot holder then sends all of acme's due ones."""
    from core.slots import organization_slot

    settings.ARENA_WEBHOOK_ORG_CONCURRENCY = 1
    _endpoint(acme, receiver)
    acme_deliveries = [_emit(acme)[0] for _ in range(3)]
    with scopes_disabled():
        _endpoint(globex, receiver)
        (globex_delivery,) = _emit(globex)
    lease = 60
    with organization_slot("webhooks", acme.organization.pk, limit=1, lease_s=lease) as held:
        assert held  # a worker of acme's is sending (its slot)
        first = _deliver(acme_deliveries[0])
        assert first.status == WebhookDelivery.Status.PENDING and first.attempts == 0  # left due, untouched
        assert receiver.requests == []
        with scopes_disabled():
            other = _deliver(globex_delivery)
        assert other.status == WebhookDelivery.Status.SUCCEEDED and len(receiver.requests) == 1
    # The slot is free: the next task of acme's sends its delivery, then acme's other due ones, oldest first.
    first = _deliver(acme_deliveries[0])
    assert first.status == WebhookDelivery.Status.SUCCEEDED
    assert set(WebhookDelivery.objects.filter(organization=acme.organization).values_list("status", flat=True)) == {
        WebhookDelivery.Status.SUCCEEDED
    }
    assert len(receiver.requests) == 4
    # Released: the slot can be taken again at once.
    with organization_slot("webhooks", acme.organization.pk, limit=1, lease_s=lease) as held:
        assert held


# --- Emitting -----------------------------------------------------------------------------------------


def test_emit_writes_one_delivery_per_active_subscribed_endpoint_of_the_organisation(acme, globex, receiver):
    subscribed = _endpoint(acme, receiver)
    _endpoint(acme, receiver, events=[WebhookEvent.EXPORT_READY])  # not subscribed
    off = _endpoint(acme, receiver)
    services.webhook_endpoint_update(endpoint=off, active=False, actor=None)
    _endpoint(globex, receiver)  # another organisation's
    deliveries = _emit(acme, WebhookEvent.BATTLE_RATED)
    assert [d.endpoint_id for d in deliveries] == [subscribed.pk]
    second = _endpoint(acme, receiver)
    event_ids = {d.event_id for d in _emit(acme)}
    assert len(event_ids) == 1  # one event, the same id for every endpoint
    assert WebhookDelivery.objects.filter(event_id__in=event_ids).count() == 2
    assert second.pk in WebhookDelivery.objects.filter(event_id__in=event_ids).values_list("endpoint_id", flat=True)
    with pytest.raises(ValueError):
        services.webhook_event_emit(organization_id=acme.organization.pk, event="campaign.exploded", payload={})


def test_a_rolled_back_change_sends_nothing(acme, receiver, django_capture_on_commit_callbacks):
    _endpoint(acme, receiver)
    with django_capture_on_commit_callbacks() as callbacks:
        with pytest.raises(RuntimeError), transaction.atomic():
            _emit(acme)
            raise RuntimeError("the change failed")
    assert callbacks == [] and not WebhookDelivery.objects.exists()
    with django_capture_on_commit_callbacks() as callbacks:
        with transaction.atomic():
            _emit(acme)
    assert len(callbacks) == 1 and WebhookDelivery.objects.count() == 1
    assert receiver.requests == []  # nothing is sent inside the transaction


def test_campaign_close_emits_campaign_closed(acme, alice, receiver, django_capture_on_commit_callbacks):
    endpoint = _endpoint(acme, receiver)
    with django_capture_on_commit_callbacks() as callbacks:
        campaign_close(campaign=acme.campaign, actor=alice)
    assert callbacks  # the sends wait for the commit
    delivery = WebhookDelivery.objects.get(endpoint=endpoint)
    assert delivery.event == WebhookEvent.CAMPAIGN_CLOSED
    assert delivery.payload["campaign_id"] == acme.campaign.pk and delivery.payload["slug"] == acme.campaign.slug
    assert delivery.payload["closed_at"]
    assert _deliver(delivery).status == WebhookDelivery.Status.SUCCEEDED
    assert json.loads(receiver.requests[0].body)["type"] == "campaign.closed"


def _shown_battle(tenant: Tenant, rater) -> Battle:  # type: ignore[no-untyped-def]
    battle = Battle.objects.create(
        organization=tenant.organization,
        campaign=tenant.campaign,
        rater=rater,
        pool=tenant.pool,
        prompt=tenant.campaign.prompts.earliest("id"),
        left=tenant.left,
        right=tenant.right,
    )
    answer = GenerationResult(text="An answer.", output_tokens=3, finish_reason="stop", latency_s=0.2)
    battle = battle_generations_record(battle=battle, left=answer, right=answer)
    return battle_mark_shown(battle=battle)


def test_vote_submit_emits_battle_rated_with_the_revealed_pair_and_no_email(acme, bob, receiver):
    endpoint = _endpoint(acme, receiver)
    Campaign.objects.filter(pk=acme.campaign.pk).update(status=Campaign.Status.OPEN)
    battle = _shown_battle(acme, bob)
    vote = vote_submit(battle_id=battle.pk, user=bob, choice="left")
    delivery = WebhookDelivery.objects.get(endpoint=endpoint)
    assert delivery.event == WebhookEvent.BATTLE_RATED
    payload = delivery.payload
    assert payload["battle_id"] == str(battle.pk) and payload["vote_id"] == vote.pk
    assert payload["campaign_id"] == acme.campaign.pk and payload["choice"] == "left"
    assert payload["rater_id"] == bob.pk and payload["pool_id"] == acme.pool.pk
    assert payload["left"] == {"competitor_id": acme.left.pk, "model": vote.left_model, "version": "2026-11"}
    assert payload["right"]["competitor_id"] == acme.right.pk
    assert bob.email not in json.dumps(payload)
    assert _deliver(delivery).status == WebhookDelivery.Status.SUCCEEDED


def test_a_recompute_emits_leaderboard_updated_once(acme, bob, receiver):
    from tests.ranking.synth import votes_write

    endpoint = _endpoint(acme, receiver)
    votes_write(
        campaign=acme.campaign,
        pool=acme.pool,
        raters=[bob],
        prompts=list(acme.campaign.prompts.all()),
        competitors=[acme.left, acme.right],
        strengths=(1.5, 1.0),
        n=40,
        seed=3,
        categories=("coding", "writing"),
    )
    snapshots = leaderboards_recompute(campaign_id=acme.campaign.pk)
    assert len(snapshots) == 9  # overall and two categories; raw, style and reliability-weighted
    (delivery,) = WebhookDelivery.objects.filter(endpoint=endpoint)  # once per recompute, not per snapshot
    assert delivery.event == WebhookEvent.LEADERBOARD_UPDATED
    assert delivery.payload == {
        "campaign_id": acme.campaign.pk,
        "version": snapshots[0].version,
        "categories": ["", "coding", "writing"],
        "views": ["raw", "reliability", "style"],
        "votes_total": 40,
        "votes_used": 40,
        "last_vote_id": snapshots[0].last_vote_id,
    }


# --- Where webhooks may go ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "https://127.0.0.1/hook",
        "https://10.0.0.5/hook",
        "https://169.254.169.254/latest/meta-data/",
        "https://[::1]/hook",
        "https://[::ffff:127.0.0.1]/hook",
    ],
)
def test_internal_addresses_are_refused_at_creation(acme, url, settings):
    settings.ARENA_WEBHOOK_HOSTS = []
    with pytest.raises(Invalid) as refused:
        services.webhook_endpoint_create(organization=acme.organization, url=url, events=SUBSCRIBED, actor=None)
    assert "internal address" in refused.value.field_errors["url"][0]
    assert not WebhookEndpoint.objects.exists()


def test_https_is_required_unless_the_operator_allows_the_host(acme, settings):
    settings.ARENA_WEBHOOK_HOSTS = ["10.1.2.3"]
    with pytest.raises(Invalid) as refused:
        services.webhook_endpoint_create(
            organization=acme.organization, url="http://93.184.216.34/hook", events=SUBSCRIBED, actor=None
        )
    assert "https://" in refused.value.field_errors["url"][0]
    for url in ("https://93.184.216.34/hook", "http://10.1.2.3:8080/hook"):
        services.webhook_endpoint_create(organization=acme.organization, url=url, events=SUBSCRIBED, actor=None)
    for bad in ("ftp://93.184.216.34/", "https://user:pw@93.184.216.34/"):
        with pytest.raises(Invalid):
            services.webhook_endpoint_create(organization=acme.organization, url=bad, events=SUBSCRIBED, actor=None)
    with pytest.raises(Invalid) as unknown:
        services.webhook_endpoint_create(
            organization=acme.organization, url="https://93.184.216.34/", events=["vote.cast", "ping"], actor=None
        )
    assert "Unknown events: ping, vote.cast." in unknown.value.field_errors["events"][0]


def test_a_name_that_resolves_elsewhere_at_send_time_is_refused(acme, receiver, monkeypatch, settings):
    """DNS rebinding: public when entered, loopback when sent. Nothing reaches the loopback receiver."""
    settings.ARENA_WEBHOOK_HOSTS = []
    answers = {"hooks.customer.test": ["93.184.216.34"]}
    monkeypatch.setattr(webhook_transport, "_resolve", lambda host, port: answers[host])
    endpoint = services.webhook_endpoint_create(
        organization=acme.organization,
        url=f"https://hooks.customer.test:{receiver.port}/hook",
        events=SUBSCRIBED,
        actor=None,
    )
    answers["hooks.customer.test"] = ["93.184.216.34", "127.0.0.1"]
    (delivery,) = _emit(acme)
    delivery = _deliver(delivery)
    assert delivery.status == WebhookDelivery.Status.FAILED
    assert delivery.error.startswith("Refused:") and "127.0.0.1" in delivery.error
    assert receiver.requests == []
    endpoint.refresh_from_db()
    assert endpoint.consecutive_failures == 1


def test_the_send_connects_to_the_address_the_check_approved(acme, receiver, monkeypatch, settings):
    """The name is resolved once, by the check, and the connection goes to that address: a name that
    no real DNS knows reaches the receiver, with its own name in the Host header."""
    settings.ARENA_WEBHOOK_HOSTS = ["127.0.0.0/8"]
    monkeypatch.setattr(webhook_transport, "_resolve", lambda host, port: ["127.0.0.1"])
    endpoint = services.webhook_endpoint_create(
        organization=acme.organization,
        url=receiver.url(host="receiver.invalid"),
        events=SUBSCRIBED,
        actor=None,
    )
    receiver.secret = endpoint.secret
    (delivery,) = _emit(acme)
    assert _deliver(delivery).status == WebhookDelivery.Status.SUCCEEDED
    (request,) = receiver.requests
    assert request.headers["Host"] == f"receiver.invalid:{receiver.port}" and request.verified


def test_https_verifies_the_certificate_for_the_name_while_connecting_to_the_approved_address(
    acme, monkeypatch, settings
):
    """A real TLS receiver (the test CA's certificate for receiver.invalid) reached at its approved
    loopback address: refused while its CA is not trusted, delivered once the operator's bundle names it,
    and refused again under a name the certificate does not carry."""
    settings.ARENA_WEBHOOK_HOSTS = ["127.0.0.0/8"]
    monkeypatch.setattr(webhook_transport, "_resolve", lambda host, port: ["127.0.0.1"])
    with receiver_running(tls=True) as receiver:
        endpoint = services.webhook_endpoint_create(
            organization=acme.organization, url=receiver.url(host="receiver.invalid"), events=SUBSCRIBED, actor=None
        )
        receiver.secret = endpoint.secret
        settings.ARENA_WEBHOOK_CA_FILE = ""
        (untrusted,) = _emit(acme)
        untrusted = _deliver(untrusted)
        assert untrusted.status == WebhookDelivery.Status.FAILED and "certificate verify failed" in untrusted.error
        settings.ARENA_WEBHOOK_CA_FILE = str(TLS_CA)
        (trusted,) = _emit(acme)
        assert _deliver(trusted).status == WebhookDelivery.Status.SUCCEEDED
        (request,) = receiver.requests
        assert request.verified and request.headers["Host"] == f"receiver.invalid:{receiver.port}"
        services.webhook_endpoint_update(endpoint=endpoint, url=receiver.url(host="other.invalid"), actor=None)
        (wrong_name,) = _emit(acme)
        wrong_name = _deliver(wrong_name)
        assert wrong_name.status == WebhookDelivery.Status.FAILED and "TLS error" in wrong_name.error
        assert len(receiver.requests) == 1


def test_the_next_approved_address_is_tried_when_the_first_does_not_answer(acme, receiver, monkeypatch, settings):
    settings.ARENA_WEBHOOK_HOSTS = ["127.0.0.0/8"]
    # 127.0.0.2 has nothing listening on the receiver's port; 127.0.0.1 has the receiver.
    monkeypatch.setattr(webhook_transport, "_resolve", lambda host, port: ["127.0.0.2", "127.0.0.1"])
    endpoint = services.webhook_endpoint_create(
        organization=acme.organization, url=receiver.url(host="receiver.invalid"), events=SUBSCRIBED, actor=None
    )
    receiver.secret = endpoint.secret
    assert _deliver(_emit(acme)[0]).status == WebhookDelivery.Status.SUCCEEDED
    assert len(receiver.requests) == 1


# --- The console: owners only ------------------------------------------------------------------------


def test_owner_creates_a_webhook_in_the_console_and_sees_the_secret_once(acme, alice_client, settings):
    settings.ARENA_WEBHOOK_HOSTS = ["127.0.0.1"]
    response = alice_client.post(
        reverse("admin:raters_webhookendpoint_add"),
        {
            "organization": acme.organization.pk,
            "url": "http://127.0.0.1:9/hook",
            "description": "CI",
            "events": ["campaign.closed", "leaderboard.updated"],
        },
        follow=True,
    )
    assert response.status_code == 200
    endpoint = WebhookEndpoint.objects.get()
    assert endpoint.events == ["campaign.closed", "leaderboard.updated"]
    assert endpoint.secret in response.content.decode()
    assert AuditEvent.objects.filter(action=AuditAction.WEBHOOK_CREATED, object_id=str(endpoint.pk)).exists()
    # Owners read it again on the change page; the list does not show it.
    change = alice_client.get(reverse("admin:raters_webhookendpoint_change", args=[endpoint.pk]))
    assert endpoint.secret in change.content.decode()
    listing = alice_client.get(reverse("admin:raters_webhookendpoint_changelist"))
    assert endpoint.secret not in listing.content.decode()


def test_console_refuses_an_internal_url_with_a_clear_message(acme, alice_client, settings):
    settings.ARENA_WEBHOOK_HOSTS = []
    response = alice_client.post(
        reverse("admin:raters_webhookendpoint_add"),
        {"organization": acme.organization.pk, "url": "https://10.0.0.7/hook", "events": ["campaign.closed"]},
    )
    assert response.status_code == 200
    assert "internal address" in response.content.decode()
    assert not WebhookEndpoint.objects.exists()


def test_console_ping_and_enable_actions(acme, alice_client, receiver):
    endpoint = _endpoint(acme, receiver)
    url = reverse("admin:raters_webhookendpoint_changelist")
    alice_client.post(url, {"action": "ping", "_selected_action": [endpoint.pk]})
    delivery = WebhookDelivery.objects.get(endpoint=endpoint)
    assert delivery.event == WebhookEvent.PING
    assert _deliver(delivery).status == WebhookDelivery.Status.SUCCEEDED
    assert json.loads(receiver.requests[0].body)["type"] == "ping" and receiver.requests[0].verified
    WebhookEndpoint.objects.filter(pk=endpoint.pk).update(active=False, disabled_reason="x", consecutive_failures=9)
    alice_client.post(url, {"action": "enable", "_selected_action": [endpoint.pk]})
    endpoint.refresh_from_db()
    assert endpoint.active and endpoint.consecutive_failures == 0


def test_webhooks_and_deliveries_are_for_owners_of_the_organisation_only(
    acme, globex, receiver, dave_client, charlie_client, alice_client
):
    endpoint = _endpoint(acme, receiver)
    (delivery,) = _emit(acme)
    for name, args in (
        ("admin:raters_webhookendpoint_changelist", []),
        ("admin:raters_webhookendpoint_change", [endpoint.pk]),
        ("admin:raters_webhookdelivery_changelist", []),
        ("admin:raters_webhookdelivery_change", [delivery.pk]),
    ):
        assert alice_client.get(reverse(name, args=args)).status_code == 200
        # dave manages Acme but does not own it: no webhook pages at all.
        assert dave_client.get(reverse(name, args=args)).status_code == 403
    # charlie owns Globex: Acme's webhook and deliveries are not there for him.
    assert charlie_client.get(reverse("admin:raters_webhookendpoint_change", args=[endpoint.pk])).status_code == 302
    assert charlie_client.get(reverse("admin:raters_webhookdelivery_change", args=[delivery.pk])).status_code == 302
    listing = charlie_client.get(reverse("admin:raters_webhookdelivery_changelist")).content.decode()
    assert str(delivery.event_id) not in listing and endpoint.url not in listing
    # The delivery log is read-only, even for owners.
    page = alice_client.get(reverse("admin:raters_webhookdelivery_change", args=[delivery.pk])).content.decode()
    assert 'name="_save"' not in page
