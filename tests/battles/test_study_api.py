"""Crowd studies in the REST API: a campaign's studies listed, created (the console's rules), read with
their progress, closed; each participant's progress (votes toward the target, completion, voided
battles). Managers and the organisation's keys only (a read key reads); another organisation, a rater,
anyone else: 404 and nothing changed."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from battles import services
from battles.models import Battle, Participant, Prompt, Study
from raters.models import AuditAction, AuditEvent, RaterPool
from tests.conftest import Tenant, api_client
from tests.factories import RaterPoolFactory
from tests.ranking.synth import votes_write

from .test_study import CODE, OTHER_PID, PID, entry, make_study

pytestmark = pytest.mark.django_db


def studies_url(tenant: Tenant) -> str:
    return reverse("api:studies", args=[tenant.campaign.pk])


def crowd_pool(tenant: Tenant) -> RaterPool:
    pool = RaterPoolFactory.create(organization=tenant.organization, name="Wave pool", kind=RaterPool.Kind.CROWD)
    tenant.campaign.rater_pools.add(pool)
    return pool


def body(into: RaterPool, **overrides: Any) -> dict[str, Any]:
    return {"name": "Prolific wave 1", "pool": into.pk, "target_votes": 3, "completion_code": CODE, **overrides}


def test_a_write_key_creates_lists_reads_and_closes_a_study_with_audit_rows(acme: Tenant):
    pool = crowd_pool(acme)
    writer = api_client(acme.organization, scope="write")
    created = writer.post(studies_url(acme), body(pool, instructions="Pick **one**."), content_type="application/json")
    assert created.status_code == 201, created.content
    study = created.json()
    assert study["vendor"] == "prolific" and study["pool"] == pool.pk and study["active"] is True
    assert study["completion_link"] == f"https://app.prolific.com/submissions/complete?cc={CODE}"
    assert study["entry_path"].startswith("/s/") and study["progress"]["participants"] == 0
    assert study["entry_url"] == "http://testserver" + study["entry_path"]  # absolute: nothing to prepend
    event = AuditEvent.objects.get(action=AuditAction.STUDY_CREATED)
    assert event.actor is None and event.data["api_key"] == writer.api_key.prefix
    listed = writer.get(studies_url(acme)).json()
    assert [s["id"] for s in listed["results"]] == [study["id"]] and listed["next"] is None
    assert listed["results"][0]["entry_url"] == study["entry_url"]
    detail_url = reverse("api:study", args=[acme.campaign.pk, study["id"]])
    assert writer.get(detail_url).json()["name"] == "Prolific wave 1"
    # Closed: the link answers "not found"; closing again is a conflict.
    closed = writer.post(reverse("api:study-close", args=[acme.campaign.pk, study["id"]]))
    assert closed.status_code == 200 and closed.json()["active"] is False
    assert AuditEvent.objects.filter(action=AuditAction.STUDY_CLOSED, object_id=str(study["id"])).count() == 1
    assert Client().get(study["entry_path"] + f"?PROLIFIC_PID={PID}").status_code == 404
    again = writer.post(reverse("api:study-close", args=[acme.campaign.pk, study["id"]]))
    assert again.status_code == 409 and again.json()["error"]["code"] == "conflict"


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"target_votes": 10_000}, "target_votes"),  # over the campaign's session cap
        ({"vendor": "generic"}, "completion_url"),  # another vendor needs its completion URL
        ({"vendor": "generic", "completion_url": "http://vendor.example/{code}"}, "completion_url"),
        ({"completion_url": "https://x.example/{code}"}, "completion_url"),  # Prolific's is fixed
        ({"completion_code": "no spaces"}, "completion_code"),
        ({"pool": 10**9}, "pool"),
        ({"name": 42}, "name"),
    ],
)
def test_a_study_breaking_the_consoles_rules_is_a_400_naming_the_field(
    acme: Tenant, overrides: dict[str, Any], field: str
):
    writer = api_client(acme.organization, scope="write")
    response = writer.post(studies_url(acme), body(crowd_pool(acme), **overrides), content_type="application/json")
    assert response.status_code == 400, response.content
    assert field in response.json()["error"]["fields"]
    assert not Study.objects.exists() and not AuditEvent.objects.filter(action=AuditAction.STUDY_CREATED).exists()


def test_the_pool_must_be_one_of_the_campaigns(acme: Tenant, globex: Tenant):
    writer = api_client(acme.organization, scope="write")
    outside = RaterPoolFactory.create(organization=acme.organization, name="Not in the campaign")
    response = writer.post(studies_url(acme), body(outside), content_type="application/json")
    assert response.status_code == 400 and "pool" in response.json()["error"]["fields"]
    response = writer.post(studies_url(acme), body(globex.pool), content_type="application/json")
    assert response.status_code == 400 and "pool" in response.json()["error"]["fields"]
    assert not Study.objects.exists()


def test_participants_progress_counts_votes_completion_and_voided_battles(acme: Tenant):
    study = make_study(acme, consent_text="", target_votes=3)
    Client().get(entry(study))
    Client().get(entry(study, pid=OTHER_PID))
    first = Participant.objects.get(vendor_participant_id=PID)
    second = Participant.objects.get(vendor_participant_id=OTHER_PID)
    prompts = list(Prompt.objects.filter(campaign=acme.campaign))
    votes_write(
        campaign=acme.campaign, pool=study.pool, raters=[first.user], prompts=prompts,
        competitors=[acme.left, acme.right], strengths=(1.0, 1.0), n=3,
    )  # fmt: skip
    votes_write(
        campaign=acme.campaign, pool=study.pool, raters=[second.user], prompts=prompts,
        competitors=[acme.left, acme.right], strengths=(1.0, 1.0), n=1, seed=1,
    )  # fmt: skip
    services.participant_refresh(participant=first)  # reached the target: completed
    Battle.objects.create(
        organization=acme.organization, campaign=acme.campaign, rater=second.user, pool=study.pool,
        prompt=prompts[0], left=acme.left, right=acme.right, status=Battle.Status.VOID,
        void_reason=services.STUDY_TIMEOUT_REASON,
    )  # fmt: skip
    Participant.objects.filter(pk=second.pk).update(status=Participant.Status.TIMED_OUT, ended_at=timezone.now())

    reader = api_client(acme.organization)
    detail = reader.get(reverse("api:study", args=[acme.campaign.pk, study.pk])).json()
    assert detail["progress"] == {
        "participants": 2,
        "active": 0,
        "completed": 1,
        "declined": 0,
        "timed_out": 1,
        "left": 0,
        "votes": 4,
        "voided_battles": 1,
    }
    url = reverse("api:study-participants", args=[acme.campaign.pk, study.pk])
    rows = {r["vendor_participant_id"]: r for r in reader.get(url).json()["results"]}
    assert rows[PID]["votes"] == 3 and rows[PID]["target"] == 3 and rows[PID]["complete"] is True
    assert rows[PID]["status"] == "completed" and rows[PID]["voided"] == 0 and rows[PID]["completed_at"]
    assert rows[OTHER_PID]["votes"] == 1 and rows[OTHER_PID]["complete"] is False and rows[OTHER_PID]["voided"] == 1
    assert rows[PID]["qualification"] is None  # the campaign asks for no qualification
    only = reader.get(url, {"status": "timed_out"}).json()["results"]
    assert [r["vendor_participant_id"] for r in only] == [OTHER_PID]
    assert reader.get(url, {"status": "nope"}).status_code == 400
    page = reader.get(url, {"limit": 1}).json()
    assert len(page["results"]) == 1 and page["next"]
    assert reader.get(url, {"limit": 0}).status_code == 400


def test_a_read_key_reads_but_cannot_create_or_close(acme: Tenant):
    study = make_study(acme)
    reader = api_client(acme.organization)
    assert reader.get(studies_url(acme)).status_code == 200
    response = reader.post(studies_url(acme), body(study.pool), content_type="application/json")
    assert response.status_code == 403 and response.json()["error"]["code"] == "permission_denied"
    assert reader.post(reverse("api:study-close", args=[acme.campaign.pk, study.pk])).status_code == 403
    study.refresh_from_db()
    assert study.active and Study.objects.count() == 1


def test_an_owner_in_a_session_may_and_a_rater_or_an_outsider_gets_404(
    acme: Tenant, globex: Tenant, alice: User, alice_client: Client, bob_client: Client, charlie_client: Client
):
    study = make_study(acme)
    pool = study.pool
    created = alice_client.post(studies_url(acme), body(pool, name="Wave 2"), content_type="application/json")
    assert created.status_code == 201
    assert AuditEvent.objects.get(action=AuditAction.STUDY_CREATED).actor == alice
    theirs = api_client(globex.organization, scope="write")
    urls = [
        studies_url(acme),
        reverse("api:study", args=[acme.campaign.pk, study.pk]),
        reverse("api:study-participants", args=[acme.campaign.pk, study.pk]),
    ]
    for client in (bob_client, charlie_client, theirs):
        for url in urls:
            response = client.get(url)
            assert response.status_code == 404 and acme.campaign.name not in response.content.decode(), url
        assert client.post(studies_url(acme), body(pool), content_type="application/json").status_code == 404
        assert client.post(reverse("api:study-close", args=[acme.campaign.pk, study.pk])).status_code == 404
    # Globex's key asking for Acme's study under its own campaign: 404 too.
    assert theirs.get(reverse("api:study", args=[globex.campaign.pk, study.pk])).status_code == 404
    study.refresh_from_db()
    assert study.active and Study.objects.count() == 2


def test_participants_carry_their_qualification_outcome(acme: Tenant):
    """passed / failed with the decided counts and pass mark, pending with the counts so far."""
    from tests.battles.test_gold import _configure, _gold, _shadow
    from tests.battles.test_qualification import _qualify

    _shadow(acme, 5)
    _gold(acme, 8)
    _configure(acme, qualification_battles=2, qualification_pass=1.0)
    study = make_study(acme, consent_text="", target_votes=5)
    ids = {"passed": PID, "failed": OTHER_PID, "pending": "bbbbbbbbbbbbbbbbbbbbbbbb"}
    for pid in ids.values():
        assert Client().get(entry(study, pid=pid)).status_code == 302
    user = {name: Participant.objects.get(vendor_participant_id=pid).user for name, pid in ids.items()}
    _qualify(acme, user["passed"], correct=2, wrong=0)
    _qualify(acme, user["failed"], correct=1, wrong=1)
    _qualify(acme, user["pending"], correct=1, wrong=0)

    url = reverse("api:study-participants", args=[acme.campaign.pk, study.pk])
    rows = {r["vendor_participant_id"]: r for r in api_client(acme.organization).get(url).json()["results"]}
    expected = {
        "passed": {"status": "passed", "answered": 2, "correct": 2, "required_battles": 2, "pass_mark": 1.0},
        "failed": {"status": "failed", "answered": 2, "correct": 1, "required_battles": 2, "pass_mark": 1.0},
        "pending": {"status": "pending", "answered": 1, "correct": 1, "required_battles": 2, "pass_mark": 1.0},
    }
    assert {name: rows[pid]["qualification"] for name, pid in ids.items()} == expected
    # A decided outcome keeps the pass mark it was decided under when the campaign's changes.
    _configure(acme, qualification_pass=0.5)
    rows = {r["vendor_participant_id"]: r for r in api_client(acme.organization).get(url).json()["results"]}
    assert rows[OTHER_PID]["qualification"]["pass_mark"] == 1.0
    assert rows["bbbbbbbbbbbbbbbbbbbbbbbb"]["qualification"]["pass_mark"] == 0.5
