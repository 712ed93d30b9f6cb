"""The vote log export: every event field, as JSON lines and CSV, for managers and viewers."""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.urls import reverse

from battles.apis import CSV_COLUMNS
from raters.models import Role
from tests.conftest import login, start_battle
from tests.factories import MembershipFactory, UserFactory

pytestmark = [pytest.mark.django_db]
# The tests of the first part generate real battles; the rest write voted battles directly (export_world).
with_triton = [pytest.mark.triton, pytest.mark.usefixtures("triton_server")]


def _triton(test):  # type: ignore[no-untyped-def]
    for mark in with_triton:
        test = mark(test)
    return test


@pytest.fixture
def voted(acme, bob_client):  # type: ignore[no-untyped-def]
    ids = []
    for choice in ("left", "both_bad"):
        battle, _ = start_battle(bob_client, acme.campaign)
        bob_client.post(reverse("battles:vote", args=[battle.pk]), {"choice": choice})
        ids.append(str(battle.pk))
    return ids


def _body(response) -> str:  # type: ignore[no-untyped-def]
    return b"".join(response.streaming_content).decode()


@_triton
def test_jsonl_export_has_every_event(acme, voted, alice_client):
    response = alice_client.get(reverse("api:votes", args=[acme.campaign.pk, "jsonl"]))
    assert response.status_code == 200 and response.streaming
    events = [json.loads(line) for line in _body(response).splitlines()]
    assert [e["battle_id"] for e in events] == voted
    assert [e["vote"] for e in events] == ["left", "both_bad"]
    event = events[0]
    assert set(event) >= {
        "battle_id",
        "timestamp",
        "rater_id",
        "pool_id",
        "prompt",
        "left",
        "right",
        "params",
        "vote",
        "decision_ms",
        "identity",
    }
    assert set(event["left"]) >= {"model", "version", "output_tokens", "finish_reason", "latency_s", "style"}
    assert set(event["prompt"]) >= {"id", "hash", "category", "language"}


@_triton
def test_csv_export_matches_jsonl(acme, voted, alice_client):
    rows = list(
        csv.DictReader(io.StringIO(_body(alice_client.get(reverse("api:votes", args=[acme.campaign.pk, "csv"])))))
    )
    assert list(rows[0]) == list(CSV_COLUMNS)
    assert [r["vote"] for r in rows] == ["left", "both_bad"]
    assert json.loads(rows[0]["left_style"])["tokens"] > 0


@_triton
def test_viewer_may_export_but_rater_may_not(acme, voted, bob_client):
    viewer = UserFactory.create()
    MembershipFactory(user=viewer, organization=acme.organization, role=Role.VIEWER)
    assert login(viewer).get(reverse("api:votes", args=[acme.campaign.pk, "jsonl"])).status_code == 200
    assert bob_client.get(reverse("api:votes", args=[acme.campaign.pk, "jsonl"])).status_code == 404


@_triton
def test_csv_cells_cannot_become_spreadsheet_formulas(acme, alice_client, bob_client):
    from battles.models import Campaign

    Campaign.objects.filter(pk=acme.campaign.pk).update(system_prompt='=HYPERLINK("http://evil.test","x")')
    battle, _ = start_battle(bob_client, acme.campaign)
    bob_client.post(reverse("battles:vote", args=[battle.pk]), {"choice": "tie"})
    rows = list(
        csv.DictReader(io.StringIO(_body(alice_client.get(reverse("api:votes", args=[acme.campaign.pk, "csv"])))))
    )
    assert rows[0]["system_prompt"] == '\'=HYPERLINK("http://evil.test","x")'
    jsonl = _body(alice_client.get(reverse("api:votes", args=[acme.campaign.pk, "jsonl"])))
    assert json.loads(jsonl)["params"]["system_prompt"].startswith("=HYPERLINK")  # JSON keeps the exact text


# --- Filters, texts, the fast path and the asynchronous jobs (battles written directly). ----------

from datetime import timedelta  # noqa: E402
from pathlib import Path  # noqa: E402

