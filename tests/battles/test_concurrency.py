"""One vote per battle under truly concurrent submission: separate connections, real database."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from battles.models import Battle, Vote
from battles.services import VoteRejected, vote_submit
from raters.tenancy import principal_scope
from tests.conftest import start_battle


@pytest.mark.django_db(transaction=True)
@pytest.mark.triton
def test_concurrent_votes_on_one_battle_store_exactly_one(vote_log_purge, acme, bob, bob_client, triton_server):
    battle, _ = start_battle(bob_client, acme.campaign)
    n = 6
    barrier = threading.Barrier(n)
    outcomes: list[str] = []
    lock = threading.Lock()

    def submit(choice: str) -> None:
        try:
            barrier.wait()
            with principal_scope(bob):  # a thread is its own edge: it opens the rater's scope
                vote_submit(battle_id=battle.pk, user=bob, choice=choice)
            result = "stored"
        except VoteRejected:
            result = "rejected"
        finally:
            connection.close()
        with lock:
            outcomes.append(result)

    choices = ["left", "right", "tie", "both_bad", "left", "right"]
    threads = [threading.Thread(target=submit, args=(c,)) for c in choices[:n]]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert sorted(outcomes) == ["rejected"] * (n - 1) + ["stored"]
    assert Vote.objects.filter(battle=battle).count() == 1
    assert Battle.objects.get(pk=battle.pk).status == Battle.Status.VOTED
