"""What one vote costs the database, pinned: a new query on the vote path fails here, not in a load run.

The vote request through every middleware (the session, the user and the tenant scope's memberships come
from the shared cache, core.cached), the view's study gate (whether the account is a participant: the
cache too) and the service: the battle read once (the view hands it to the service), the pool check, the
conditional READY -> VOTED update, the answers' log fields (not their text; a single-turn battle reads no
turns), the vote insert (the webhook subscriptions: the cache, read from the database only where some
endpoint subscribes); the transaction around it (BEGIN/COMMIT in production, a savepoint and its release
inside the test's transaction). benchmarks/vote_cost.py times each part."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from battles.models import Battle, Turn, Vote
from raters.models import WebhookDelivery, WebhookEndpoint, WebhookEvent
from tests.battles.test_identity_refuse import ready_battle
from tests.conftest import Tenant

pytestmark = pytest.mark.django_db

# battle, SAVEPOINT, pool check, the conditional update, answers, vote insert, RELEASE.
VOTE_QUERIES = 7


def _vote(client: Client, battle: Battle) -> list[str]:
    with CaptureQueriesContext(connection) as captured:
        response = client.post(reverse("battles:vote", args=[battle.pk]), {"choice": "left"})
    assert response.status_code == 302 and response["Location"] == f"/b/{battle.pk}/"
    return [query["sql"] for query in captured.captured_queries]


def test_a_vote_costs_a_pinned_number_of_queries_and_reads_its_battle_once(acme: Tenant, bob: User, bob_client: Client):
    _vote(bob_client, ready_battle(acme, bob, "Warm up: the first request loads what later ones reuse."))
    battle = ready_battle(acme, bob)
    queries = _vote(bob_client, battle)
    assert len(queries) == VOTE_QUERIES, "\n".join(queries)
    for table in ("django_session", "auth_user", "raters_membership", "battles_participant", "raters_webhookendpoint"):
        assert not [q for q in queries if f'FROM "{table}"' in q], table
    battle_reads = [q for q in queries if q.startswith("SELECT") and 'FROM "battles_battle"' in q]
    assert len(battle_reads) == 1
    # The answers' texts stay in the database: the log takes their counts.
    (answers,) = [q for q in queries if 'FROM "battles_generation"' in q]
    assert '"battles_generation"."text"' not in answers
    assert not [q for q in queries if 'FROM "battles_turn"' in q]
    vote = Vote.objects.get(battle=battle)
    assert (vote.left_tokens, vote.right_tokens, vote.choice) == (2, 2, "left")


def test_a_multi_turn_battle_reads_its_turns_too(acme: Tenant, bob: User, bob_client: Client):
    _vote(bob_client, ready_battle(acme, bob, "Warm up: the first request loads what later ones reuse."))
    battle = ready_battle(acme, bob)
    Turn.objects.create(battle=battle, index=1, text="And lakes?", text_hash="0" * 64)
    for generation in list(battle.generations.all()):
        generation.pk = None
        generation.turn = 1
        generation.output_tokens = 5
        generation.save()
    queries = _vote(bob_client, battle)
    assert len(queries) == VOTE_QUERIES + 1
    vote = Vote.objects.get(battle=battle)
    assert vote.left_tokens == 7 and vote.turns is not None and len(vote.turns) == 2


def test_an_organisation_with_a_webhook_gets_its_delivery_in_the_votes_transaction(
    acme: Tenant, bob: User, bob_client: Client
):
    WebhookEndpoint.objects.create(
        organization=acme.organization,
        url="https://hooks.example.com/arena",
        events=[WebhookEvent.BATTLE_RATED],
    )
    _vote(bob_client, ready_battle(acme, bob, "Warm up: the first request loads what later ones reuse."))
    battle = ready_battle(acme, bob)
    queries = _vote(bob_client, battle)
    # The subscribed endpoints are read, and the delivery (its insert, in a savepoint of its own) rides in
    # the vote's transaction.
    assert len(queries) == VOTE_QUERIES + 4
    vote = Vote.objects.get(battle=battle)
    assert WebhookDelivery.objects.filter(event=WebhookEvent.BATTLE_RATED, payload__vote_id=vote.pk).count() == 1


def test_a_second_vote_that_gets_past_the_flip_is_refused_by_the_log_and_rolled_back(
    acme: Tenant, bob: User, bob_client: Client
):
    """Without a savepoint around the insert, the log's one vote per battle still answers "your first
    vote stands" (not a server error), and the flip is rolled back with it."""
    battle = ready_battle(acme, bob)
    _vote(bob_client, battle)
    Battle.objects.filter(pk=battle.pk).update(status=Battle.Status.READY)  # as if the flip had not happened
    response = bob_client.post(reverse("battles:vote", args=[battle.pk]), {"choice": "right"})
    assert response.status_code == 409 and "Your first vote stands" in response.content.decode()
    assert list(Vote.objects.filter(battle=battle).values_list("choice", flat=True)) == ["left"]
    battle.refresh_from_db()
    assert battle.status == Battle.Status.READY  # the second flip went with the refused insert
