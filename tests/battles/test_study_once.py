"""Crowd studies, once per person: a vendor id takes part in one study of a campaign (a second study of
the same campaign is refused, in the database too, and under a race); a participant may leave early,
which ends their part without a code and withdraws their open battle as a time-out does; the completed
page sends the browser on to the vendor's completion URL by itself, and no other page does."""

from __future__ import annotations

import threading
from datetime import timedelta
from html.parser import HTMLParser

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import IntegrityError, connection, transaction
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from battles import services, views
from battles.models import Battle, Participant, Study, Vote
from raters.models import Membership
from raters.tenancy import organization_scope
from tests.conftest import Tenant
from tests.factories import CampaignFactory, RaterPoolFactory

from .test_study import (
    CODE,
    OTHER_PID,
    PID,
    SESSION_ID,
    _open_battle,
    agree,
    crowd_pool,
    enter,
    entry,
    logged_in_user_id,
    make_study,
)

pytestmark = pytest.mark.django_db


def _counts() -> tuple[int, int, int]:
    return User.objects.count(), Participant.objects.count(), Membership.objects.count()


def _two_studies(tenant: Tenant) -> tuple[Study, Study]:
    first = make_study(tenant, name="Wave 1", consent_text="")
    second_pool = crowd_pool(tenant, name="Prolific wave 2")
    second = make_study(tenant, name="Wave 2", pool=second_pool, consent_text="", completion_code="SECOND9")
    return first, second


# --- One participation per campaign ---------------------------------------------------------------


def test_the_same_id_entering_a_second_study_of_the_campaign_is_refused_and_gets_no_account(acme: Tenant):
    first, second = _two_studies(acme)
    client, participant = enter(first)
    before = _counts()

    refused = Client()
    response = refused.get(entry(second))
    body = response.content.decode()
    assert response.status_code == 409
    assert "already taken part" in body and first.name not in body and PID not in body
    assert "SECOND9" not in body and CODE not in body  # neither study's code
    assert _counts() == before and logged_in_user_id(refused) is None
    # Also from the browser that is logged in as the first study's participant: refused, nothing new.
    response = client.get(entry(second))
    assert response.status_code == 409 and _counts() == before
    assert Participant.objects.filter(vendor_participant_id=PID).get().study == first
    assert not second.pool.members.exists()

    # The first study still resumes the same account, in any browser.
    again_client, again = enter(first, Client(), SESSION_ID="333333333333333333333333")
    assert again.pk == participant.pk and logged_in_user_id(again_client) == participant.user_id
    assert _counts() == before
    # Another id enters the second study as usual.
    _, other = enter(second, Client(), pid=OTHER_PID)
    assert other.study == second and other.campaign_id == acme.campaign.pk


def test_an_id_whose_part_ended_in_one_study_cannot_start_again_in_another(acme: Tenant):
    first, second = _two_studies(acme)
    _, participant = enter(first)
    Participant.objects.filter(pk=participant.pk).update(status=Participant.Status.COMPLETED)
    before = _counts()
    assert Client().get(entry(second)).status_code == 409
    assert _counts() == before


def test_studies_of_different_campaigns_or_vendors_are_separate_participations(acme: Tenant):
    first = make_study(acme, consent_text="")
    _, participant = enter(first)
    # The same string from another vendor is another person (each vendor has its own ids).
    generic = make_study(
        acme,
        name="Other vendor",
        vendor=Study.Vendor.GENERIC,
        pool=first.pool,
        completion_url="https://vendor.example/done?c={code}",
    )
    response = Client().get(reverse("battles:study_enter", args=[generic.slug]), {"worker_id": PID})
    assert response.status_code == 302
    # Another campaign's study: a separate participation (and a separate account, for that campaign only).
    other_campaign = CampaignFactory.create(organization=acme.organization, name="Acme other", slug="acme-other")
    pool = RaterPoolFactory.create(organization=acme.organization, name="Other wave", kind="crowd")
    other_campaign.rater_pools.add(pool)
    elsewhere = Study(
        organization=acme.organization,
        campaign=other_campaign,
        name="W",
        pool=pool,
        target_votes=1,
        completion_code="X1",
    )
    elsewhere.full_clean()
    elsewhere.save()
    _, there = enter(elsewhere, Client())
    assert Participant.objects.filter(vendor_participant_id=PID).count() == 3
    assert there.user_id != participant.user_id and there.campaign_id == other_campaign.pk


