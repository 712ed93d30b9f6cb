"""The facts a request reads from the shared cache instead of the database (core.cached): the session
(raters.sessions), the session's user, their organisations (the tenant scope), whether they are a study
participant, and which events an organisation's webhooks want. Each must take effect on the very next
request when its rows change, and must never be answered from the in-process stand-in while Redis is away."""

from __future__ import annotations

import time
import uuid
from datetime import timedelta

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.contrib.sessions.models import Session
from django.core.cache import caches
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from arena.cache import FailoverRedisCache
from battles.models import Participant, Study
from battles.selectors import participant_of_user
from core.cached import EPOCH_KEY, cached_fact, cached_fact_drop
from raters.models import Role, WebhookEndpoint, WebhookEvent
from raters.services import membership_remove, membership_set
from raters.services.webhooks import webhook_events_subscribed
from tests.conftest import Tenant, login

pytestmark = pytest.mark.django_db


def test_membership_role_password_deactivation_logout_and_expiry_take_effect_on_the_next_request(
    acme: Tenant, alice: User, bob: User, bob_client: Client, monkeypatch: pytest.MonkeyPatch
):
    campaign_page = reverse("battles:campaign", args=[acme.campaign.pk])
    assert bob_client.get(campaign_page).status_code == 200  # the user and the scope are now in the cache
    assert bob_client.get(campaign_page).status_code == 200
    # Removed from the organisation: its campaign is gone for him at once (404, as for an outsider).
    membership_remove(organization=acme.organization, user=bob, actor=alice)
    assert bob_client.get(campaign_page).status_code == 404
    membership_set(organization=acme.organization, user=bob, role=Role.RATER, actor=alice)
    acme.pool.members.add(bob)
    assert bob_client.get(campaign_page).status_code == 200

    # A role change: the console is a manager's; a manager made a rater loses it on the next request.
    membership_set(organization=acme.organization, user=bob, role=Role.MANAGER, actor=alice)
    assert bob_client.get("/admin/").status_code == 200
    membership_set(organization=acme.organization, user=bob, role=Role.RATER, actor=alice)
    assert bob_client.get("/admin/").status_code == 302  # to the login page's redirect: no console

    # The password changed elsewhere: this session's hash no longer matches the user as saved.
    other = login(bob)
    assert other.get(campaign_page).status_code == 200
    bob.set_password("a new password, set on another device")
    bob.save()
    assert other.get(campaign_page).status_code == 302 and "/accounts/login/" in other.get(campaign_page)["Location"]

    # Deactivated: logged out at once.
    third = login(bob)
    assert third.get(campaign_page).status_code == 200
    bob.is_active = False
    bob.save()
    assert third.get(campaign_page).status_code == 302

    # Logged out: the old session cookie is worth nothing, in any client.
    bob.is_active = True
    bob.save()
    fourth = login(bob)
    assert fourth.get(campaign_page).status_code == 200
    cookie = fourth.cookies["sessionid"].value
    assert fourth.post("/accounts/logout/").status_code == 302
    replay = Client()
    replay.cookies["sessionid"] = cookie
    assert replay.get(campaign_page).status_code == 302
    assert not Session.objects.filter(session_key=cookie).exists()

    # An expired session is not served from the cache: its expiry is checked on every read.
    fifth = login(bob)
    assert fifth.get(campaign_page).status_code == 200  # its row is now in the cache
    later = timezone.now() + timedelta(seconds=settings.SESSION_COOKIE_AGE + 60)
    monkeypatch.setattr(timezone, "now", lambda: later)
    assert fifth.get(campaign_page).status_code == 302


