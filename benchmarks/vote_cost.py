"""The server-side cost of one vote, part by part: what a vote request does, and what it costs.

    python benchmarks/vote_cost.py [--votes 300] [--cycles 100] [--profile] [--profile-cycle]

Into the PostgreSQL database named by BENCH_DATABASE_URL (default: a local database arena_bench_vote) and
the Redis named by BENCH_REDIS_URL (default: redis://127.0.0.1:6379/15; the rate limiter's counters and
the recompute's pending mark live there, as in production), one organisation, a campaign, a rater and
``--votes`` battles ready and shown (both answers stored, as the generation workers leave them). Then the
rater votes on each through Django's request handler (the test client: every middleware, the rate limits
on, at a rate they never reach), with production settings (DEBUG off). Printed:

  queries   the SQL statements of one vote, in order, each with what it is for
  parts     per part of the request, the median milliseconds (inclusive: a part's time includes the parts
            it calls; "battle read" is every call of battle_for_rater: the view's, which the service reuses)
  total     the vote request's median and p99
  cycle     ``--cycles`` times a rater's whole cycle from a warm buffer of ``--cycles`` battles (filled
            first), as benchmarks/load.py's raters do it: next battle (the claim), the battle page, the vote;
            the CPU of this process and of the connection's PostgreSQL backend (read from /proc: a local
            server); the votes/s one core could serve; and the floor: the same three requests, with the
            same session, to a view that does nothing
  handlers  the sign-in page (every middleware, a template) served through the ASGI protocol in process by
            Django's ASGI handler alone and by the platform's application (core/asgi.py: sync views on
            Django's WSGI handler in threads), alternated three times: CPU and wall a request
  bridges   the rater's whole cycle (next, page, vote: the session cookie, CSRF tokens, every middleware)
            through the platform's router in process by the ASGI protocol, the sync views handed to Django's
            WSGI handler by core.asgi.WSGIBridge and by a2wsgi's middleware (the bridge it replaced),
            alternated eight times: this process's CPU a cycle
  prepared  the rater's whole cycle with the hot statements compiled once a process (core.prepared, the
            default) and built anew by the ORM on every call (ARENA_PREPARED=0), alternated six times: this
            process's CPU a cycle, and whether both sent the same statements
  baseline  on the same connection: one round trip (SELECT 1) and one single-row INSERT in autocommit,
            and opening a new connection (what every request pays with DB_CONN_MAX_AGE=0)
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import os
import pstats
import re
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def setup_django(url: str, redis_url: str) -> None:
    from benchmarks.database import database_ensure

    database_ensure(url)
    os.environ.update(
        {
            "DATABASE_URL": url,
            "REDIS_URL": redis_url,
            "DJANGO_SETTINGS_MODULE": "arena.settings.base",
            "SECRET_KEY": "vote-cost-benchmark-only-secret-key-vote-cost-benchmark-only",
            "DEBUG": "false",
            "ALLOWED_HOSTS": "*",
            "SECURE_SSL_REDIRECT": "false",
            "SECURE_HSTS_SECONDS": "0",
            "ARENA_VOTE_RATE": "100000/m",
            "ARENA_VOTE_IP_RATE": "100000/m",
            "ARENA_BATTLE_RATE": "100000/m",
            "ARENA_BATTLE_IP_RATE": "100000/m",
            "LOG_LEVEL": "WARNING",
        }
    )
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from arena.celery import app

    # The recompute the first vote schedules goes to a broker nobody reads: nothing runs beside the votes.
    app.conf.update(broker_url="memory://", task_always_eager=False)


def world() -> tuple[Any, Any, Callable[..., Any]]:
    """The rater, and a function that makes the next ready battle for them (one open battle at a time)."""
    from django.utils import timezone

    from battles.models import Battle, Generation, Prompt
    from battles.rendering import answer_rendered
    from raters.models import Role
    from raters.tenancy import scopes_disabled
    from tests.factories import (
        CampaignFactory,
        CompetitorFactory,
        MembershipFactory,
        ModelEndpointFactory,
        OrganizationFactory,
        PromptFactory,
        RaterPoolFactory,
        UserFactory,
    )

    stamp = time.time_ns()
    with scopes_disabled():
        organization = OrganizationFactory.create(name=f"Votes {stamp}", slug=f"votes-{stamp}")
        rater = UserFactory.create(email=f"rater-{stamp}@votes.test")
        MembershipFactory.create(user=rater, organization=organization, role=Role.RATER)
        pool = RaterPoolFactory.create(organization=organization, name="Vote raters")
        pool.members.add(rater)
        campaign = CampaignFactory.create(
            organization=organization, name="Votes", slug=f"votes-{stamp}", session_cap=100_000
        )
        campaign.rater_pools.add(pool)
        left, right = (
            CompetitorFactory.create(
                campaign=campaign,
                endpoint=ModelEndpointFactory.create(
                    organization=organization, name=f"vote-{model}", url="127.0.0.1:9", model_name=model
                ),
                version_label="2026-12",
            )
            for model in ("zen-bigram", "stdlib-trigram")
        )

    def battle_make(i: int, buffered: bool = False) -> Any:
        """Assigned to the rater and shown; ``buffered``: ready in the buffer, for a claim."""
        with scopes_disabled():
            now = timezone.now()
            prompt = PromptFactory.create(campaign=campaign, source=Prompt.Source.POOL, text=f"Rivers {stamp} {i}?")
            battle = Battle.objects.create(
                organization=organization,
                campaign=campaign,
                rater=None if buffered else rater,
                pool=None if buffered else pool,
                prompt=prompt,
                left=left,
                right=right,
                params={**campaign.sampling_params(), "seed": i},
                status=Battle.Status.READY,
                ready_at=now,
                shown_at=None if buffered else now,
                claimed_at=None if buffered else now,
                session_key="" if buffered else "vote-cost",
            )
            answer = "Rivers flow to the sea. **Always**.\n\n- one\n- two"
            for side, competitor in (("left", left), ("right", right)):
                Generation.objects.create(
                    battle=battle,
                    side=side,
                    turn=0,
                    competitor=competitor,
                    text=answer,
                    **answer_rendered(answer),  # rendered when stored, as the generation worker does
                    output_tokens=12,
                    latency_s=0.1,
                    style={"tokens": 12, "headers": 0, "list_items": 2, "bold": 1, "code_blocks": 0},
                )
            return battle

    return rater, campaign, battle_make


class Timers:
    """Inclusive wall time per named part, per vote (the calls of one vote summed)."""

    def __init__(self) -> None:
        self.current: dict[str, float] = defaultdict(float)
        self.per_vote: dict[str, list[float]] = defaultdict(list)

    def wrap(self, owner: Any, attribute: str, part: str) -> None:
        original: Callable[..., Any] = getattr(owner, attribute)

        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.current[part] += time.perf_counter() - t0

        setattr(owner, attribute, timed)

    def close_vote(self, parts: list[str]) -> None:
        for part in parts:
            self.per_vote[part].append(self.current.get(part, 0.0))
        self.current.clear()


def _backend_cpu_reader() -> Callable[[], float]:
    """A function that reads the CPU seconds spent so far by this connection's PostgreSQL backend (from /proc:
    the server on this machine), or always 0 where it cannot be read."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    stat = Path(f"/proc/{pid}/stat")
    ticks = os.sysconf("SC_CLK_TCK")

    def read() -> float:
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / ticks  # utime + stime

    return read


