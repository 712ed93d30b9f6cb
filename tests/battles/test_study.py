"""Crowd studies: a vendor's participants enter through a public link with their vendor ids, get an
account without a password, consent, rate the study's target and leave with the completion code.
Attacked here: a malformed id, a participant entering twice, one who completed coming back, a battle
asked for before consent, one left open when the time runs out, a participant wandering into another
campaign, another tenant's manager in the console, a completion URL that is not https."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from battles import services
from battles.models import Battle, Campaign, Participant, Study, Vote
from raters.models import AuditEvent, Membership, RaterPool, Role
from raters.tenancy import scopes_disabled
from tests.conftest import Tenant, generation_worker_run
from tests.factories import CampaignFactory, RaterPoolFactory
from tests.raters.admin_forms import form_errors

pytestmark = pytest.mark.django_db

PID = "5f1a2b3c4d5e6f7a8b9c0d1e"
OTHER_PID = "aaaaaaaaaaaaaaaaaaaaaaaa"
STUDY_ID = "0123456789abcdef01234567"
SESSION_ID = "fedcba9876543210fedcba98"
CODE = "C7X9QK2"


def crowd_pool(tenant: Tenant, name: str = "Prolific wave") -> RaterPool:
    pool = RaterPoolFactory.create(organization=tenant.organization, name=name, kind=RaterPool.Kind.CROWD)
    tenant.campaign.rater_pools.add(pool)
    return pool


def make_study(tenant: Tenant, **overrides: object) -> Study:
    fields: dict[str, object] = {
        "organization": tenant.organization,
        "campaign": tenant.campaign,
        "name": "Wave 1",
        "pool": overrides.pop("pool", None) or crowd_pool(tenant),
        "target_votes": 2,
        "completion_code": CODE,
        "instructions": "# Read carefully\n\nPick the **better** answer. <script>alert(1)</script>",
        "consent_text": "I agree that my votes are recorded.",
    }
    fields.update(overrides)
    study = Study(**fields)
    study.full_clean()
    study.save()
    return study


def entry(study: Study, pid: str = PID, **params: str) -> str:
    query = {"PROLIFIC_PID": pid, "STUDY_ID": STUDY_ID, "SESSION_ID": SESSION_ID, **params}
    return reverse("battles:study_enter", args=[study.slug]) + "?" + "&".join(f"{k}={v}" for k, v in query.items())


def enter(study: Study, client: Client | None = None, pid: str = PID, **params: str) -> tuple[Client, Participant]:
    client = client or Client()
    response = client.get(entry(study, pid, **params))
    assert response.status_code == 302, response.content.decode()[:500]
    assert response["Location"] == reverse("battles:study", args=[study.slug])
    with scopes_disabled():  # also from a test that runs without one
        return client, Participant.objects.get(study=study, vendor_participant_id=pid)


def agree(client: Client, study: Study) -> None:
    response = client.post(reverse("battles:study_consent", args=[study.slug]), {"agree": "yes"})
    assert response.status_code == 302


def logged_in_user_id(client: Client) -> int | None:
    value = client.session.get("_auth_user_id")
    return int(value) if value is not None else None


def test_prolific_entry_creates_a_passwordless_account_in_the_pool_and_logs_in(acme: Tenant):
    study = make_study(acme)
    users_before = User.objects.count()
    client, participant = enter(study)

    assert User.objects.count() == users_before + 1
    user = participant.user
    assert not user.has_usable_password()
    assert PID not in user.username and PID not in user.email  # the vendor id names nothing visible
    assert Membership.objects.get(user=user, organization=acme.organization).role == Role.RATER
    assert list(user.rater_pools.all()) == [study.pool]
    assert (participant.vendor_study_id, participant.external_session_id) == (STUDY_ID, SESSION_ID)
    assert participant.status == Participant.Status.ACTIVE and participant.consented_at is None
    assert logged_in_user_id(client) == user.pk
    actions = set(AuditEvent.objects.filter(organization=acme.organization).values_list("action", flat=True))
    assert {"membership.created", "pool.member_added"} <= actions

    page = client.get(reverse("battles:study", args=[study.slug]))
    body = page.content.decode()
    assert page.status_code == 200
    assert '<p class="md-h1">Read carefully</p>' in body  # the project's markdown renderer
    assert "<script>alert" not in body  # ... which escapes raw HTML
    assert "I agree" in body and PID not in body
    assert "0 of 2 votes" in body


@pytest.mark.parametrize(
    "params",
    [
        {"PROLIFIC_PID": ""},
        {"PROLIFIC_PID": "5f1a2b3c4d5e6f7a8b9c0d1"},  # 23 characters
        {"PROLIFIC_PID": "5f1a2b3c4d5e6f7a8b9c0d1e0"},  # 25
        {"PROLIFIC_PID": "zz1a2b3c4d5e6f7a8b9c0d1e"},  # not hex
        {"PROLIFIC_PID": "5f1a2b3c4d5e6f7a8b9c0d1e%27--"},
        {"PROLIFIC_PID": PID, "SESSION_ID": "<script>"},
        {"PROLIFIC_PID": PID, "STUDY_ID": "12"},
    ],
)
def test_a_malformed_prolific_id_is_refused_and_nothing_is_created(acme: Tenant, params: dict[str, str]):
    study = make_study(acme)
    before = (User.objects.count(), Participant.objects.count(), Membership.objects.count())
    client = Client()
    query = "&".join(f"{k}={v}" for k, v in params.items())
    response = client.get(reverse("battles:study_enter", args=[study.slug]) + "?" + query)
    assert response.status_code == 400
    assert "This link is incomplete" in response.content.decode()
    assert (User.objects.count(), Participant.objects.count(), Membership.objects.count()) == before
    assert logged_in_user_id(client) is None


@pytest.mark.parametrize("worker", ["", "a b", "<b>x</b>", "x" * 65, "é"])
def test_a_malformed_generic_worker_id_is_refused(acme: Tenant, worker: str):
    study = make_study(acme, vendor=Study.Vendor.GENERIC, completion_url="https://vendor.example/done?c={code}")
    response = Client().get(reverse("battles:study_enter", args=[study.slug]), {"worker_id": worker})
    assert response.status_code == 400
    assert Participant.objects.count() == 0


def test_entries_are_rate_limited_per_network_address(acme: Tenant, settings: object):
    from django.core.cache import cache

    cache.clear()
    settings.RATELIMIT_ENABLE = True  # type: ignore[attr-defined]
    settings.ARENA_STUDY_ENTRY_RATE = "3/h"  # type: ignore[attr-defined]  # an hour: no reset mid-test
    study = make_study(acme)
    pids = [f"{n:024x}" for n in range(1, 5)]
    codes = [Client().get(entry(study, pid)).status_code for pid in pids]
    assert codes == [302, 302, 302, 429]
    assert Participant.objects.count() == 3
    cache.clear()


def test_a_generic_vendor_entry_and_its_completion_url(acme: Tenant):
    study = make_study(acme, vendor=Study.Vendor.GENERIC, completion_url="https://vendor.example/done?c={code}")
    client = Client()
    response = client.get(
        reverse("battles:study_enter", args=[study.slug]), {"worker_id": "A1B2C3D4E5", "assignment_id": "3XYZ.9"}
    )
    assert response.status_code == 302
    participant = Participant.objects.get(study=study)
    assert (participant.vendor_participant_id, participant.external_session_id) == ("A1B2C3D4E5", "3XYZ.9")
    assert study.completion_link() == f"https://vendor.example/done?c={CODE}"


def test_the_same_participant_entering_twice_resumes_one_account_in_any_browser(acme: Tenant):
    study = make_study(acme)
    first, participant = enter(study)
    users = User.objects.count()
    # Prolific's "returned" participant coming back on another device, with a new session id.
    second, again = enter(study, Client(), SESSION_ID="111111111111111111111111")
    assert again.pk == participant.pk and User.objects.count() == users
    assert logged_in_user_id(second) == logged_in_user_id(first) == participant.user_id
    assert again.external_session_id == "111111111111111111111111"
    # Another id is another person.
    _, other = enter(study, Client(), pid=OTHER_PID)
    assert other.user_id != participant.user_id


def test_after_completion_a_re_entry_shows_the_code_and_creates_nothing(acme: Tenant):
    study = make_study(acme)
    _, participant = enter(study)
    Participant.objects.filter(pk=participant.pk).update(
        status=Participant.Status.COMPLETED, completed_at=timezone.now()
    )
    before = (User.objects.count(), Participant.objects.count(), Membership.objects.count())
    client = Client()
    response = client.get(entry(study))
    body = response.content.decode()
    assert response.status_code == 200
    assert "You have already completed this study" in body and CODE in body
    assert f'href="https://app.prolific.com/submissions/complete?cc={CODE}"' in body
    assert (User.objects.count(), Participant.objects.count(), Membership.objects.count()) == before
    assert logged_in_user_id(client) is None  # shown the code, not logged in again


@pytest.mark.parametrize("ended", [Participant.Status.TIMED_OUT, Participant.Status.DECLINED])
def test_a_participant_whose_part_ended_entering_again_is_refused(acme: Tenant, ended: str):
    """The same participant id cannot enter twice once their part is over (out of time, or declined):
    the link shows why, logs nobody in, creates nothing, and hands out no battle."""
    study = make_study(acme)
    first, participant = enter(study)
    Participant.objects.filter(pk=participant.pk).update(status=ended, ended_at=timezone.now())
    before = (User.objects.count(), Participant.objects.count(), Membership.objects.count(), Battle.objects.count())
    client = Client()
    response = client.get(entry(study, SESSION_ID="222222222222222222222222"))
    body = response.content.decode()
    assert response.status_code == 200
    assert ("Time is up" in body) if ended == Participant.Status.TIMED_OUT else ("did not agree" in body.lower())
    assert CODE not in body  # no completion code for an unfinished part
    assert logged_in_user_id(client) is None
    assert (User.objects.count(), Participant.objects.count(), Membership.objects.count(), Battle.objects.count()) == (
        before
    )
    # The first browser, still logged in, gets no battle either.
    response = first.post(reverse("battles:next", args=[acme.campaign.pk]))
    assert not Battle.objects.filter(rater=participant.user).exists()
    assert response.status_code in (200, 302) and "/b/" not in response.get("Location", "")


def test_no_battle_before_consent_and_declining_ends_on_a_page_that_goes_nowhere(acme: Tenant):
    study = make_study(acme)
    client, participant = enter(study)
    next_url = reverse("battles:next", args=[acme.campaign.pk])
    response = client.post(next_url)
    assert response.status_code == 302 and response["Location"] == reverse("battles:study", args=[study.slug])
    assert not Battle.objects.filter(rater=participant.user).exists()
    # The campaign page does not start battles either.
    assert client.get(reverse("battles:campaign", args=[acme.campaign.pk])).status_code == 302

    response = client.post(reverse("battles:study_consent", args=[study.slug]), {"agree": "no"})
    participant.refresh_from_db()
    assert participant.status == Participant.Status.DECLINED and participant.consented_at is None
    page = client.get(response["Location"]).content.decode()
    assert "You declined" in page
    study_card = page.split('id="study"', 1)[1].split("</div>", 1)[0]
    assert "<a " not in study_card and "<form" not in study_card and 'http-equiv="refresh"' not in page
    assert client.post(next_url).status_code == 302
    assert not Battle.objects.filter(rater=participant.user).exists()
    # Agreeing after declining changes nothing.
    agree(client, study)
    participant.refresh_from_db()
    assert participant.status == Participant.Status.DECLINED and participant.consented_at is None


def test_consent_is_recorded_with_its_time_and_then_battles_are_handed_out(acme: Tenant):
    study = make_study(acme)
    client, participant = enter(study)
    before = timezone.now()
    agree(client, study)
    participant.refresh_from_db()
    assert participant.consented_at is not None and participant.consented_at >= before
    response = client.post(reverse("battles:next", args=[acme.campaign.pk]))
    assert response.status_code == 302 and response["Location"].startswith("/b/")
    battle = Battle.objects.get(rater=participant.user)
    assert battle.pool_id == study.pool_id


def test_a_study_without_consent_text_goes_straight_to_the_battles(acme: Tenant):
    study = make_study(acme, consent_text="")
    client, participant = enter(study)
    page = client.get(reverse("battles:study", args=[study.slug])).content.decode()
    assert "I agree" not in page and 'id="start"' in page
    assert client.post(reverse("battles:next", args=[acme.campaign.pk]))["Location"].startswith("/b/")


def _open_battle(tenant: Tenant, participant: Participant) -> Battle:
    return Battle.objects.create(
        organization=tenant.organization,
        campaign=tenant.campaign,
        rater=participant.user,
        pool=participant.study.pool,
        prompt=tenant.campaign.prompts.order_by("id")[0],
        left=tenant.left,
        right=tenant.right,
        status=Battle.Status.READY,
        claimed_at=timezone.now(),
        shown_at=timezone.now(),
    )


def test_when_the_time_is_up_the_next_request_says_so_and_the_open_battle_is_voided(acme: Tenant):
    study = make_study(acme, time_limit_min=30)
    client, participant = enter(study)
    agree(client, study)
    battle = _open_battle(acme, participant)
    assert client.get(reverse("battles:battle", args=[battle.pk])).status_code == 200

    Participant.objects.filter(pk=participant.pk).update(entered_at=timezone.now() - timedelta(minutes=31))
    response = client.get(reverse("battles:battle", args=[battle.pk]))
    assert response.status_code == 302 and response["Location"] == reverse("battles:study", args=[study.slug])
    battle.refresh_from_db()
    participant.refresh_from_db()
    assert participant.status == Participant.Status.TIMED_OUT and participant.ended_at is not None
    # Its answers were read: voided with the reason, never handed to another rater.
    assert battle.status == Battle.Status.VOID and "time ran out" in battle.void_reason
    assert battle.rater_id == participant.user_id
    page = client.get(response["Location"]).content.decode()
    assert "Time is up" in page
    vote = client.post(reverse("battles:vote", args=[battle.pk]), {"choice": "left"})
    assert vote.status_code == 302 and not Vote.objects.exists()
    assert client.post(reverse("battles:next", args=[acme.campaign.pk]))["Location"] == response["Location"]
    assert Battle.objects.filter(rater=participant.user).count() == 1
    # Coming back through the vendor's link: still time up, nothing new.
    assert "Time is up" in Client().get(entry(study)).content.decode()


def test_the_beat_sweep_voids_the_open_battle_of_a_participant_who_left(acme: Tenant):
    study = make_study(acme, time_limit_min=10)
    client, participant = enter(study)
    agree(client, study)
    battle = _open_battle(acme, participant)
    _, staying = enter(study, Client(), pid=OTHER_PID)
    Participant.objects.filter(pk=participant.pk).update(entered_at=timezone.now() - timedelta(minutes=11))
    assert services.participants_time_out_due() == 1
    battle.refresh_from_db()
    assert battle.status == Battle.Status.VOID
    staying.refresh_from_db()
    assert staying.status == Participant.Status.ACTIVE


@pytest.mark.tenant_scoped
def test_beat_sweeps_participants_of_every_organisation_without_a_scope(settings: object, acme: Tenant, globex: Tenant):
    from battles.tasks import participants_time_out_task

    entry_ = settings.CELERY_BEAT_SCHEDULE["study-participants-time-out"]  # type: ignore[attr-defined]
    assert entry_["task"] == participants_time_out_task.name
    with scopes_disabled():
        studies = [make_study(tenant, time_limit_min=5) for tenant in (acme, globex)]
    for study in studies:
        enter(study)  # a request: it opens its own scope
    with scopes_disabled():
        Participant.objects.update(entered_at=timezone.now() - timedelta(minutes=6))
    assert participants_time_out_task() == 2  # no scope open here: the task opens one per organisation
    with scopes_disabled():
        assert set(Participant.objects.values_list("status", flat=True)) == {Participant.Status.TIMED_OUT}


def test_an_inactive_or_unknown_study_is_not_found(acme: Tenant):
    study = make_study(acme, active=False)
    response = Client().get(entry(study))
    assert response.status_code == 404 and Participant.objects.count() == 0
    response = Client().get(reverse("battles:study_enter", args=["no-such-study"]) + f"?PROLIFIC_PID={PID}")
    assert response.status_code == 404


def test_a_participant_of_one_campaign_cannot_rate_in_another(acme: Tenant):
    study = make_study(acme, consent_text="")
    client, participant = enter(study)
    other = CampaignFactory.create(organization=acme.organization, name="Acme code", slug="acme-code")
    other.rater_pools.add(acme.pool)
    assert not other.rater_pools.filter(members=participant.user).exists()
    assert client.post(reverse("battles:next", args=[other.pk])).status_code == 404
    # Even where the study's pool is named by another campaign too, the account is for its study only.
    shared = CampaignFactory.create(organization=acme.organization, name="Acme shared", slug="acme-shared")
    shared.rater_pools.add(study.pool)
    assert client.post(reverse("battles:next", args=[shared.pk])).status_code == 404
    assert client.get(reverse("battles:campaign", args=[shared.pk])).status_code == 404
    assert not Battle.objects.filter(rater=participant.user).exists()


def test_another_participant_or_user_cannot_open_someone_elses_study_page(acme: Tenant, bob_client: Client):
    study = make_study(acme)
    enter(study)
    assert bob_client.get(reverse("battles:study", args=[study.slug])).status_code == 404
    assert bob_client.post(reverse("battles:study_consent", args=[study.slug]), {"agree": "yes"}).status_code == 404
    assert Participant.objects.get().consented_at is None


def test_an_outsider_manager_cannot_see_the_study_in_the_console(acme: Tenant, globex: Tenant, charlie_client: Client):
    study = make_study(acme)
    enter(study)
    participant = Participant.objects.get()
    changelist = charlie_client.get(reverse("admin:battles_study_changelist"))
    assert changelist.status_code == 200 and study.name.encode() not in changelist.content
    for url in (
        reverse("admin:battles_study_change", args=[study.pk]),
        reverse("admin:battles_participant_change", args=[participant.pk]),
    ):
        response = charlie_client.get(url, follow=True)
        assert response.status_code in (200, 404)
        assert study.slug.encode() not in response.content and PID.encode() not in response.content
        assert response.redirect_chain == [] or response.redirect_chain[-1][0] == reverse("admin:index")
    listing = charlie_client.get(reverse("admin:battles_participant_changelist"))
    assert PID.encode() not in listing.content


def _study_post(tenant: Tenant, pool: RaterPool, **overrides: str) -> dict[str, object]:
    data: dict[str, object] = {
        "organization": tenant.organization.pk,
        "campaign": tenant.campaign.pk,
        "name": "Wave 2",
        "vendor": "generic",
        "pool": pool.pk,
        "target_votes": 5,
        "time_limit_min": 45,
        "completion_code": "DONE42",
        "completion_url": "https://vendor.example/finish?code={code}",
        "instructions": "",
        "consent_text": "",
        "active": "on",
    }
    data.update(overrides)
    return data


def test_a_manager_configures_a_study_in_the_console_with_an_audit_row(acme: Tenant, alice_client: Client):
    pool = crowd_pool(acme)
    response = alice_client.post(reverse("admin:battles_study_add"), _study_post(acme, pool))
    assert response.status_code == 302, form_errors(response)
    study = Study.objects.get(name="Wave 2")
    assert len(study.slug) >= 20 and study.organization == acme.organization
    assert AuditEvent.objects.filter(action="study.created", object_id=str(study.pk)).exists()
    page = alice_client.get(reverse("admin:battles_study_change", args=[study.pk])).content.decode()
    assert f"/s/{study.slug}/?worker_id=" in page
    assert "https://vendor.example/finish?code=DONE42" in page
    response = alice_client.post(
        reverse("admin:battles_study_change", args=[study.pk]), _study_post(acme, pool, target_votes="3")
    )
    assert response.status_code == 302, form_errors(response)
    assert AuditEvent.objects.filter(action="study.changed", object_id=str(study.pk)).exists()


@pytest.mark.parametrize(
    "url",
    [
        "http://vendor.example/finish?code={code}",
        "javascript:alert(1)//{code}",
        "https://vendor.example/finish",  # no placeholder
        "https://vendor.example/{code}/{other}",
        "//vendor.example/{code}",
    ],
)
def test_the_completion_url_must_be_https_with_the_code(acme: Tenant, alice_client: Client, url: str):
    pool = crowd_pool(acme)
    response = alice_client.post(reverse("admin:battles_study_add"), _study_post(acme, pool, completion_url=url))
    assert response.status_code == 200
    assert "completion URL" in form_errors(response) or "{code}" in form_errors(response)
    assert not Study.objects.exists()


def test_the_studys_pool_must_be_one_of_its_campaigns_and_of_its_organisation(acme: Tenant, globex: Tenant):
    outside = RaterPoolFactory.create(organization=acme.organization, name="Not in the campaign")
    with pytest.raises(ValidationError, match="campaign's rater pools"):
        make_study(acme, pool=outside)
    with pytest.raises(ValidationError, match="organisation"):
        make_study(acme, pool=globex.pool)
    with pytest.raises(ValidationError, match="session or rater cap"):
        make_study(acme, target_votes=acme.campaign.session_cap + 1)


@pytest.mark.triton
def test_progress_counts_and_the_target_ends_on_the_completion_page(acme: Tenant, triton_server: object):
    study = make_study(acme)
    client, participant = enter(study)
    agree(client, study)
    for number in (1, 2):
        response = client.post(reverse("battles:next", args=[acme.campaign.pk]))
        assert response.status_code == 302 and response["Location"].startswith("/b/")
        generation_worker_run()
        page = client.get(response["Location"]).content.decode()
        assert f"{number - 1} of 2 votes for this study" in page
        assert f"<title>Battle {number} of 2 · " in page  # the study's target, not the session cap
        battle_url = response["Location"]
        assert client.post(battle_url + "vote/", {"choice": "left"}).status_code == 302
        page = client.get(battle_url).content.decode()
        assert f"{number} of 2 votes for this study" in page
    assert 'id="study-finish"' in page and 'id="next-form"' not in page
    assert Vote.objects.filter(rater=participant.user).count() == 2
    # Asking for more goes to the study page, which completes the participant and shows the code.
    response = client.post(reverse("battles:next", args=[acme.campaign.pk]))
    assert response["Location"] == reverse("battles:study", args=[study.slug])
    page = client.get(response["Location"]).content.decode()
    assert CODE in page and "You have completed this study" in page
    assert f'href="https://app.prolific.com/submissions/complete?cc={CODE}"' in page
    participant.refresh_from_db()
    assert participant.status == Participant.Status.COMPLETED and participant.completed_at is not None
    assert Battle.objects.filter(rater=participant.user).count() == 2
    # The vote log names the account only.
    for vote in Vote.objects.filter(rater=participant.user):
        assert PID not in str(vote.as_event())
    assert Campaign.objects.get(pk=acme.campaign.pk).status == Campaign.Status.OPEN


@pytest.mark.django_db(transaction=True)
def test_two_entries_racing_with_one_id_end_with_one_account(acme: Tenant):
    import threading

    from django.db import connection

    from raters.tenancy import organization_scope

    if connection.vendor != "postgresql":
        pytest.fail("the race is settled by PostgreSQL's locks and constraints: run on PostgreSQL (scripts/test)")
    study = make_study(acme)
    barrier = threading.Barrier(3)
    results: list[tuple[Participant, bool]] = []
    errors: list[BaseException] = []

    def go() -> None:
        try:
            barrier.wait()
            with organization_scope(study.organization_id):
                results.append(services.participant_enter(study=study, vendor_participant_id=PID))
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=go) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert errors == []
    assert sorted(created for _, created in results) == [False, False, True]
    assert len({participant.pk for participant, _ in results}) == 1
    assert Participant.objects.count() == 1
    assert User.objects.filter(username__startswith="participant-").count() == 1
    assert study.pool.members.count() == 1
