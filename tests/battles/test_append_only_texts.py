"""What the docs call append-only besides the vote log is held so by the database (issue 21.9).

Known truth: each row below is written once by the test, and the statement that follows either must be
refused (a rewrite of history) or must pass (an edit the rules allow: a prompt nobody battled on, its
category, the actor of an audit row set to NULL when the user is deleted, a row deleted together with its
parent). The refusals are the database's own (battles 0027, raters 0018, ranking 0007): raw SQL, no ORM.
A DELETE is checked at commit (it may be part of deleting the parent), so a test asks for the check at once
with ``SET CONSTRAINTS ALL IMMEDIATE``. The last test connects as the application's role, which is what a
deployment runs as.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from django.contrib.auth.models import User
from django.db import DatabaseError, connection, transaction

from battles.models import Battle, Generation, Prompt, Turn
from ranking.models import LeaderboardSnapshot
from raters.models import AuditAction, AuditEvent
from raters.services.audit import audit_record
from tests.battles.test_identity_refuse import ready_battle
from tests.conftest import Tenant
from tests.db_roles import app_role_ready
from tests.factories import CampaignFactory, PromptFactory, UserFactory

pytestmark = pytest.mark.django_db


def _refused(statement: str, params: list[Any]) -> None:
    with pytest.raises(DatabaseError, match="append-only"):
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(statement, params)
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")


def _passes(statement: str, params: list[Any]) -> None:
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(statement, params)
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        cursor.execute("SET CONSTRAINTS ALL DEFERRED")


def _snapshot(tenant: Tenant, campaign_id: int | None = None) -> LeaderboardSnapshot:
    return LeaderboardSnapshot.objects.create(
        organization=tenant.organization,
        campaign_id=campaign_id or tenant.campaign.pk,
        view="raw",
        version=1,
        method={"estimator": "bt"},
        policy={},
        excluded={},
        rows=[{"competitor": "left", "score": 1.0}],
    )


def test_a_battled_prompt_keeps_its_text_and_an_unbattled_one_may_change(acme: Tenant, bob: User):
    battle = ready_battle(acme, bob, text="Tell me about rivers.")
    _refused("UPDATE battles_prompt SET text = 'rewritten' WHERE id = %s", [battle.prompt_id])
    _refused("UPDATE battles_prompt SET text_hash = repeat('0', 64) WHERE id = %s", [battle.prompt_id])
    _refused("DELETE FROM battles_prompt WHERE id = %s", [battle.prompt_id])
    _passes("UPDATE battles_prompt SET category = 'coding', active = false WHERE id = %s", [battle.prompt_id])
    fresh = PromptFactory.create(campaign=acme.campaign, text="Nobody has seen me.")
    _passes("UPDATE battles_prompt SET text = 'Edited before any battle.' WHERE id = %s", [fresh.pk])
    _passes("DELETE FROM battles_prompt WHERE id = %s", [fresh.pk])
    assert Prompt.objects.get(pk=battle.prompt_id).text == "Tell me about rivers."


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE battles_generation SET text = 'rewritten' WHERE battle_id = %s",
        "UPDATE battles_generation SET output_tokens = 99 WHERE battle_id = %s",
        "UPDATE battles_generation SET style = '{}'::jsonb WHERE battle_id = %s",
        "DELETE FROM battles_generation WHERE battle_id = %s",
        "UPDATE battles_turn SET text = 'rewritten' WHERE battle_id = %s",
        "DELETE FROM battles_turn WHERE battle_id = %s",
    ],
)
def test_answers_and_turns_are_never_rewritten_or_removed_alone(acme: Tenant, bob: User, statement: str):
    battle = ready_battle(acme, bob)
    Turn.objects.create(battle=battle, index=1, text="And lakes?", text_hash="1" * 64)
    _refused(statement, [battle.pk])
    assert sorted(Generation.objects.filter(battle=battle).values_list("text", flat=True)) == [
        "Rivers flow.",
        "Water runs.",
    ]
    assert Turn.objects.get(battle=battle).text == "And lakes?"


def test_a_battle_without_a_vote_goes_with_its_answers(acme: Tenant, bob: User):
    battle = ready_battle(acme, bob)
    Turn.objects.create(battle=battle, index=1, text="And lakes?", text_hash="1" * 64)
    with transaction.atomic():
        Battle.objects.filter(pk=battle.pk).delete()  # the ORM's cascade: turns and answers first
        with connection.cursor() as cursor:
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
            cursor.execute("SET CONSTRAINTS ALL DEFERRED")
    assert not Generation.objects.filter(battle_id=battle.pk).exists()


def test_snapshots_are_never_rewritten_and_go_only_with_their_campaign(acme: Tenant):
    snapshot = _snapshot(acme)
    _refused("UPDATE ranking_leaderboardsnapshot SET rows = '[]'::jsonb WHERE id = %s", [snapshot.pk])
    _refused(
        "UPDATE ranking_leaderboardsnapshot SET created_at = now() - interval '7 days' WHERE id = %s", [snapshot.pk]
    )
    _refused("DELETE FROM ranking_leaderboardsnapshot WHERE id = %s", [snapshot.pk])
    spare = CampaignFactory.create(organization=acme.organization)
    gone = _snapshot(acme, campaign_id=spare.pk)
    with transaction.atomic():
        spare.delete()  # a campaign without battles may be deleted, with its snapshots
        with connection.cursor() as cursor:
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
            cursor.execute("SET CONSTRAINTS ALL DEFERRED")
    assert not LeaderboardSnapshot.objects.filter(pk=gone.pk).exists()
    assert LeaderboardSnapshot.objects.get(pk=snapshot.pk).rows == [{"competitor": "left", "score": 1.0}]


def test_audit_events_are_never_rewritten_but_a_deleted_user_leaves_no_name(acme: Tenant, alice: User):
    actor = UserFactory.create()
    event = audit_record(
        organization=acme.organization, actor=actor, action=AuditAction.CAMPAIGN_DELETED, obj=acme.campaign
    )
    _refused("UPDATE raters_auditevent SET data = jsonb_build_object('forged', true) WHERE id = %s", [event.pk])
    _refused("UPDATE raters_auditevent SET action = 'campaign.changed' WHERE id = %s", [event.pk])
    _refused("UPDATE raters_auditevent SET actor_id = %s WHERE id = %s", [alice.pk, event.pk])  # someone else did it
    _refused("DELETE FROM raters_auditevent WHERE id = %s", [event.pk])
    with transaction.atomic():
        actor.delete()  # on_delete=SET_NULL: the one change the log allows
        with connection.cursor() as cursor:
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
            cursor.execute("SET CONSTRAINTS ALL DEFERRED")
    event.refresh_from_db()
    assert event.actor_id is None and event.action == AuditAction.CAMPAIGN_DELETED


@pytest.fixture
def committed_rows(acme: Tenant, bob: User, transactional_db: None) -> dict[str, Any]:
    battle = ready_battle(acme, bob)
    return {
        "prompt": battle.prompt_id,
        "battle": battle.pk,
        "snapshot": _snapshot(acme).pk,
        "audit": audit_record(
            organization=acme.organization, actor=None, action=AuditAction.CAMPAIGN_DELETED, obj=acme.campaign
        ).pk,
    }


REWRITES: list[tuple[str, Callable[[dict[str, Any]], object]]] = [
    ("UPDATE battles_prompt SET text = 'rewritten' WHERE id = %s", lambda rows: rows["prompt"]),
    ("UPDATE battles_generation SET text = 'rewritten' WHERE battle_id = %s", lambda rows: rows["battle"]),
    ("DELETE FROM battles_generation WHERE battle_id = %s", lambda rows: rows["battle"]),
    ("UPDATE ranking_leaderboardsnapshot SET rows = '[]'::jsonb WHERE id = %s", lambda rows: rows["snapshot"]),
    ("DELETE FROM ranking_leaderboardsnapshot WHERE id = %s", lambda rows: rows["snapshot"]),
    (
        "UPDATE raters_auditevent SET data = jsonb_build_object('forged', true) WHERE id = %s",
        lambda rows: rows["audit"],
    ),
    ("DELETE FROM raters_auditevent WHERE id = %s", lambda rows: rows["audit"]),
    ("ALTER TABLE battles_generation DISABLE TRIGGER ALL", lambda rows: None),
    ("DROP TRIGGER raters_auditevent_no_update ON raters_auditevent", lambda rows: None),
    ("SET LOCAL session_replication_role = replica", lambda rows: None),
]


@pytest.mark.parametrize(("statement", "param"), REWRITES)
def test_the_application_role_cannot_rewrite_texts_snapshots_or_the_audit_log(committed_rows, statement, param):
    value = param(committed_rows)
    with psycopg.connect(**app_role_ready()) as app:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            with app.transaction():
                app.execute(statement, [value] if value is not None else None)
                app.execute("SET CONSTRAINTS ALL IMMEDIATE")
    assert Prompt.objects.get(pk=committed_rows["prompt"]).text == "Tell me about rivers."
    assert Generation.objects.filter(battle_id=committed_rows["battle"]).count() == 2
    assert LeaderboardSnapshot.objects.get(pk=committed_rows["snapshot"]).rows
    assert AuditEvent.objects.filter(pk=committed_rows["audit"]).exists()


def test_the_application_role_may_still_do_what_the_platform_does(committed_rows, acme: Tenant):
    """Append, edit what is editable, and delete a battle that has no vote with its answers."""
    with psycopg.connect(**app_role_ready()) as app:
        with app.transaction():
            app.execute("UPDATE battles_prompt SET active = false WHERE id = %s", [committed_rows["prompt"]])
            app.execute("DELETE FROM battles_generation WHERE battle_id = %s", [committed_rows["battle"]])
            app.execute("DELETE FROM battles_battle WHERE id = %s", [committed_rows["battle"]])
    assert not Battle.objects.filter(pk=committed_rows["battle"]).exists()