def label(sql: str) -> str:
    """What a statement is for, by its text."""
    s = sql.lstrip()
    rules = [
        ('FROM "django_session"', "session: load"),
        ('FROM "auth_user"', "auth: the user"),
        ('FROM "raters_membership"', "tenant scope: memberships"),
        ('FROM "battles_participant"', "study gate: participant?"),
        ('WITH "updated" AS (UPDATE "battles_battle"', "the flip READY -> VOTED and the vote's insert, one statement"),
        ('UPDATE "battles_battle"', "claim: READY -> VOTED (conditional update)"),
        ('FROM "battles_battle"', "battle read (with campaign, prompt, competitors)"),
        ('FROM "raters_raterpool"', "pool check: rater still in a pool"),
        ('FROM "battles_generation"', "answers (for the log's per-side fields)"),
        ('FROM "battles_turn"', "turns (multi-turn log)"),
        ('INSERT INTO "battles_vote"', "vote insert"),
        ('FROM "raters_webhookendpoint"', "webhooks subscribed?"),
        ('INSERT INTO "raters_webhookdelivery"', "webhook delivery"),
        ('FROM "battles_campaign"', "campaign (attention warning)"),
        ("RELEASE SAVEPOINT", "release savepoint"),
        ("SAVEPOINT", "savepoint"),
        ('UPDATE "django_session"', "session: save"),
    ]
    for needle, name in rules:
        if needle in s:
            return name
    return s[:80]