def test_a_participation_and_a_webhook_made_after_the_cached_answer_count_at_once(acme: Tenant, bob: User):
    assert participant_of_user(bob) is None  # cached: not a participant
    study = Study.objects.create(
        organization=acme.organization, campaign=acme.campaign, pool=acme.pool, name="wave", completion_code="C0DE"
    )
    participant = Participant.objects.create(
        organization=acme.organization, study=study, user=bob, vendor_participant_id="p1"
    )
    assert participant_of_user(bob) == participant
    participant.delete()
    assert participant_of_user(bob) is None

    organization = acme.organization.pk
    assert WebhookEvent.BATTLE_RATED not in webhook_events_subscribed(organization)
    endpoint = WebhookEndpoint.objects.create(
        organization=acme.organization, url="https://hooks.example.com/arena", events=[WebhookEvent.BATTLE_RATED]
    )
    assert WebhookEvent.BATTLE_RATED in webhook_events_subscribed(organization)
    endpoint.active = False
    endpoint.save()
    assert WebhookEvent.BATTLE_RATED not in webhook_events_subscribed(organization)


def test_a_reader_that_raced_a_change_stores_nothing_anyone_uses_and_redis_away_means_the_database():
    redis = caches["default"]
    assert isinstance(redis, FailoverRedisCache), "the tests run with REDIS_URL (the cache is Redis)"
    key = f"arena:fact:test:{uuid.uuid4().hex}"
    rows = {"value": 1}
    loads: list[int] = []

    def load() -> int:
        loads.append(rows["value"])
        return rows["value"]

    assert cached_fact(key, load) == 1 and cached_fact(key, load) == 1 and loads == [1]  # read once, then kept

    # A change commits while a reader is between its read of the database and its store.
    def racing_load() -> int:
        value = load()
        rows["value"] = 2
        cached_fact_drop(key)
        return value

    cached_fact_drop(key)
    assert cached_fact(key, racing_load) == 1  # it read the rows as they were
    assert cached_fact(key, load) == 2  # ...and what it stored is not used
    assert loads == [1, 1, 2]

    # Redis away: every read goes to the database (the local stand-in is never asked), and a change made
    # meanwhile (its drop reaches only the stand-in) is seen once Redis is back: a new epoch.
    down_until = redis._down_until
    redis._down, redis._down_until = True, time.monotonic() + 60
    try:
        assert cached_fact(key, load) == 2 and cached_fact(key, load) == 2 and loads == [1, 1, 2, 2, 2]
        rows["value"] = 3
        cached_fact_drop(key)
    finally:
        redis._down_until = down_until
    assert cached_fact(key, load) == 3 and not redis.degraded
    assert cached_fact(key, load) == 3 and loads == [1, 1, 2, 2, 2, 3]


class _CountedCache:
    """The shared cache as core.cached sees it, with the keys of each ``get_many`` (one round trip) recorded."""

    def __init__(self, cache: object) -> None:
        self.cache = cache
        self.reads: list[list[str]] = []

    def get_many(self, keys: list[str]) -> dict[str, object]:
        self.reads.append(list(keys))
        return self.cache.get_many(keys)  # type: ignore[attr-defined,no-any-return]

    def __getattr__(self, name: str) -> object:
        return getattr(self.cache, name)


def test_a_request_reads_each_fact_once_and_the_users_facts_in_the_round_trip_of_the_user(
    acme: Tenant, bob_client: Client, bob: User, monkeypatch: pytest.MonkeyPatch
):
    import core.cached
    from battles.selectors import participant_key
    from raters.principals import user_key
    from raters.sessions import session_key_fact
    from raters.tenancy import organizations_key

    campaign_page = reverse("battles:campaign", args=[acme.campaign.pk])
    assert bob_client.get(campaign_page).status_code == 200  # every fact of the page is now in the cache
    counted = _CountedCache(core.cached.cache)  # type: ignore[attr-defined]
    monkeypatch.setattr(core.cached, "cache", counted)
    assert bob_client.get(campaign_page).status_code == 200
    # The page asks for the session, the user, the organisations (the tenant scope) and the participation
    # (the study gate, twice): one round trip, the session's with the user's facts along (this process has read
    # the session before, so it knows whose it is).
    session = session_key_fact(bob_client.cookies[settings.SESSION_COOKIE_NAME].value)
    facts = [[key for key in read if key != EPOCH_KEY and not key.endswith(":v")] for read in counted.reads]
    facts = [read for read in facts if read]
    assert facts == [[session, user_key(bob.pk), organizations_key(bob.pk), participant_key(bob.pk)]], facts

    # A fact kept for one request is not kept for the next: a participation made between them counts.
    study = Study.objects.create(
        organization=acme.organization, campaign=acme.campaign, pool=acme.pool, name="wave", completion_code="C0DE"
    )
    Participant.objects.create(organization=acme.organization, study=study, user=bob, vendor_participant_id="p1")
    counted.reads.clear()
    bob_client.get(campaign_page)
    reads = [key for read in counted.reads for key in read if key == participant_key(bob.pk)]
    assert len(reads) == 2  # fetched along with the user (stale: not kept), then read on its own and loaded


