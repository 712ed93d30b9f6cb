"""Hypothesis over every form a person fills in: the vote form, sign-up, the crowd study's entry link
and consent, and every form of the console (the add form of every registered model, filled field by
field with drawn text). Whatever is drawn: never a server error; a vote is stored only for a valid
choice and only once; an account only for a well-formed, new e-mail with matching passwords; a study
participant only for an id of the vendor's pattern; nothing in the vote log from a console form.

Strings come from hypothesis' full text strategy (any Unicode, control characters, surrogates where the
encoder lets them through), mixed with markup and SQL-shaped payloads, and the forms' own good values, so
both the refusing and the accepting paths are reached."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib import admin
from django.contrib.auth.models import User
from django.http.multipartparser import MAX_TOTAL_HEADER_SIZE  # type: ignore[attr-defined]  # not in the stubs
from django.test import Client
from django.urls import reverse
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from battles.models import Battle, Choice, Participant, Study, Vote
from tests.conftest import Tenant, login, start_battle

pytestmark = [pytest.mark.django_db, pytest.mark.reliability]

PAYLOADS = [
    "<script>alert(1)</script>", "\"><img src=x onerror=alert(1)>", "'; DROP TABLE battles_vote; --",
    "\x00", "\u202e", "a" * 5000, "%00", "{{ 7*7 }}", "../../etc/passwd", " ",
]  # fmt: skip
# Text a form field may meet: anything, the attacks above, short ordinary words.
text = st.one_of(
    st.text(max_size=200),
    st.sampled_from(PAYLOADS),
    st.from_regex(r"[a-z]{1,12}", fullmatch=True),
).map(lambda s: s.replace("\x00", ""))  # the test client cannot put NUL in a form body as a browser would not
FUZZ = settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))


def _ok(response: Any) -> None:
    assert response.status_code < 500, (response.status_code, response.content[:500])


@pytest.mark.triton
def test_the_vote_form_takes_only_a_valid_choice_once(triton_server: Any, acme: Tenant, bob_client: Client) -> None:
    battle, _ = start_battle(bob_client, acme.campaign)
    url = reverse("battles:vote", args=[battle.pk])

    @FUZZ
    @given(choice=st.one_of(text, st.sampled_from(list(Choice.values))), extra=st.dictionaries(text, text, max_size=3))
    @example(choice="left", extra={"a" * 5000: "x"})  # a valid choice in a malformed request (found by hypothesis)
    def vote(choice: str, extra: dict[str, str]) -> None:
        before = Vote.objects.filter(battle=battle).count()
        response = bob_client.post(url, {**extra, "choice": choice})
        _ok(response)
        after = Vote.objects.filter(battle=battle).count()
        # A field name longer than a multipart part's headers may be (Django's MAX_TOTAL_HEADER_SIZE, 1 KiB:
        # the name travels in the part's Content-Disposition) makes the whole request malformed: refused
        # with a 400 before the view, nothing stored, whatever the choice. `text` draws names of at most
        # 800 bytes (200 characters) or the 5,000-byte payload, never one near the limit.
        malformed = any(len(name.encode("utf-8", "surrogatepass")) > MAX_TOTAL_HEADER_SIZE for name in extra)
        if malformed:
            assert response.status_code == 400 and after == before, (response.status_code, before, after)
        elif before == 0 and choice in Choice.values:
            assert response.status_code == 302 and after == 1
        else:
            assert after == before, (choice, before, after)

    vote()
    assert Vote.objects.filter(battle=battle).count() <= 1


def test_sign_up_creates_an_account_only_for_a_good_form(db: None, settings: Any) -> None:
    settings.RATELIMIT_ENABLE = False
    settings.ACCOUNT_RATE_LIMITS = False
    url = reverse("account_signup")
    emails = st.one_of(text, st.emails(), st.just("alice@acme.test"))
    passwords = st.one_of(text, st.just("a-Good-long-passphrase-42"))

    @FUZZ
    @given(email=emails, password1=passwords, password2=passwords)
    def sign_up(email: str, password1: str, password2: str) -> None:
        existed = User.objects.filter(email__iexact=email.strip()).exists()
        count = User.objects.count()
        response = Client().post(url, {"email": email, "password1": password1, "password2": password2})
        _ok(response)
        created = User.objects.count() - count
        assert created in (0, 1)
        if created:
            assert not existed and password1 == password2 and "@" in email, (email, password1, password2)

    User.objects.create_user(username="alice", email="alice@acme.test", password="x")
    sign_up()


def test_the_study_entry_link_and_consent_take_only_the_vendors_ids(db: None, acme: Tenant, settings: Any) -> None:
    settings.RATELIMIT_ENABLE = False
    study = Study.objects.create(
        organization=acme.organization, campaign=acme.campaign, name="Acme wave", pool=acme.pool, completion_code="C1"
    )
    url = reverse("battles:study_enter", args=[study.slug])
    prolific_id = st.one_of(text, st.from_regex(r"[0-9a-f]{24}", fullmatch=True))

    @FUZZ
    @given(pid=prolific_id, study_id=text, session_id=text, agree=text)
    def enter(pid: str, study_id: str, session_id: str, agree: str) -> None:
        client = Client()
        count = Participant.objects.count()
        response = client.get(url, {"PROLIFIC_PID": pid, "STUDY_ID": study_id, "SESSION_ID": session_id})
        _ok(response)
        if Participant.objects.count() > count:
            assert re.fullmatch(r"[0-9a-f]{24}", pid.strip().lower()), pid
        if response.status_code == 302:
            _ok(client.post(reverse("battles:study_consent", args=[study.slug]), {"agree": agree}))

    enter()


def _fields(html: str) -> list[str]:
    names = re.findall(r'<(?:input|select|textarea)[^>]*\bname="([^"]+)"', html)
    return [n for n in dict.fromkeys(names) if n not in ("csrfmiddlewaretoken", "_save", "_continue", "_addanother")]


def test_every_console_form_refuses_or_stores_cleanly(db: None, acme: Tenant, alice: User) -> None:
    """alice, Acme's owner, fills in the add form of every model the console registers with drawn text:
    never a server error, never a vote or battle written by a console form."""
    client = login(alice)
    forms = []
    for model in admin.site._registry:
        info = (model._meta.app_label, model._meta.model_name)
        url = reverse(f"admin:{info[0]}_{info[1]}_add")
        page = client.get(url)
        _ok(page)
        if page.status_code == 200:
            forms.append((url, _fields(page.content.decode())))
    assert len(forms) >= 5, forms
    votes, battles = Vote.objects.count(), Battle.objects.count()

    @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
    @given(data=st.data())
    def fill(data: st.DataObject) -> None:
        url, names = data.draw(st.sampled_from(forms))
        values = {name: data.draw(text, label=name) for name in names}
        _ok(client.post(url, values))

    fill()
    assert (Vote.objects.count(), Battle.objects.count()) == (votes, battles)