async def asgi_request(
    app: Any, method: str, path: str, *, headers: list[tuple[bytes, bytes]], body: bytes = b""
) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    """One HTTP request through an ASGI application in process, as an ASGI server drives it: the status, the
    headers and the body it answered."""
    import asyncio

    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method, "scheme": "http",
        "path": path, "raw_path": path.encode(), "root_path": "", "query_string": b"", "headers": headers,
        "client": ("127.0.0.1", 50000), "server": ("testserver", 80),
    }  # fmt: skip
    sent: list[dict[str, Any]] = []
    done = asyncio.Event()
    asked = False

    async def receive() -> dict[str, Any]:
        nonlocal asked
        if not asked:
            asked = True
            return {"type": "http.request", "body": body, "more_body": False}
        await done.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        if message["type"] == "http.response.body" and not message.get("more_body"):
            done.set()

    await app(scope, receive, send)
    return sent[0]["status"], sent[0]["headers"], b"".join(m.get("body", b"") for m in sent[1:])


def bridges_compare(campaign: Any, user: Any, battle_make: Callable[..., Any], cycles: int = 40, runs: int = 8) -> None:
    """The rater's cycle through the router by the ASGI protocol, with each WSGI bridge, alternated."""
    import asyncio

    from a2wsgi import WSGIMiddleware
    from django.core.asgi import get_asgi_application
    from django.core.wsgi import get_wsgi_application
    from django.test import Client

    from core.asgi import SyncViewsOverWSGI

    login = Client()
    login.force_login(user)
    cookies = {"sessionid": login.cookies["sessionid"].value}
    django_asgi, django_wsgi = get_asgi_application(), get_wsgi_application()
    bridge = SyncViewsOverWSGI(asgi_app=django_asgi, wsgi_app=django_wsgi, threads=10)
    previous = SyncViewsOverWSGI(asgi_app=django_asgi, wsgi_app=django_wsgi, threads=10)
    a2wsgi = WSGIMiddleware(django_wsgi, workers=10)  # type: ignore[arg-type]

    async def a2wsgi_bridge(scope: Any, receive: Any, send: Any, found: object = None) -> None:
        await a2wsgi(scope, receive, send)  # a2wsgi takes no router match: Django resolves again

    previous.wsgi_app = a2wsgi_bridge  # type: ignore[assignment]
    token_in = re.compile(rb'name="csrfmiddlewaretoken" value="([^"]+)"')

    async def request(app: Any, method: str, path: str, body: bytes = b"") -> tuple[int, dict[bytes, bytes], bytes]:
        cookie = "; ".join(f"{name}={value}" for name, value in cookies.items()).encode()
        headers = [(b"host", b"testserver"), (b"cookie", cookie)]
        if method == "POST":
            headers += [(b"content-type", b"application/x-www-form-urlencoded"), (b"content-length", b"%d" % len(body))]
        status, answered, content = await asgi_request(app, method, path, headers=headers, body=body)
        for name, value in answered:
            if name == b"set-cookie":
                key, _, rest = value.decode().partition("=")
                cookies[key] = rest.split(";", 1)[0]
        return status, dict(answered), content

    async def cycle(app: Any, token: str) -> str:
        status, headers, _ = await request(
            app, "POST", f"/c/{campaign.pk}/next/", f"csrfmiddlewaretoken={token}".encode()
        )
        assert status == 302, status
        battle_url = headers[b"location"].decode()
        status, _, page = await request(app, "GET", battle_url)
        found = token_in.search(page)
        assert status == 200 and found is not None, status
        token = found.group(1).decode()
        form = f"csrfmiddlewaretoken={token}&choice=left".encode()
        status, _, _ = await request(app, "POST", battle_url + "vote/", form)
        assert status == 302, status
        return token

    async def compare() -> dict[str, list[float]]:
        loop = asyncio.get_running_loop()
        _, _, page = await request(bridge, "GET", f"/c/{campaign.pk}/")
        found = token_in.search(page)
        assert found is not None
        token = found.group(1).decode()
        measured: dict[str, list[float]] = defaultdict(list)
        made = 0
        for _ in range(runs):
            for name, app in (("a2wsgi's middleware (before)", previous), ("WSGIBridge (core/asgi.py)", bridge)):
                spent = 0.0
                for i in range(cycles + 5):
                    await loop.run_in_executor(None, functools.partial(battle_make, 500_000 + made, buffered=True))
                    made += 1
                    c0 = time.process_time()
                    token = await cycle(app, token)
                    if i >= 5:  # the first few warm the bridge's threads
                        spent += time.process_time() - c0
                measured[name].append(spent / cycles * 1000)
        return measured

    measured = asyncio.run(compare())
    print(f"\nbridges: the rater's cycle through the router in process (CPU ms a cycle, {cycles} a run, {runs} runs):")
    for name, values in measured.items():
        print(f"  {name:<48} CPU {', '.join(f'{v:.2f}' for v in values)}   median {statistics.median(values):.2f}")