from django.utils import timezone  # noqa: E402

from battles import exporting, hooks, selectors, services, tasks  # noqa: E402
from battles.exporting import VoteFilters  # noqa: E402
from battles.models import ExportJob, Vote  # noqa: E402
from tests.battles.export_world import vote_make  # noqa: E402


def _reference(votes, *, texts: bool) -> list[dict]:  # type: ignore[no-untyped-def]
    # The JSON value of each event as Vote.as_event() (plus the conversation) renders it.
    return [json.loads(json.dumps(e, sort_keys=True)) for e in selectors.vote_events(votes=votes, texts=texts)]


# What JSON and COPY escape: backslashes (COPY doubles them), quotes, control characters, non-ASCII.
TRICKY = 'a \\ b \\\\ "q" \n\t\r\x01 é ✓ \\n'


@pytest.fixture
def mixed(acme, bob):  # type: ignore[no-untyped-def]
    """One-turn and multi-turn votes, a swapped pair, a timestamp on the second, integral latencies."""
    base = timezone.now().replace(microsecond=0) - timedelta(days=3)
    return [
        vote_make(acme, rater=bob, choice="left", created_at=base, texts=('=cmd|" /C calc"!A0', TRICKY)),
        vote_make(
            acme,
            rater=bob,
            choice="right",
            created_at=base + timedelta(hours=1, microseconds=1234),
            turns=3,
            system_prompt=TRICKY,
        ),
        vote_make(acme, rater=bob, choice="tie", created_at=base + timedelta(days=1), swap=True, turns=4),
        vote_make(acme, rater=bob, choice="both_bad", created_at=base + timedelta(days=2), category="coding"),
    ]


@pytest.mark.parametrize("texts", [False, True])
def test_fast_path_renders_what_as_event_renders(acme, mixed, texts):
    votes = selectors.votes_filtered(campaign=acme.campaign)
    body = b"".join(selectors.vote_event_jsonl(votes=votes, texts=texts)).decode()
    fast = [json.loads(line) for line in body.splitlines()]
    assert fast == _reference(votes, texts=texts)
    # The reference itself is the model's event, field for field.
    plain = [v.as_event() for v in Vote.objects.filter(campaign=acme.campaign).order_by("id")]
    assert [{k: v for k, v in e.items() if k != "conversation"} for e in fast] == json.loads(json.dumps(plain))
    assert fast[0]["timestamp"] == mixed[0].created_at.isoformat()
    assert fast[1]["timestamp"].endswith(".001234+00:00")


@pytest.mark.parametrize("texts", [False, True])
def test_other_databases_get_the_same_lines_from_python(acme, mixed, texts, monkeypatch):
    from django.db import connection

    votes = selectors.votes_filtered(campaign=acme.campaign)
    fast = b"".join(selectors.vote_event_jsonl(votes=votes, texts=texts)).decode().splitlines()
    monkeypatch.setattr(connection, "vendor", "sqlite")  # the path SQLite takes (events built in Python)
    python = b"".join(selectors.vote_event_jsonl(votes=votes, texts=texts)).decode().splitlines()
    assert python == [json.dumps(e, sort_keys=True) for e in selectors.vote_events(votes=votes, texts=texts)]
    assert [json.loads(line) for line in python] == [json.loads(line) for line in fast]


def test_texts_hold_every_turn_of_both_sides(acme, mixed):
    events = _reference(selectors.votes_filtered(campaign=acme.campaign), texts=True)
    first, multi = events[0]["conversation"], events[1]["conversation"]
    assert first == [{"index": 0, "prompt": mixed[0].prompt.text, "left": '=cmd|" /C calc"!A0', "right": TRICKY}]
    assert [t["index"] for t in multi] == [0, 1, 2]
    assert multi[2] == {"index": 2, "prompt": "Follow-up 2?", "left": "left answer 2", "right": "right answer 2"}


