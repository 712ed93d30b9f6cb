"""What one vote costs the database, pinned: a new query on the vote path fails here, not in a load run.

The vote request through every middleware (the session, the user and the tenant scope's memberships come
from the shared cache, core.cached), the view's study gate (whether the account is a participant: the
cache too) and the service: the battle read once, with its answers' log fields (not their text; a single-turn battle
reads no turns) in the same statement (the view hands it to the service), the conditional READY -> VOTED
update that also checks the rater is still in a pool of the campaign, the vote insert (the webhook subscriptions:
the cache, read from the database only where some endpoint subscribes), the flip and the insert one statement
(a transaction of its own in production's autocommit; a savepoint and its release inside a caller's
transaction, as inside the test's).
benchmarks/vote_cost.py times each part. "Next battle" and the battle page are pinned here too."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from battles.models import Battle, Turn, Vote
from battles.services import VoteRejected
from raters.models import WebhookDelivery, WebhookEndpoint, WebhookEvent
from tests.battles.test_identity_refuse import ready_battle
from tests.conftest import Tenant

pytestmark = pytest.mark.django_db

# battle with its answers, SAVEPOINT, the conditional update (with the pool check) and the vote insert, RELEASE.
VOTE_QUERIES = 4


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
    # The answers' log fields in the battle's own statement (one JSON array), their texts left in the database.
    (answers,) = [q for q in queries if 'FROM "battles_generation"' in q]
    assert answers is battle_reads[0]
    assert "('style')::text" in answers and "('text')::text" not in answers and "('text_html')::text" not in answers
    # The pool is checked by the flip itself, not by a read of its own; the vote is inserted by the same statement.
    (flip,) = [q for q in queries if 'UPDATE "battles_battle"' in q]
    assert '"raters_raterpool"' in flip and 'INSERT INTO "battles_vote"' in flip
    assert not [q for q in queries if q.startswith("INSERT")]
    assert not [q for q in queries if q.startswith("SELECT") and 'FROM "raters_raterpool"' in q]
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


@pytest.mark.django_db(transaction=True)
def test_in_autocommit_a_vote_is_two_statements_and_no_transaction(
    vote_log_purge: None, acme: Tenant, bob: User, bob_client: Client
):
    """As production runs it (autocommit, no test transaction around the request): the battle with its answers,
    and the flip with the vote's insert in one statement, which is a transaction of its own (no BEGIN, COMMIT or
    SAVEPOINT); the vote is stored as the ORM reads it, and the battle voted."""
    _vote(bob_client, ready_battle(acme, bob, "Warm up: the first request loads what later ones reuse."))
    battle = ready_battle(acme, bob)
    queries = _vote(bob_client, battle)
    assert len(queries) == 2, "\n".join(queries)
    assert not [q for q in queries if q.split()[0] in ("BEGIN", "COMMIT", "SAVEPOINT", "RELEASE", "ROLLBACK")]
    assert queries[1].startswith('WITH "updated" AS (UPDATE "battles_battle"')
    vote = Vote.objects.get(battle=battle)
    assert (vote.choice, vote.left_tokens, vote.right_tokens, vote.source, vote.turns) == (
        "left",
        2,
        2,
        "generated",
        None,
    )
    assert vote.decision_ms >= 0 and vote.params == battle.params
    battle.refresh_from_db()
    assert battle.status == Battle.Status.VOTED and battle.voted_at == vote.created_at


def test_a_vote_on_a_battle_given_a_new_turn_since_it_was_read_is_not_stored(
    acme: Tenant, bob: User, bob_client: Client
):
    """The flip asks that the battle be shown as the vote read it: a turn added in another tab between the vote's
    read and its write (the stamp cleared, then a new one once its answers are shown) stores nothing, and the rater
    is told to reload; the vote on the battle as it now is goes through, with both turns in the log."""
    from battles import selectors, services

    battle = ready_battle(acme, bob)
    read = selectors.battle_for_rater(user=bob, battle_id=str(battle.pk))
    assert read is not None
    Turn.objects.create(battle=battle, index=1, text="And lakes?", text_hash="0" * 64)
    for generation in list(battle.generations.all()):
        generation.pk = None
        generation.turn = 1
        generation.save()
    Battle.objects.filter(pk=battle.pk).update(shown_at=timezone.now())  # the new turn's answers shown since
    with pytest.raises(VoteRejected, match="changed in another tab"):
        services.vote_submit(battle_id=battle.pk, user=bob, choice="left", battle=read)
    assert not Vote.objects.filter(battle=battle).exists()
    assert Battle.objects.get(pk=battle.pk).status == Battle.Status.READY
    vote = services.vote_submit(battle_id=battle.pk, user=bob, choice="left")
    assert vote.turns is not None and len(vote.turns) == 2


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


def test_a_vote_of_a_rater_taken_out_of_the_pool_is_refused_by_the_flip(acme: Tenant, bob: User, bob_client: Client):
    """The flip checks the pool: a rater removed after the battle was shown is told so, and nothing is stored."""
    battle = ready_battle(acme, bob)
    acme.pool.members.remove(bob)
    response = bob_client.post(reverse("battles:vote", args=[battle.pk]), {"choice": "left"})
    assert response.status_code == 409 and "no longer in a rater pool" in response.content.decode()
    assert not Vote.objects.filter(battle=battle).exists()
    battle.refresh_from_db()
    assert battle.status == Battle.Status.READY and battle.voted_at is None


def _page(client: Client, battle: Battle) -> tuple[str, list[str]]:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(reverse("battles:battle", args=[battle.pk]))
    assert response.status_code == 200
    return response.content.decode(), [query["sql"] for query in captured.captured_queries]


def test_the_page_reads_turns_only_for_a_battle_that_may_have_them(acme: Tenant, bob: User, bob_client: Client):
    """A ready or voted battle has both answers of every turn stored, so a single-turn one sends no read of
    turns; one with answers to a later turn reads them and shows the history; a generating one whose new turn
    has no answers yet reads them too, and shows that turn as the one being prepared."""
    warm = ready_battle(acme, bob, "Warm up: the first request loads what later ones reuse.")
    _page(bob_client, warm)
    Battle.objects.filter(pk=warm.pk).update(status=Battle.Status.VOID)  # bob's one open battle: let it go
    single = ready_battle(acme, bob)
    page, queries = _page(bob_client, single)
    assert not [q for q in queries if 'FROM "battles_turn"' in q]
    # The battle with the page's two counts and its answers, in one statement (shown before: no stamp to write).
    assert len(queries) == 1 and '"page_position"' in queries[0], "\n".join(queries)
    assert 'FROM "battles_generation"' in queries[0]
    assert "Rivers flow." in page
    Battle.objects.filter(pk=single.pk).update(status=Battle.Status.VOID)  # bob's one open battle: let it go

    multi = ready_battle(acme, bob, "Tell me about lakes.")
    Turn.objects.create(battle=multi, index=1, text="And seas?", text_hash="1" * 64)
    for side, competitor, answer in (("left", acme.left, "Seas are salty."), ("right", acme.right, "Seas are big.")):
        multi.generations.create(side=side, turn=1, competitor=competitor, text=answer, output_tokens=3, latency_s=0.1)
    page, queries = _page(bob_client, multi)
    assert len([q for q in queries if 'FROM "battles_turn"' in q]) == 1
    assert "Your turn 2" in page and "And seas?" in page and "Seas are salty." in page

    # A new turn asked for: generating again, its answers not stored yet.
    Turn.objects.create(battle=multi, index=2, text="And oceans?", text_hash="2" * 64)
    Battle.objects.filter(pk=multi.pk).update(status=Battle.Status.GENERATING, shown_at=None, ready_at=None)
    page, queries = _page(bob_client, multi)
    assert len([q for q in queries if 'FROM "battles_turn"' in q]) == 1
    assert "Your turn 3" in page and "And oceans?" in page and "Preparing your next battle" in page


def test_next_battle_from_the_buffer_costs_a_pinned_number_of_queries(acme: Tenant, bob: User, bob_client: Client):
    """ "Next battle" from a buffer: the campaign with the rater's pool and their standing (an open battle? the
    session count) in one statement, and the claim, one statement with every rule (competitors available, the prompt
    not seen by the rater...) that returns the battle it claimed (in a savepoint here; in autocommit in
    production, see tests/battles/test_buffer.py)."""

    def buffered(text: str) -> Battle:
        battle = ready_battle(acme, bob, text)
        Battle.objects.filter(pk=battle.pk).update(rater=None, pool=None, shown_at=None, claimed_at=None)
        return battle

    def next_battle() -> tuple[str, list[str]]:
        with CaptureQueriesContext(connection) as captured:
            response = bob_client.post(reverse("battles:next", args=[acme.campaign.pk]))
        assert response.status_code == 302
        return response["Location"], [query["sql"] for query in captured.captured_queries]

    warm = buffered("Warm up: the first request loads what later ones reuse.")
    assert next_battle()[0] == f"/b/{warm.pk}/"
    Battle.objects.filter(pk=warm.pk).update(status=Battle.Status.VOID)
    battle = buffered("Tell me about deltas.")
    location, queries = next_battle()
    assert location == f"/b/{battle.pk}/"
    # The campaign with the rater's pool and standing, SAVEPOINT, the claim, RELEASE.
    assert len(queries) == 4, "\n".join(queries)
    assert queries[0].startswith('SELECT "battles_campaign"."id"') and 'FROM "raters_raterpool"' in queries[0]
    assert queries[0].count('COUNT(*) AS "n" FROM "battles_battle"') == 2
    assert "SKIP LOCKED" in queries[2] and " RETURNING " in queries[2]
    assert not [q for q in queries if 'FROM "battles_competitor"' in q.split("WHERE")[0]]  # asked within the candidates