def prepared_compare(
    campaign: Any, user: Any, battle_make: Callable[..., Any], cycles: int = 40, runs: int = 6
) -> None:
    """The rater's cycle (the test client, every middleware) with the hot statements compiled once
    (core.prepared, ARENA_PREPARED on) and built anew by the ORM on every call (off), alternated."""
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext, override_settings
    from django.urls import reverse

    client = Client()
    client.force_login(user)
    measured: dict[str, list[float]] = defaultdict(list)
    statements: dict[str, list[str]] = {}
    made = 0

    def cycle() -> None:
        response = client.post(reverse("battles:next", args=[campaign.pk]))
        assert client.get(response["Location"]).status_code == 200
        assert client.post(response["Location"] + "vote/", {"choice": "left"}).status_code == 302

    for _ in range(runs):
        for name, on in (
            ("built by the ORM on each call (ARENA_PREPARED=0)", False),
            ("compiled once (core.prepared)", True),
        ):
            with override_settings(ARENA_PREPARED=on):
                spent = 0.0
                for i in range(cycles + 3):
                    battle_make(700_000 + made, buffered=True)
                    made += 1
                    c0 = time.process_time()
                    cycle()
                    if i >= 3:  # the first compile the statements (and warm the caches)
                        spent += time.process_time() - c0
                measured[name].append(spent / cycles * 1000)
                # What one cycle sends, its values masked (outside the timing: the log costs CPU of its own).
                battle_make(700_000 + made, buffered=True)
                made += 1
                connection.queries_log.clear()
                with CaptureQueriesContext(connection) as sent:
                    cycle()
                statements[name] = [re.sub(r"'[^']*'|\b\d+\b", "?", q["sql"]) for q in sent.captured_queries]
    print(f"\nprepared: the rater's cycle, CPU ms a cycle ({cycles} a run, {runs} runs alternated):")
    for name, values in measured.items():
        print(f"  {name:<48} CPU {', '.join(f'{v:.2f}' for v in values)}   median {statistics.median(values):.2f}")
    sent_off, sent_on = statements.values()
    print(f"  the same {len(sent_on)} statements sent both ways: {sent_on == sent_off}")