def test_the_database_holds_one_participation_per_campaign_vendor_and_id(acme: Tenant):
    first, second = _two_studies(acme)
    _, participant = enter(first)
    assert (participant.campaign_id, participant.vendor) == (acme.campaign.pk, Study.Vendor.PROLIFIC)
    with pytest.raises(IntegrityError), transaction.atomic():
        Participant.objects.create(
            organization=acme.organization, study=second, vendor_participant_id=PID, user=User.objects.create()
        )


def test_a_study_with_participants_cannot_move_to_another_campaign_or_vendor(acme: Tenant):
    study = make_study(acme)
    enter(study)
    other = CampaignFactory.create(organization=acme.organization, name="Acme moved", slug="acme-moved")
    other.rater_pools.add(study.pool)
    study.campaign = other
    with pytest.raises(ValidationError, match="has participants"):
        study.full_clean()
    study.refresh_from_db()
    study.vendor = Study.Vendor.GENERIC
    study.completion_url = "https://vendor.example/done?c={code}"
    with pytest.raises(ValidationError, match="has participants"):
        study.full_clean()


@pytest.mark.django_db(transaction=True)
def test_entries_racing_into_two_studies_of_one_campaign_end_with_one_account(acme: Tenant):
    if connection.vendor != "postgresql":
        pytest.fail("the race is settled by PostgreSQL's locks and constraints: run on PostgreSQL (scripts/test)")
    first, second = _two_studies(acme)
    studies = [first, second, first, second]
    barrier = threading.Barrier(len(studies))
    outcomes: list[tuple[int, object]] = []
    errors: list[BaseException] = []

    def go(study: Study) -> None:
        try:
            barrier.wait()
            with organization_scope(study.organization_id):
                participant, created = services.participant_enter(study=study, vendor_participant_id=PID)
                outcomes.append((study.pk, (participant.pk, created)))
        except services.ParticipantInAnotherStudy:
            outcomes.append((study.pk, "refused"))
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=go, args=(study,)) for study in studies]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert errors == [] and len(outcomes) == 4
    participant = Participant.objects.get()  # one participation, one account
    assert User.objects.filter(username__startswith="participant-").count() == 1
    winner = participant.study_id
    for study_id, outcome in outcomes:
        if study_id == winner:
            assert outcome in ((participant.pk, True), (participant.pk, False))
        else:
            assert outcome == "refused"  # the same answer the check gives when it comes second
    assert sorted(o == (participant.pk, True) for _, o in outcomes) == [False, False, False, True]


# --- Leaving early ----------------------------------------------------------------------------------


def test_leaving_ends_the_part_without_a_code_and_voids_the_open_battle_as_a_time_out_does(acme: Tenant):
    study = make_study(acme)
    client, participant = enter(study)
    agree(client, study)
    battle = _open_battle(acme, participant)
    page = client.get(reverse("battles:battle", args=[battle.pk])).content.decode()
    leave_url = reverse("battles:study_leave", args=[study.slug])
    assert f'action="{leave_url}"' in page and "csrfmiddlewaretoken" in page  # offered on the battle page
    assert f'action="{leave_url}"' in client.get(reverse("battles:study", args=[study.slug])).content.decode()

    response = client.post(leave_url)
    assert response.status_code == 302 and response["Location"] == reverse("battles:study", args=[study.slug])
    participant.refresh_from_db()
    battle.refresh_from_db()
    assert participant.status == Participant.Status.LEFT and participant.ended_at is not None
    assert participant.completed_at is None
    # The time-out's path: voided (its answers were read), kept with this rater, never handed on.
    assert (
        battle.status == Battle.Status.VOID and "left" in battle.void_reason and battle.rater_id == participant.user_id
    )
    page = client.get(response["Location"]).content.decode()
    assert "You left the study" in page and CODE not in page and 'http-equiv="refresh"' not in page
    assert f'action="{leave_url}"' not in page

    # No more battles, and the held one takes no vote.
    assert client.post(reverse("battles:next", args=[acme.campaign.pk]))["Location"] == response["Location"]
    assert client.post(reverse("battles:vote", args=[battle.pk]), {"choice": "left"}).status_code == 302
    assert not Vote.objects.exists() and Battle.objects.filter(rater=participant.user).count() == 1
    # Coming back through the link (any browser, a new session id): still left, nothing new, nobody logged in.
    before = _counts()
    again = Client()
    body = again.get(entry(study, SESSION_ID="444444444444444444444444")).content.decode()
    assert "You left the study" in body and CODE not in body and logged_in_user_id(again) is None
    assert _counts() == before
    # ... nor through a second study of the same campaign: no second run to farm.
    second = make_study(acme, name="Wave 2", pool=crowd_pool(acme, name="Prolific wave 2"), completion_code="SECOND9")
    assert Client().get(entry(second)).status_code == 409 and _counts() == before