def test_a_sessions_user_is_only_guessed_for_the_round_trip_never_taken_from_the_guess(
    acme: Tenant, bob_client: Client, bob: User, alice: User, monkeypatch: pytest.MonkeyPatch
):
    """The process's guess of whose a session is (raters.sessions) only decides which facts ride along with the
    session's read: a wrong guess (another user's) fetches that user's facts for nothing, and the request is still
    the session's own user, read in a round trip of its own; the next request of the session guesses right."""
    import core.cached
    import raters.sessions
    from raters.principals import user_key

    campaign_page = reverse("battles:campaign", args=[acme.campaign.pk])
    assert bob_client.get(campaign_page).status_code == 200
    session_key = bob_client.cookies[settings.SESSION_COOKIE_NAME].value
    assert raters.sessions._user_hints[session_key] == str(bob.pk)
    monkeypatch.setitem(raters.sessions._user_hints, session_key, str(alice.pk))  # a wrong guess
    counted = _CountedCache(core.cached.cache)  # type: ignore[attr-defined]
    monkeypatch.setattr(core.cached, "cache", counted)
    response = bob_client.get(campaign_page)
    assert response.status_code == 200 and response.wsgi_request.user == bob
    facts = [[key for key in read if key != EPOCH_KEY and not key.endswith(":v")] for read in counted.reads]
    assert user_key(alice.pk) in facts[0] and [user_key(bob.pk)] == [k for k in facts[1] if k == user_key(bob.pk)]
    assert raters.sessions._user_hints[session_key] == str(bob.pk)  # learnt again
    counted.reads.clear()
    bob_client.get(campaign_page)
    assert len([read for read in counted.reads if any(k.startswith("arena:fact:") for k in read)]) == 1


def test_a_fact_kept_for_the_request_is_a_snapshot_its_own_drops_refresh_and_a_stale_companion_is_not_kept():
    from core.cached import _drop, cached_facts_kept

    key, other = (f"arena:fact:test:{uuid.uuid4().hex}" for _ in range(2))
    rows = {key: 1, other: 10}
    loads: list[str] = []

    def load(name: str):  # type: ignore[no-untyped-def]
        def read() -> int:
            loads.append(name)
            return rows[name]

        return read

    with cached_facts_kept():
        assert cached_fact(key, load(key)) == 1
        rows[key] = 2  # changed by another process, which drops the shared entry: outside this request
        _drop((key,))
        assert cached_fact(key, load(key)) == 1  # this request keeps what it first read
        cached_fact_drop(key)  # this request's own change
        assert cached_fact(key, load(key)) == 2  # read anew at once
    assert loads == [key, key]
    with cached_facts_kept():
        assert cached_fact(key, load(key)) == 2 and loads == [key, key]  # the shared entry, no load

    assert cached_fact(other, load(other)) == 10  # stored outside any request
    rows[other] = 11
    cached_fact_drop(other)
    with cached_facts_kept():
        assert cached_fact(key, load(key), along=[other]) == 2
        assert cached_fact(other, load(other)) == 11  # the stale companion was not kept: loaded
    assert loads == [key, key, other, other]
    with cached_facts_kept():
        assert cached_fact(key, load(key), along=[other]) == 2
        rows[other] = 12
        _drop((other,))  # changed by another process after this request fetched it
        assert cached_fact(other, load(other)) == 11  # a current companion is kept: answered from the memo
    assert loads == [key, key, other, other]
    assert cached_fact(other, load(other)) == 12  # ...for that request only
