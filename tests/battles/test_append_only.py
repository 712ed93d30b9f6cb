"""The vote log is append-only: refused by the ORM, and by the database itself."""

from __future__ import annotations

import pytest
from django.db import DatabaseError, connection, transaction
from django.urls import reverse

from battles.models import AppendOnlyError, Vote
from tests.conftest import start_battle

pytestmark = [pytest.mark.django_db, pytest.mark.triton, pytest.mark.usefixtures("triton_server")]


@pytest.fixture
def vote(acme, bob_client):  # type: ignore[no-untyped-def]
    battle, _ = start_battle(bob_client, acme.campaign)
    bob_client.post(reverse("battles:vote", args=[battle.pk]), {"choice": "left"})
    return Vote.objects.get(battle=battle)


def test_orm_refuses_update_and_delete(vote):
    vote.choice = "right"
    with pytest.raises(AppendOnlyError):
        vote.save()
    with pytest.raises(AppendOnlyError):
        vote.delete()
    with pytest.raises(AppendOnlyError):
        Vote.objects.filter(pk=vote.pk).update(choice="right")
    with pytest.raises(AppendOnlyError):
        Vote.objects.filter(pk=vote.pk).delete()
    assert Vote.objects.get(pk=vote.pk).choice == "left"


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE battles_vote SET choice = 'right' WHERE id = %s",
        "DELETE FROM battles_vote WHERE id = %s",
    ],
)
def test_database_trigger_refuses_raw_sql(vote, statement):
    with pytest.raises(DatabaseError, match="append-only"):
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(statement, [vote.pk])
    assert Vote.objects.get(pk=vote.pk).choice == "left"


def test_truncate_is_refused_on_postgresql(vote):
    if connection.vendor != "postgresql":
        pytest.fail("the test suite runs on PostgreSQL (DATABASE_URL); see scripts/test")
    with pytest.raises(DatabaseError, match="append-only"):
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # flush the test transaction's deferred FK checks
            cursor.execute("TRUNCATE battles_vote CASCADE")
    assert Vote.objects.filter(pk=vote.pk).exists()


def test_a_battle_with_a_vote_cannot_be_deleted(vote):
    from django.db.models import ProtectedError

    with pytest.raises(ProtectedError):
        vote.battle.delete()