def test_leave_is_a_post_with_csrf_for_the_participant_only(acme: Tenant, bob_client: Client):
    study = make_study(acme)
    client, participant = enter(study)
    leave_url = reverse("battles:study_leave", args=[study.slug])
    assert client.get(leave_url).status_code == 405
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(participant.user)
    assert strict.post(leave_url).status_code == 403
    assert bob_client.post(leave_url).status_code == 404  # not their study
    participant.refresh_from_db()
    assert participant.status == Participant.Status.ACTIVE


def test_leaving_after_the_time_ran_out_or_the_target_was_reached_keeps_that_outcome(acme: Tenant):
    study = make_study(acme, time_limit_min=5)
    client, participant = enter(study)
    Participant.objects.filter(pk=participant.pk).update(entered_at=timezone.now() - timedelta(minutes=6))
    client.post(reverse("battles:study_leave", args=[study.slug]))
    participant.refresh_from_db()
    assert participant.status == Participant.Status.TIMED_OUT


# --- The completed page redirects ------------------------------------------------------------------


class _Meta(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.refresh: list[str] = []
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "meta" and (found.get("http-equiv") or "").lower() == "refresh":
            self.refresh.append(found.get("content") or "")
        if tag == "a" and found.get("id") == "completion-link":
            self.links.append(found.get("href") or "")


def _parsed(body: str) -> _Meta:
    parser = _Meta()
    parser.feed(body)
    return parser


@pytest.mark.parametrize(
    ("vendor", "url"),
    [
        (Study.Vendor.PROLIFIC, ""),
        # A tenant's URL with characters that must be escaped in an attribute.
        (Study.Vendor.GENERIC, 'https://vendor.example/done?c={code}&n="><script>alert(1)</script>'),
    ],
)
def test_the_completed_page_redirects_to_exactly_the_completion_link_and_still_shows_it(
    acme: Tenant, vendor: str, url: str
):
    study = make_study(acme, vendor=vendor, completion_url=url)
    extra: dict[str, str] = {"worker_id": PID} if vendor == Study.Vendor.GENERIC else {}
    client, participant = enter(study, None, PID, **extra)
    link = study.completion_link()
    assert link

    unfinished = client.get(reverse("battles:study", args=[study.slug])).content.decode()
    assert _parsed(unfinished).refresh == [] and 'http-equiv="refresh"' not in unfinished

    Participant.objects.filter(pk=participant.pk).update(
        status=Participant.Status.COMPLETED, completed_at=timezone.now()
    )
    for page in (
        client.get(reverse("battles:study", args=[study.slug])),
        Client().get(entry(study, PID, **extra)),  # re-entry
    ):
        body = page.content.decode()
        parsed = _parsed(body)
        assert parsed.refresh == [f"{views.STUDY_COMPLETION_REDIRECT_S}; url={link}"]
        assert parsed.links == [link] and CODE in body  # the code and the link stay on the page
        assert "<script>alert" not in body


def test_pages_of_other_states_do_not_redirect(acme: Tenant):
    study = make_study(acme)
    _, participant = enter(study)
    for status in (Participant.Status.TIMED_OUT, Participant.Status.DECLINED, Participant.Status.LEFT):
        Participant.objects.filter(pk=participant.pk).update(status=status, ended_at=timezone.now())
        body = Client().get(entry(study, SESSION_ID=SESSION_ID)).content.decode()
        assert _parsed(body).refresh == [], status