def handlers_compare(requests: int = 300) -> None:
    """The sign-in page through Django's ASGI handler and through the platform's router, in process."""
    import asyncio

    from django.core.asgi import get_asgi_application
    from django.core.wsgi import get_wsgi_application

    from core.asgi import SyncViewsOverWSGI

    django_asgi = get_asgi_application()
    router = SyncViewsOverWSGI(asgi_app=django_asgi, wsgi_app=get_wsgi_application(), threads=10)

    async def one(app: Any) -> None:
        status, _, _ = await asgi_request(app, "GET", "/accounts/login/", headers=[(b"host", b"testserver")])
        assert status == 200, status

    async def timed(app: Any) -> tuple[float, float]:
        for _ in range(20):
            await one(app)
        c0, t0 = time.process_time(), time.perf_counter()
        for _ in range(requests):
            await one(app)
        return (time.process_time() - c0) / requests * 1000, (time.perf_counter() - t0) / requests * 1000

    async def compare() -> dict[str, list[tuple[float, float]]]:
        runs: dict[str, list[tuple[float, float]]] = defaultdict(list)
        for _ in range(3):
            for name, app in (("Django's ASGI handler", django_asgi), ("the router (core/asgi.py)", router)):
                runs[name].append(await timed(app))
        return runs

    runs = asyncio.run(compare())
    print(
        f"\nhandlers: the sign-in page in process through the ASGI protocol (ms a request, {requests} a run, 3 runs):"
    )
    for name, values in runs.items():
        cpu = ", ".join(f"{c:.2f}" for c, _ in values)
        wall = ", ".join(f"{w:.2f}" for _, w in values)
        print(f"  {name:<48} CPU {cpu}   wall {wall}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--votes", type=int, default=300)
    parser.add_argument("--cycles", type=int, default=100, help="next + page + vote cycles from a warm buffer")
    parser.add_argument("--profile", action="store_true", help="also cProfile the votes: the top functions")
    parser.add_argument(
        "--profile-cycle",
        action="store_true",
        help="cProfile the cycles by CPU time (not wall: the machine's other jobs stretch waits, not CPU)",
    )
    args = parser.parse_args()
    setup_django(
        os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/arena_bench_vote"),
        os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/15"),
    )
    import django.contrib.auth
    from django.contrib.sessions.backends.db import SessionStore
    from django.db import connection
    from django.db.backends.base.base import BaseDatabaseWrapper
    from django.test import Client
    from django.test.utils import CaptureQueriesContext
    from django.urls import reverse

    import battles.selectors
    import battles.services
    import battles.services.vote
    import battles.views
    import core.ratelimits
    import ranking.services
    import raters.middleware

    rater, campaign, battle_make = world()
    client = Client()
    client.force_login(rater)

    timers = Timers()
    parts = {
        "session: load": (SessionStore, "load"),
        "auth: the user": (django.contrib.auth, "get_user"),
        "tenant scope": (raters.middleware, "_principal_scope_value"),
        "rate limits (2, one Redis call)": (core.ratelimits, "limits_count"),
        "battle read": (battles.selectors, "battle_for_rater"),
        "study gate": (battles.views, "_study_gate"),
        "vote_submit (its statement, on-commit)": (battles.services, "vote_submit"),
        "  pool check": (battles.selectors, "rater_in_campaign_pool"),
        "  log fields (answers, turns)": (battles.services.vote, "_conversation_log"),
        "  webhook event": (battles.services.vote, "webhook_event_emit"),
        "  commit": (BaseDatabaseWrapper, "_commit"),
        "  recompute scheduling (Redis, on commit)": (ranking.services, "leaderboards_schedule"),
        "attention warning": (battles.services, "attention_warning"),
    }
    for part, (owner, attribute) in parts.items():
        timers.wrap(owner, attribute, part)

    def vote(battle: Any) -> float:
        t0 = time.perf_counter()
        response = client.post(reverse("battles:vote", args=[battle.pk]), {"choice": "left"})
        elapsed = time.perf_counter() - t0
        assert response.status_code == 302, response.content[:500]
        return elapsed

    vote(battle_make(0))  # warm: the first request's imports and caches
    timers.current.clear()
    battle = battle_make(1)
    with CaptureQueriesContext(connection) as captured:
        vote(battle)
    timers.current.clear()
    print(f"queries of one vote: {len(captured.captured_queries)}")
    for i, query in enumerate(captured.captured_queries, 1):
        print(f"  {i:2d}. {label(query['sql'])}")

    totals = []
    profiler = cProfile.Profile() if args.profile else None
    for i in range(args.votes):
        battle = battle_make(i + 2)
        timers.current.clear()
        if profiler is not None:
            profiler.enable()
        totals.append(vote(battle))
        if profiler is not None:
            profiler.disable()
        timers.close_vote(list(parts))
    if profiler is not None:
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(60)
    print(f"\nparts of a vote request (median ms over {len(totals)} votes, inclusive):")
    for part in parts:
        print(f"  {part:<48} {statistics.median(timers.per_vote[part]) * 1000:7.2f}")
    ordered = sorted(totals)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    print(f"  {'total (the request through every middleware)':<48} {statistics.median(totals) * 1000:7.2f}"
          f"   p99 {p99 * 1000:.2f}")  # fmt: skip

    # A rater's whole cycle from a warm buffer, as the load benchmark's raters do it: next, page, vote.
    cycles: dict[str, list[float]] = defaultdict(list)
    cycle_profiler = cProfile.Profile(time.process_time) if args.profile_cycle else None
    backend_cpu = _backend_cpu_reader()
    backend_spent = 0.0
    # The buffer filled first, as the load benchmark's is: each claim finds the oldest of what is left.
    for i in range(args.cycles):
        battle_make(args.votes + 10 + i, buffered=True)
    for _ in range(args.cycles):
        if cycle_profiler is not None:
            cycle_profiler.enable()
        b0 = backend_cpu()
        t0, c0 = time.perf_counter(), time.process_time()
        response = client.post(reverse("battles:next", args=[campaign.pk]))
        t1 = time.perf_counter()
        assert response.status_code == 302, response.content[:500]
        page = client.get(response["Location"])
        t2 = time.perf_counter()
        assert page.status_code == 200 and b'name="choice"' in page.content
        voted = client.post(response["Location"] + "vote/", {"choice": "left"})
        t3, c3 = time.perf_counter(), time.process_time()
        backend_spent += backend_cpu() - b0
        if cycle_profiler is not None:
            cycle_profiler.disable()
        assert voted.status_code == 302, voted.content[:500]
        for name, seconds in (("next", t1 - t0), ("page", t2 - t1), ("vote", t3 - t2), ("cycle", t3 - t0)):
            cycles[name].append(seconds)
        cycles["cycle CPU"].append(c3 - c0)
    if cycle_profiler is not None:
        print(f"\nthe {args.cycles} cycles by CPU time (cProfile with process_time), top functions by own time:")
        pstats.Stats(cycle_profiler).sort_stats("tottime").print_stats(40)
        pstats.Stats(cycle_profiler).sort_stats("cumulative").print_stats(80)
    cycle_ms = statistics.median(cycles["cycle"]) * 1000
    cycle_cpu_ms = statistics.median(cycles["cycle CPU"]) * 1000
    print(f"\na rater's cycle from a warm buffer (median ms over {args.cycles}):")
    for name in ("next", "page", "vote", "cycle"):
        print(f"  {name:<48} {statistics.median(cycles[name]) * 1000:7.2f}")
    # This process's CPU (Django's and the test client's, not PostgreSQL's): what the machine's other jobs
    # disturb far less than the wall time above.
    print(f"  {'cycle, CPU of this process':<48} {cycle_cpu_ms:7.2f}")
    if backend_spent:
        # The statements' cost on the server's side: the session's backend process (clock ticks summed over
        # the cycles, so a mean, not a median).
        print(f"  {'cycle, CPU of the PostgreSQL backend (mean)':<48} {backend_spent / args.cycles * 1000:7.2f}")
    print(f"  {'= votes/s one core could serve (1000 / cycle)':<48} {1000 / cycle_ms:7.1f}")

    # The floor under any cycle of this stack: the same three requests (POST, GET, POST with the same session,
    # CSRF and every middleware: session, user, tenant scope) to a view that does nothing.
    from django.http import HttpRequest, HttpResponse
    from django.test.utils import override_settings
    from django.urls import path
    from django.views.decorators.http import require_http_methods

    @require_http_methods(["GET", "POST"])
    def nothing(request: HttpRequest) -> HttpResponse:
        return HttpResponse(b"x" * 10_000)

    floor_urls = type("FloorUrls", (), {"urlpatterns": [path("floor/", nothing)]})
    floors = []
    with override_settings(ROOT_URLCONF=floor_urls):
        for i in range(args.cycles + 5):
            t0, c0 = time.perf_counter(), time.process_time()
            for method in (client.post, client.get, client.post):
                assert method("/floor/").status_code == 200
            if i >= 5:
                floors.append((time.perf_counter() - t0, time.process_time() - c0))
    floor_ms = statistics.median(wall for wall, _ in floors) * 1000
    floor_cpu_ms = statistics.median(cpu for _, cpu in floors) * 1000
    print(f"  {'floor: the same 3 requests to a do-nothing view':<48} {floor_ms:7.2f}   CPU {floor_cpu_ms:.2f}")
    print(f"  {'= the cycle over its floor':<48} {cycle_ms / floor_ms:7.1f} x   by CPU "
          f"{cycle_cpu_ms / floor_cpu_ms:.1f} x")  # fmt: skip

    handlers_compare()
    bridges_compare(campaign, rater, battle_make)
    prepared_compare(campaign, rater, battle_make)

    # The baseline on the same connection: a round trip, a single-row insert, a fresh connection.
    with connection.cursor() as cursor:
        cursor.execute("CREATE TEMP TABLE IF NOT EXISTS bench_vote (id bigserial PRIMARY KEY, battle bigint, "
                       "choice varchar(16), decision_ms integer, created_at timestamptz)")  # fmt: skip
        rounds, inserts = [], []
        for _ in range(300):
            t0 = time.perf_counter()
            cursor.execute("SELECT 1")
            rounds.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            cursor.execute(
                "INSERT INTO bench_vote (battle, choice, decision_ms, created_at) VALUES (1, 'left', 1200, now())"
            )
            inserts.append(time.perf_counter() - t0)
    connects = []
    for _ in range(30):
        connection.close()
        t0 = time.perf_counter()
        connection.ensure_connection()
        connects.append(time.perf_counter() - t0)
    print("\nbaseline (median ms):")
    print(f"  {'one round trip (SELECT 1)':<48} {statistics.median(rounds) * 1000:7.3f}")
    print(f"  {'one single-row INSERT, autocommit':<48} {statistics.median(inserts) * 1000:7.3f}")
    print(f"  {'a new connection (DB_CONN_MAX_AGE=0)':<48} {statistics.median(connects) * 1000:7.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