def test_texts_are_fetched_per_chunk_not_per_row(acme, bob, django_assert_max_num_queries, monkeypatch):
    for _ in range(7):
        vote_make(acme, rater=bob, turns=2)
    monkeypatch.setattr(exporting, "CHUNK_SIZE", 3)
    votes = selectors.votes_filtered(campaign=acme.campaign)
    # 3 chunks: each one fetch of votes and one of texts (the server-side cursor adds a few statements).
    with django_assert_max_num_queries(12):
        assert len(list(selectors.vote_events(votes=votes, texts=True))) == 7


def test_filters_select_by_time_category_competitor_and_source(acme, mixed):
    def ids(**kwargs):  # type: ignore[no-untyped-def]
        votes = selectors.votes_filtered(campaign=acme.campaign, filters=VoteFilters(**kwargs))
        body = b"".join(selectors.vote_event_jsonl(votes=votes)).decode()
        return [json.loads(line)["vote_id"] for line in body.splitlines()]

    all_ids = [v.pk for v in mixed]
    assert ids() == all_ids
    assert ids(since=mixed[1].created_at) == all_ids[1:]
    assert ids(until=mixed[1].created_at) == all_ids[:1]  # until is exclusive
    assert ids(since=mixed[1].created_at, until=mixed[3].created_at) == all_ids[1:3]
    assert ids(category="coding") == all_ids[3:]
    assert ids(competitor=acme.right.pk) == all_ids  # either side
    assert ids(competitor=acme.right.pk + 1000) == []
    assert ids(prompt_source="rater") == []
    assert ids(prompt_source="pool") == all_ids


def test_csv_with_texts_keeps_formula_protection(acme, mixed):
    votes = selectors.votes_filtered(campaign=acme.campaign)
    body = "".join(exporting.csv_from_events(selectors.vote_events(votes=votes, texts=True), texts=True))
    rows = list(csv.DictReader(io.StringIO(body)))
    assert list(rows[0]) == list(exporting.csv_columns(texts=True))
    assert rows[0]["left_text"] == '\'=cmd|" /C calc"!A0' and rows[0]["later_turns"] == ""
    assert [t["index"] for t in json.loads(rows[1]["later_turns"])] == [1, 2]


@pytest.fixture
def export_root(settings, tmp_path):  # type: ignore[no-untyped-def]
    settings.ARENA_EXPORT_ROOT = tmp_path / "exports"
    return settings.ARENA_EXPORT_ROOT


def _run(job: ExportJob, capture) -> ExportJob:  # type: ignore[no-untyped-def]
    # The task as a worker runs it (its tenant scope, its body), here in the test's transaction.
    with capture(execute=True):
        tasks.export_job_run_task(str(job.pk), organization_id=job.organization_id)
    job.refresh_from_db()
    return job


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_export_job_writes_the_file_with_its_checksum(
    acme, alice, mixed, export_root, fmt, django_capture_on_commit_callbacks
):
    received = []

    def receiver(**kwargs):  # type: ignore[no-untyped-def]
        received.append(kwargs)

    hooks.export_ready.connect(receiver)
    try:
        job = services.export_job_create(
            campaign=acme.campaign,
            requested_by=alice,
            api_key=None,
            kind="votes",
            format=fmt,
            texts=True,
            filters=VoteFilters(since=mixed[1].created_at),
        )
        assert job.status == ExportJob.Status.QUEUED
        job = _run(job, django_capture_on_commit_callbacks)
    finally:
        hooks.export_ready.disconnect(receiver)
    assert job.status == ExportJob.Status.DONE and job.finished_at is not None and job.started_at is not None
    data = (Path(export_root) / job.path).read_bytes()
    import hashlib

    assert job.sha256 == hashlib.sha256(data).hexdigest() and job.bytes == len(data) and job.rows == 3
    if fmt == "jsonl":
        assert [json.loads(line)["vote_id"] for line in data.decode().splitlines()] == [v.pk for v in mixed[1:]]
        assert all("conversation" in json.loads(line) for line in data.decode().splitlines())
    else:
        assert len(list(csv.DictReader(io.StringIO(data.decode())))) == 3
    assert not list(Path(export_root).rglob("*.part"))
    assert [r["event"] for r in received] == ["export.ready"]
    assert received[0]["organization_id"] == acme.organization.pk
    assert received[0]["payload"]["sha256"] == job.sha256 and received[0]["payload"]["status"] == "done"


