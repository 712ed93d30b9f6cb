"""Faults on a running stack (tests/reliability/stack.py: gunicorn + uvicorn workers, a Celery worker,
PostgreSQL, Redis and Triton of the test's own, on loopback), raters driven through the real HTTP stack
(login form, session cookie, CSRF token on every POST). Each test counts the votes the raters were told
were taken (the vote's redirect) against the rows in the vote log: 0 lost, 0 stored twice; and a vote
whose answer was an error or never came is retried once the fault is over: a 302 then proves the failed
attempt stored nothing, "already voted" that it was stored once and only the answer was lost."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from .stack import Ledger, Rater, Refused, Stack, together, wait_until

pytestmark = [pytest.mark.xdist_group("fault-stack"), pytest.mark.triton, pytest.mark.reliability]


def prepared(rater: Rater, ledger: Ledger | None = None) -> str:
    """A battle generated and shown to the rater, ready for a vote."""
    battle = rater.next_battle(ledger)
    assert rater.wait_prepared(battle) == "ready"
    rater.page(battle)
    return battle


def settle_failures(rater_of: dict[str, Rater], ledger: Ledger, settle_s: float = 10.0) -> dict[str, int]:
    """Retry every vote whose answer was an error or was lost, as a client does (the site's error page
    again, within ``settle_s`` of the first retry, is retried after a pause: a server just restarted
    may fail a request while its connections are re-made); how the retries were finally answered.

    "Already voted" is the site's word that the failed attempt was stored: where that attempt's answer was
    lost (none came, or a server error), the vote counts as acknowledged from then on (it must be stored,
    and once: ``assert_counts``); a vote refused outright (a 4xx) and stored all the same is not, and fails
    the counts."""
    outcomes = {"stored now": 0, "stored before": 0}
    deadline = time.monotonic() + settle_s
    for battle, why in list(ledger.failed):
        rater = rater_of[battle]
        response = rater._post(f"/b/{battle}/vote/", {"choice": "left"})
        while response.status_code in (500, 503) and time.monotonic() < deadline:
            time.sleep(0.5)
            response = rater._post(f"/b/{battle}/vote/", {"choice": "left"})
        if response.status_code == 302:
            ledger.acknowledged.append(battle)
            outcomes["stored now"] += 1
        else:
            assert "already been voted on" in response.text, (battle, response.status_code, response.text[:300])
            outcomes["stored before"] += 1
            # (Unless the rater's vote on it was taken meanwhile: the page again, the vote again.)
            if not (why.isdigit() and int(why) < 500) and battle not in ledger.acknowledged:
                ledger.acknowledged.append(battle)
    return outcomes


def assert_counts(stack: Stack, ledger: Ledger, battles: set[str] | None = None) -> dict[str, int]:
    # The stack is shared by the module's tests: only the battles this test's raters were given count.
    if battles is None:
        battles = set(ledger.acknowledged) | {b for b, _ in ledger.failed}
    stored = type(ledger.errors)({b: n for b, n in stack.stored_votes().items() if b in battles})
    counts = ledger.check(stored)
    print(f"votes: {counts}, failed answers {len(ledger.failed)}: {ledger.errors}")
    assert counts["lost"] == 0 and counts["doubled"] == 0, counts
    assert counts["acknowledged"] == counts["stored"], counts
    return counts


def voting(
    raters: list[Rater], ledger: Ledger, stop: threading.Event, rater_of: dict[str, Rater]
) -> list[threading.Thread]:
    """Each rater in a thread: battle after battle, voting, until stopped. Failures of the battle's own
    requests (next, poll, page) are counted and the rater carries on, as a person would reload."""

    def run(rater: Rater) -> None:
        while not stop.is_set():
            try:
                battle = rater.next_battle(ledger)
                with ledger.lock:
                    rater_of[battle] = rater
                # Told to stop, a rater leaves a battle still being prepared (one whose task was lost while
                # Redis was down, in the first test, waits for the stale sweep: minutes) rather than holding
                # up the end of the test.
                if rater.wait_prepared(battle, timeout_s=30, stop=stop) != "ready":
                    continue
                rater.page(battle)
                rater.vote(battle, ledger)
            except (Refused, requests.RequestException, TimeoutError, ValueError) as exc:
                with ledger.lock:
                    ledger.errors[f"flow {type(exc).__name__}"] += 1
                time.sleep(0.1)

    threads = [threading.Thread(target=run, args=(r,), daemon=True) for r in raters]
    for thread in threads:
        thread.start()
    return threads


def votes_taken(ledger: Ledger) -> int:
    with ledger.lock:
        return len(ledger.acknowledged)


def await_votes(ledger: Ledger, count: int, timeout_s: float = 30.0) -> None:
    """Until ``count`` votes in all were taken, or ``timeout_s`` passed (no failure here: what the test
    asserts is counted afterwards)."""
    deadline = time.monotonic() + timeout_s
    while votes_taken(ledger) < count and time.monotonic() < deadline:
        time.sleep(0.05)


def run_around(stack: Stack, raters: list[Rater], fault: Callable[[Ledger], None]) -> tuple[Ledger, dict[str, Rater]]:
    """The raters vote; the fault strikes once as many votes as raters were taken (the flow runs: their
    requests are in flight), and they go on until as many more were taken after it (the site serves them
    again), rather than for a fixed time on either side. Then they stop and are awaited."""
    ledger, stop, rater_of = Ledger(), threading.Event(), {}  # type: ignore[var-annotated]
    threads = voting(raters, ledger, stop, rater_of)
    await_votes(ledger, len(raters))
    fault(ledger)
    await_votes(ledger, votes_taken(ledger) + len(raters))
    stop.set()
    for thread in threads:
        thread.join(timeout=60)
    return ledger, rater_of


def test_votes_keep_landing_while_redis_restarts(stack: Stack) -> None:
    assert stack.redis is not None
    raters = [stack.rater(0), stack.rater(1)]
    waiting = stack.rater(2)
    ledger = Ledger()
    held = [prepared(r) for r in raters]
    stack.redis.stop()
    try:
        # Votes on shown battles are taken, and asking for the next battle is answered (no 500): the cache
        # falls back to the process, the broker's error is logged.
        t0 = time.monotonic()
        for rater, battle in zip(raters, held, strict=True):
            assert rater.vote(battle, ledger), ledger.failed
        asked = waiting._post(f"/c/{waiting.campaign_id}/next/", {})
        assert asked.status_code == 302, asked.status_code
        assert time.monotonic() - t0 < 20
    finally:
        stack.redis.start()
    # Back: battles are generated again (the worker reconnected to the broker) and votes land.
    for rater in raters:
        for _ in range(2):
            battle, acknowledged = rater.battle_and_vote(ledger)
            assert acknowledged, ledger.failed
    # Every worker, run with the compose file's own command, rode the restart out (issue 21 saw the
    # generation worker exit, and battles stay "generating", in 2 of 2 runs).
    exited = [child.log.name for child in stack.workers if not child.alive()]
    assert not exited, (exited, stack.logs())
    assert_counts(stack, ledger)


def test_postgresql_restart_fails_cleanly_and_clients_reconnect(stack: Stack) -> None:
    assert stack.pg is not None
    raters = [stack.rater(0), stack.rater(1)]
    ledger = Ledger()
    held = [prepared(r) for r in raters]
    stack.pg.stop("fast")
    try:
        for rater, battle in zip(raters, held, strict=True):
            t0 = time.monotonic()
            assert not rater.vote(battle, ledger)
            assert time.monotonic() - t0 < 15  # answered, not hanging
        # Answered with the site's 503 page and Retry-After (the database is unavailable: try again), never
        # the 500 of a bug, never a partial success.
        assert [why for _, why in ledger.failed] == ["503", "503"], ledger.failed
        page = raters[0].http.get(f"{raters[0].url}/b/{held[0]}/", timeout=15)
        assert page.status_code == 503 and page.headers["Retry-After"] == "5" and "Traceback" not in page.text
        assert "Briefly unavailable" in page.text
    finally:
        stack.pg.start()
    # The same sessions go on (the pool checks each connection it hands out and replaces the dead ones);
    # the failed votes stored nothing: retried, each is taken now.
    outcomes = settle_failures(dict(zip(held, raters, strict=True)), ledger)
    assert outcomes == {"stored now": 2, "stored before": 0}
    for rater in raters:
        battle, acknowledged = rater.battle_and_vote(ledger)  # the worker reconnected too
        assert acknowledged
    assert_counts(stack, ledger)


def test_triton_stopped_mid_battle_voids_it_tells_the_rater_and_logs_nothing(stack: Stack) -> None:
    assert stack.triton is not None and stack.triton.pid is not None
    rater = stack.rater(3, campaign="slow_campaign_id")
    battle = rater.next_battle()
    # Generation started (the worker stamps it) and the slow side (300 ms) is still answering.
    wait_until(
        lambda: (
            stack.pg is not None
            and bool(
                stack.pg.query(
                    "SELECT 1 FROM battles_battle WHERE id = %s AND generation_started_at IS NOT NULL", [battle]
                )
            )
        ),  # fmt: skip
        20,
        "generation started",
        0.01,
    )
    os.kill(stack.triton.pid, signal.SIGKILL)  # a crash, not a graceful stop that would finish the call
    try:
        assert rater.wait_prepared(battle, timeout_s=30) == "void"
        page = rater.page(battle)
        assert "This battle was voided" in page and 'id="vote-form"' not in page
        ledger = Ledger()
        assert not rater.vote(battle, ledger)
        assert stack.stored_votes().get(battle, 0) == 0
        assert stack.pg is not None
        # What each side did is kept for the operator (a failed side with its error), never shown: the
        # voided page carries neither answer.
        sides = stack.pg.query("SELECT text, error FROM battles_generation WHERE battle_id = %s", [battle])
        assert any(error for _, error in sides), sides
        assert not any(text and text in page for text, _ in sides)
    finally:
        stack.triton.stop()
        stack.triton.start()  # the same gRPC port: the endpoints' URL is unchanged
    # Triton back: battles are generated and voted again, once beat's health check saw the models ready
    # (if it marked them down meanwhile, the campaign says "No battle for now" until then: 409, not 5xx).
    ledger = Ledger()
    deadline = time.monotonic() + 60
    while True:
        try:
            _, acknowledged = rater.battle_and_vote(ledger)
            break
        except Refused as exc:
            assert exc.status == 409 and time.monotonic() < deadline, exc
            time.sleep(0.25)
    assert acknowledged


def test_a_web_worker_killed_mid_request_loses_and_doubles_nothing(stack: Stack) -> None:
    raters = [stack.rater(i) for i in range(3)]
    killed: list[int] = []

    def kill_workers(ledger: Ledger) -> None:
        for turn in range(2):  # each of the two in turn, while the raters' requests are in flight
            if turn:  # the site answers votes again between the kills
                await_votes(ledger, votes_taken(ledger) + 1, timeout_s=10)
            pid = stack.web_worker_pids()[0]
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
            wait_until(lambda: len(stack.web_worker_pids()) == stack.web_workers, 60, "gunicorn's new worker")

    ledger, rater_of = run_around(stack, raters, kill_workers)
    assert len(killed) == 2 and not set(killed) & set(stack.web_worker_pids())
    print(f"flow errors while the workers were killed: {ledger.errors}")
    outcomes = settle_failures(rater_of, ledger)
    print(f"retried votes: {outcomes}")
    counts = assert_counts(stack, ledger, battles=set(rater_of))
    assert counts["acknowledged"] >= 3
    stack.wait_web()


def test_a_celery_worker_killed_mid_recompute_loses_no_vote_and_the_board_catches_up(stack: Stack) -> None:
    """tests/ranking/test_worker_killed.py's attack, with the votes coming through HTTP: the worker of
    the leaderboards is killed (SIGKILL) in the middle of a recompute (tests.ranking.slow_worker: the
    real task, a computation that never ends), a fresh one started; every vote taken is stored once, and
    a snapshot including the last vote appears within the debounce + 30 s."""
    assert stack.worker is not None and stack.pg is not None
    # The compose file's recompute worker is swapped for the slow one (the generator keeps running).
    stack.worker.stop()
    slow = stack.start_worker(module=("tests.ranking.slow_worker",), queues="recompute,celery")
    fresh = None
    try:
        raters = [stack.rater(0), stack.rater(1)]
        ledger = Ledger()
        try:
            for rater in raters:
                assert rater.battle_and_vote(ledger)[1]
        except TimeoutError:
            print(stack.logs())  # the generator's log says why a battle stayed generating
            raise
        wait_until(lambda: "recompute started" in slow.tail(20000), 60, "the slow worker's recompute")
        slow.stop(signal.SIGKILL)
        killed = time.monotonic()
        fresh = stack.start_worker(queues="recompute,celery")  # the supervisor's restart
        for rater in raters:  # votes go on meanwhile
            assert rater.battle_and_vote(ledger)[1]
        [(last,)] = stack.pg.query("SELECT max(id) FROM battles_vote")
        debounce = int(stack.env()["ARENA_RANKING_DEBOUNCE_S"])

        def caught_up() -> bool:
            assert stack.pg is not None
            return bool(stack.pg.query(
                "SELECT 1 FROM ranking_leaderboardsnapshot WHERE campaign_id = %s AND category = '' "
                "AND view = 'raw' AND last_vote_id >= %s", [stack.seed["campaign_id"], last]))  # fmt: skip

        try:
            wait_until(caught_up, debounce + 30, "a snapshot with the last vote", 0.25)
        except TimeoutError:
            print(stack.logs())
            raise
        print(f"fresh snapshot {time.monotonic() - killed:.1f} s after the kill")
        assert_counts(stack, ledger)
    finally:
        together(*(child.stop for child in (fresh, slow) if child is not None))
        stack.start_compose_workers(["worker"])


def test_a_burst_of_parallel_votes_gets_no_5xx_and_each_battle_one_vote(stack: Stack) -> None:
    """The attack of issue 21: 20 raters each send the same vote 10 times at once (a double-clicking
    rater, a second tab, a client's retries), 200 POSTs released together on the web's two processes, with
    the connection pool as deployed (10 per process). Before, 3-8% of them failed with a 500 (23% with the
    pool then). Now the pool queues a request while every connection is busy, instead of failing it: no
    5xx at all; each battle has exactly one vote, the other nine are told "already voted" (409, the result
    page with the message)."""
    from .conftest import BURST_RATERS

    per_rater = 10
    lock = threading.Lock()
    with ThreadPoolExecutor(max_workers=BURST_RATERS) as pool:  # logged in, each shown a battle
        raters = list(pool.map(stack.rater, range(BURST_RATERS)))
        held = dict(zip(raters, pool.map(prepared, raters), strict=True))
    before = stack.stored_votes()
    assert not any(before.get(b) for b in held.values())

    answers: list[tuple[str, int, str]] = []
    barrier = threading.Barrier(len(raters) * per_rater)

    def post(rater: Rater, battle: str) -> None:
        session = requests.Session()  # a tab of the rater's: the same cookies, its own connection
        session.cookies.update(rater.http.cookies)
        path = f"/b/{battle}/vote/"
        data = {"csrfmiddlewaretoken": rater.http.cookies.get("csrftoken") or "", "choice": "left"}
        barrier.wait()
        try:
            response = session.post(rater.url + path, data=data, headers={"Referer": rater.url + path},
                                    allow_redirects=False, timeout=60)  # fmt: skip
            answer = (battle, response.status_code, response.text)
        except requests.RequestException as exc:
            answer = (battle, 0, type(exc).__name__)
        with lock:
            answers.append(answer)

    t0 = time.monotonic()
    threads = [
        threading.Thread(target=post, args=(rater, battle)) for rater, battle in held.items() for _ in range(per_rater)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=90)
    elapsed = time.monotonic() - t0
    statuses = Counter(status for _, status, _ in answers)
    print(f"burst of {len(answers)} votes in {elapsed:.1f} s: {dict(statuses)}")
    assert len(answers) == len(raters) * per_rater
    assert not [a for a in answers if a[1] >= 500 or a[1] == 0], [a for a in answers if a[1] >= 500 or a[1] == 0][:3]
    stored = stack.stored_votes()
    for battle in held.values():
        assert stored[battle] == 1, (battle, stored[battle])
        taken = [a for a in answers if a[0] == battle and a[1] == 302]
        refused = [a for a in answers if a[0] == battle and a[1] != 302]
        assert len(taken) == 1, (battle, [a[1] for a in answers if a[0] == battle])
        assert all(status == 409 and "already been voted on" in text for _, status, text in refused), [
            (status, text[:200]) for _, status, text in refused[:2]
        ]
