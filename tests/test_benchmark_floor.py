"""The load benchmark's Django floor (benchmarks/floor_app.py) is what it claims to be: the platform's own
middleware in front of views that do the ceiling's work, so its share of the ceiling measures the framework
and not a shortcut. Signed out it sends to the sign-in page; a POST without the CSRF token is refused; signed
in, the three requests answer as the ceiling's do and a vote is one row."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import Client, override_settings

from benchmarks.ceiling_app import PAGE, TABLE

pytestmark = pytest.mark.django_db


@pytest.fixture
def floor_table() -> None:
    with connection.cursor() as cursor:
        cursor.execute(TABLE)


def _votes() -> list[tuple[int, str]]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT battle, choice FROM ceiling_vote ORDER BY id")
        return [(int(battle), str(choice)) for battle, choice in cursor.fetchall()]


@override_settings(ROOT_URLCONF="benchmarks.floor_app")
def test_the_floor_runs_the_platforms_middleware_and_the_ceilings_work(bob, floor_table) -> None:  # type: ignore[no-untyped-def]
    anonymous = Client()
    assert anonymous.get("/b/7/").status_code == 302
    assert "/accounts/login/" in anonymous.get("/b/7/")["Location"]
    assert not _votes()

    strict = Client(enforce_csrf_checks=True)
    strict.force_login(bob)
    assert strict.post("/c/1/next/").status_code == 403  # CSRF: no token
    assert strict.post("/b/7/vote/", {"choice": "left"}).status_code == 403
    assert not _votes()

    rater = Client()
    rater.force_login(bob)
    claimed = rater.post("/c/1/next/")
    assert claimed.status_code == 302 and claimed["Location"].startswith("/b/")
    battle = int(claimed["Location"].split("/")[2])
    page = rater.get(f"/b/{battle}/")
    assert page.status_code == 200 and page.content == PAGE and b'name="choice"' in page.content
    assert page["Content-Security-Policy"]  # the platform's headers: its middleware ran
    voted = rater.post(f"/b/{battle}/vote/", {"choice": "right"})
    assert voted.status_code == 302 and voted["Location"] == f"/b/{battle}/"
    assert _votes() == [(battle, "right")]
    # Everything else is the platform's own: the sign-in page the raters use.
    assert anonymous.get("/accounts/login/").status_code == 200