def test_a_finished_export_is_a_webhook_delivery(acme, globex, alice, mixed, export_root):
    from raters.models import WebhookDelivery, WebhookEndpoint

    ours = WebhookEndpoint.objects.create(
        organization=acme.organization, url="https://hooks.acme.test/arena", events=["export.ready"]
    )
    WebhookEndpoint.objects.create(organization=globex.organization, url="https://hooks.globex.test/arena")
    job = services.export_job_create(
        campaign=acme.campaign, requested_by=alice, api_key=None, kind="votes", format="jsonl", texts=False,
        filters=VoteFilters(),
    )  # fmt: skip
    tasks.export_job_run_task(str(job.pk), organization_id=job.organization_id)
    job.refresh_from_db()
    deliveries = list(WebhookDelivery.objects.all())
    assert [(d.endpoint_id, d.event) for d in deliveries] == [(ours.pk, "export.ready")]
    assert deliveries[0].payload["id"] == str(job.pk) and deliveries[0].payload["sha256"] == job.sha256


def test_a_failed_export_records_why_and_leaves_no_file(acme, alice, mixed, settings, tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    settings.ARENA_EXPORT_ROOT = blocker
    job = services.export_job_create(
        campaign=acme.campaign, requested_by=alice, api_key=None, kind="votes", format="jsonl", texts=False,
        filters=VoteFilters(),
    )  # fmt: skip
    tasks.export_job_run_task(str(job.pk), organization_id=job.organization_id)
    job.refresh_from_db()
    assert job.status == ExportJob.Status.FAILED and job.error and job.path == "" and job.sha256 == ""


def test_a_redelivered_export_task_does_nothing(acme, alice, mixed, export_root):
    job = services.export_job_create(
        campaign=acme.campaign, requested_by=alice, api_key=None, kind="votes", format="jsonl", texts=False,
        filters=VoteFilters(),
    )  # fmt: skip
    tasks.export_job_run_task(str(job.pk), organization_id=job.organization_id)
    job.refresh_from_db()
    finished = job.finished_at
    assert tasks.export_job_run_task(str(job.pk), organization_id=job.organization_id) == "done"
    job.refresh_from_db()
    assert job.finished_at == finished


def test_an_export_abandoned_by_a_killed_worker_is_run_again(acme, alice, mixed, export_root, settings):
    job = services.export_job_create(
        campaign=acme.campaign, requested_by=alice, api_key=None, kind="votes", format="jsonl", texts=False,
        filters=VoteFilters(),
    )  # fmt: skip
    started = timezone.now() - timedelta(seconds=60)
    ExportJob.objects.filter(pk=job.pk).update(status=ExportJob.Status.RUNNING, started_at=started)
    assert tasks.export_job_run_task(str(job.pk), organization_id=job.organization_id) == "running"  # still alive
    settings.CELERY_TASK_TIME_LIMIT = 30
    assert tasks.export_job_run_task(str(job.pk), organization_id=job.organization_id) == "done"
    job.refresh_from_db()
    assert job.rows == len(mixed)


def test_preference_pairs_are_exported_as_jsonl_only(acme, alice):
    from core.errors import Invalid

    with pytest.raises(Invalid):
        services.export_job_create(
            campaign=acme.campaign, requested_by=alice, api_key=None, kind="preference_pairs", format="csv",
            texts=False, filters=VoteFilters(),
        )  # fmt: skip


def test_old_export_files_are_purged(acme, alice, mixed, export_root, settings):
    job = services.export_job_create(
        campaign=acme.campaign, requested_by=alice, api_key=None, kind="votes", format="jsonl", texts=False,
        filters=VoteFilters(),
    )  # fmt: skip
    tasks.export_job_run_task(str(job.pk), organization_id=job.organization_id)
    job.refresh_from_db()
    path = Path(export_root) / job.path
    assert path.exists()
    assert services.export_jobs_purge(now=timezone.now()) == 0
    later = timezone.now() + timedelta(days=settings.ARENA_EXPORT_RETENTION_DAYS + 1)
    assert services.export_jobs_purge(now=later) == 1
    job.refresh_from_db()
    assert job.status == ExportJob.Status.EXPIRED and not path.exists()


# --- Over HTTP ------------------------------------------------------------------------------------

from django.http import FileResponse, StreamingHttpResponse  # noqa: E402

from tests.conftest import api_client  # noqa: E402


def _key_client(tenant, scope="read"):  # type: ignore[no-untyped-def]
    return api_client(tenant.organization, scope=scope, name=f"warehouse-{scope}")


def test_streamed_export_filters_and_texts_over_http(acme, mixed, alice_client):
    url = reverse("api:votes", args=[acme.campaign.pk, "jsonl"])
    response = alice_client.get(url, {"since": mixed[1].created_at.isoformat(), "texts": "1"})
    assert response.status_code == 200 and isinstance(response, StreamingHttpResponse)
    assert response["Content-Type"] == "application/x-ndjson"
    events = [json.loads(line) for line in _body(response).splitlines()]
    assert [e["vote_id"] for e in events] == [v.pk for v in mixed[1:]]
    assert [len(e["conversation"]) for e in events] == [3, 4, 1]
    plain = [json.loads(line) for line in _body(alice_client.get(url, {"category": "coding"})).splitlines()]
    assert [e["vote_id"] for e in plain] == [mixed[3].pk] and "conversation" not in plain[0]
    rows = list(
        csv.DictReader(
            io.StringIO(
                _body(alice_client.get(reverse("api:votes", args=[acme.campaign.pk, "csv"]), {"texts": "true"}))
            )
        )
    )
    assert len(rows) == 4 and rows[0]["left_text"].startswith("'=")  # the formula is defused
    # A client that asks for the stream's media type gets it (not 406).
    assert alice_client.get(url, HTTP_ACCEPT="application/x-ndjson").status_code == 200


@pytest.mark.parametrize(
    "query",
    [
        {"since": "yesterday"},
        {"since": "2026-11-02T00:00:00Z", "until": "2026-11-01T00:00:00Z"},
        {"competitor": "x"},
        {"until": "0001-01-01T00:00:00+05:00"},  # no UTC equivalent
    ],
)
def test_bad_filters_are_400(acme, alice_client, query):
    response = alice_client.get(reverse("api:votes", args=[acme.campaign.pk, "jsonl"]), query)
    assert response.status_code == 400


def test_times_with_any_offset_are_taken_as_utc(acme, mixed, alice_client):
    # PostgreSQL itself refuses offsets past 15:59; the API converts to UTC first.
    since = (mixed[1].created_at + timedelta(hours=23, minutes=59)).strftime("%Y-%m-%dT%H:%M:%S.%f") + "+23:59"
    response = alice_client.get(reverse("api:votes", args=[acme.campaign.pk, "jsonl"]), {"since": since})
    assert response.status_code == 200
    assert [json.loads(line)["vote_id"] for line in _body(response).splitlines()] == [v.pk for v in mixed[1:]]


def test_outsiders_and_raters_get_404_everywhere(acme, globex, mixed, alice, charlie_client, bob_client, export_root):
    job = services.export_job_create(
        campaign=acme.campaign, requested_by=alice, api_key=None, kind="votes", format="jsonl", texts=False,
        filters=VoteFilters(),
    )  # fmt: skip
    tasks.export_job_run_task(str(job.pk), organization_id=job.organization_id)
    pk = acme.campaign.pk
    urls = [
        reverse("api:votes", args=[pk, "jsonl"]),
        reverse("api:exports", args=[pk]),
        reverse("api:export", args=[pk, job.pk]),
        reverse("api:export-download", args=[pk, job.pk]),
    ]
    outsider_key = _key_client(globex)
    for client in (charlie_client, bob_client, outsider_key):
        for url in urls:
            assert client.get(url).status_code == 404, url
        assert client.post(urls[1], {"format": "jsonl"}, content_type="application/json").status_code == 404
    # Another campaign's id in the path does not reach this job either.
    assert charlie_client.get(reverse("api:export", args=[globex.campaign.pk, job.pk])).status_code == 404


def test_a_read_key_may_export_and_ask_for_an_export(acme, mixed, export_root):
    client = _key_client(acme, "read")
    assert client.get(reverse("api:votes", args=[acme.campaign.pk, "jsonl"])).status_code == 200
    response = client.post(
        reverse("api:exports", args=[acme.campaign.pk]),
        {"kind": "votes", "format": "csv", "filters": {"category": "coding"}},
        content_type="application/json",
    )
    assert response.status_code == 202, response.content
    job = ExportJob.objects.get(pk=response.json()["id"])
    assert job.requested_by is None and job.requested_by_key is not None
    assert job.params["filters"]["category"] == "coding"


def test_async_export_over_http_from_request_to_download(acme, mixed, alice_client, export_root):
    import hashlib

    response = alice_client.post(
        reverse("api:exports", args=[acme.campaign.pk]),
        {"kind": "votes", "format": "jsonl", "texts": True, "filters": {"until": mixed[2].created_at.isoformat()}},
        content_type="application/json",
    )
    assert response.status_code == 202
    job_out = response.json()
    assert job_out["status"] == "queued" and job_out["download_url"] is None and job_out["created_at"]
    download = reverse("api:export-download", args=[acme.campaign.pk, job_out["id"]])
    assert alice_client.get(download).status_code == 409  # not done yet
    tasks.export_job_run_task(job_out["id"], organization_id=acme.organization.pk)
    detail = alice_client.get(reverse("api:export", args=[acme.campaign.pk, job_out["id"]])).json()
    assert detail["status"] == "done" and detail["rows"] == 2 and detail["download_url"] == download
    listed = alice_client.get(reverse("api:exports", args=[acme.campaign.pk])).json()
    assert [j["id"] for j in listed["results"]] == [job_out["id"]] and listed["next"] is None
    response = alice_client.get(download)
    assert response.status_code == 200 and isinstance(response, FileResponse)
    data = b"".join(response.streaming_content)  # type: ignore[arg-type]
    assert hashlib.sha256(data).hexdigest() == response["X-Checksum-Sha256"] == detail["sha256"]
    import base64

    assert response["Digest"] == "sha-256=" + base64.b64encode(hashlib.sha256(data).digest()).decode()
    assert len(data) == detail["bytes"]
    assert [json.loads(line)["vote_id"] for line in data.decode().splitlines()] == [v.pk for v in mixed[:2]]


def test_export_request_is_validated(acme, alice_client):
    url = reverse("api:exports", args=[acme.campaign.pk])
    for body in ({"format": "xml"}, {"kind": "everything"}, {"kind": "preference_pairs", "format": "csv"}):
        assert alice_client.post(url, body, content_type="application/json").status_code == 400, body
    assert not ExportJob.objects.exists()


@pytest.mark.tenant_scoped
def test_beat_purges_old_exports_of_every_tenant_without_a_scope(acme, globex, export_root, settings):
    from raters.tenancy import scopes_disabled

    old = timezone.now() - timedelta(days=settings.ARENA_EXPORT_RETENTION_DAYS + 1)
    with scopes_disabled():
        for tenant in (acme, globex):
            path = Path(export_root) / str(tenant.organization.pk) / "old.jsonl"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("{}\n")
            ExportJob.objects.create(
                organization=tenant.organization,
                campaign=tenant.campaign,
                status=ExportJob.Status.DONE,
                path=str(path.relative_to(export_root)),
                finished_at=old,
            )
    assert tasks.export_jobs_purge_task() == 2
    with scopes_disabled():
        assert set(ExportJob.objects.values_list("status", flat=True)) == {ExportJob.Status.EXPIRED}
    assert not list(Path(export_root).rglob("*.jsonl"))
