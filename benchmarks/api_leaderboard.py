"""API benchmark: the latest leaderboard of a 200-competitor campaign under 50 concurrent API clients.

    python benchmarks/api_leaderboard.py [--clients 50] [--seconds 20] [--workers 4]

Loads (once; reused on later runs) into the PostgreSQL database named by BENCH_DATABASE_URL (default: a
local database arena_bench_api) a campaign of 200 competitors with a real snapshot (Bradley-Terry with
bootstrap intervals over 100,000 synthetic votes, computed by ``ranking.compute.board_compute`` as a
recompute would, written as the overall raw snapshot), a read API key, and a published board. Then
starts a real server (gunicorn, several sync workers, on loopback, against the benchmark database) and
reads ``GET /api/v1/campaigns/<id>/leaderboard/`` with the key from ``clients`` concurrent clients for
``seconds`` seconds. With locust installed (the ``benchmark`` extra) the load is locust's, headless;
otherwise a thread pool of plain HTTP clients.

Measured in the same run, as the reference: the smallest authenticated endpoint,
``GET /api/v1/campaigns/<id>/publication/`` (key lookup, tenant scope, one campaign read, a few
hundred bytes), under the same load. Printed: p50/p95/p99 and req/s of both, and the ratio.

Target (issue 10): latest leaderboard p95 <= 50 ms.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TARGET_P95_MS = 50.0
N_COMPETITORS = 200
N_VOTES = 100_000
SETTINGS = "arena.settings.test"  # fast hashing, no per-rater rate limits; the API's own throttles raised below


def setup_django(url: str) -> None:
    from benchmarks.database import database_ensure

    database_ensure(url)
    os.environ["DATABASE_URL"] = url
    os.environ.pop("REDIS_URL", None)
    os.environ["DJANGO_SETTINGS_MODULE"] = SETTINGS
    os.environ["LOG_LEVEL"] = "WARNING"
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def load(seed: int = 0) -> tuple[int, str]:
    """The campaign's id and a fresh read key (keys are stored hashed: a new one each run)."""
    from django.db import transaction

    from battles.models import Campaign, Competitor
    from ranking.compute import Method, board_compute
    from ranking.models import LeaderboardSnapshot
    from ranking.policy import STYLE_FEATURES, ExclusionPolicy, VoteArrays
    from ranking.services import board_publish
    from raters.models import Membership, Organization, Role
    from raters.services import api_key_create
    from raters.tenancy import scopes_disabled
    from serving.models import ModelEndpoint

    slug = f"api-bench-{N_COMPETITORS}"
    with scopes_disabled():
        campaign = Campaign.objects.filter(slug=slug).first()
        if campaign is None:
            with transaction.atomic():
                from django.contrib.auth.models import User

                owner = User.objects.create_user(username="api-bench", email="api-bench@bench.test")
                org = Organization.objects.create(name="API bench", slug="api-bench")
                Membership.objects.create(user=owner, organization=org, role=Role.OWNER)
                campaign = Campaign.objects.create(
                    organization=org, name="API bench", slug=slug, status=Campaign.Status.OPEN
                )
                endpoints = ModelEndpoint.objects.bulk_create(
                    ModelEndpoint(
                        organization=org, name=f"bench-model-{i:03d}", url="127.0.0.1:9", model_name="zen-bigram"
                    )
                    for i in range(N_COMPETITORS)
                )
                competitors = Competitor.objects.bulk_create(
                    Competitor(organization=org, campaign=campaign, endpoint=e, version_label="2026-12")
                    for e in endpoints
                )
                ids = np.array(sorted(c.pk for c in competitors), dtype=np.int64)
                rng = np.random.default_rng(seed)
                a = rng.integers(0, N_COMPETITORS, N_VOTES)
                b = (a + rng.integers(1, N_COMPETITORS, N_VOTES)) % N_COMPETITORS
                strength = rng.normal(0, 1, N_COMPETITORS)
                p_left = 1 / (1 + np.exp(-(strength[a] - strength[b])))
                outcome = np.where(rng.random(N_VOTES) < 0.1, 2, np.where(rng.random(N_VOTES) < p_left, 0, 1))
                zeros = np.zeros(N_VOTES, dtype=np.int64)
                votes = VoteArrays(
                    vote_id=np.arange(1, N_VOTES + 1, dtype=np.int64),
                    left=ids[a],
                    right=ids[b],
                    outcome=outcome.astype(np.int64),
                    decision_ms=zeros + 5000,
                    rater=zeros,
                    prompt=np.arange(N_VOTES, dtype=np.int64) % 1000,
                    category=zeros,
                    categories=("",),
                    identity=np.zeros(N_VOTES, dtype=bool),
                    style_left=np.zeros((N_VOTES, len(STYLE_FEATURES))),
                    style_right=np.zeros((N_VOTES, len(STYLE_FEATURES))),
                )
                method = Method(rounds=20)
                labels = {c.pk: f"{c.model_name} {c.version_label}" for c in competitors}
                board = board_compute(votes, ids, labels, method, view="raw")
                excluded = {k: 0 for k in ("too_fast", "identity_leak", "over_prompt_cap", "over_rater_cap")}
                LeaderboardSnapshot.objects.create(
                    organization=org,
                    campaign=campaign,
                    category="",
                    view="raw",
                    version=1,
                    last_vote_id=N_VOTES,
                    votes_total=N_VOTES,
                    votes_used=N_VOTES,
                    method=method.as_dict(view="raw"),
                    policy=ExclusionPolicy().as_dict(),
                    excluded={**excluded, "flagged_rater": 0, "total": 0},
                    rows=board.rows,
                    pairwise=board.pairwise,
                    pairwise_arrays=board.pairwise_arrays,
                    extra=board.extra,
                )
                board_publish(campaign=campaign, actor=owner)
        _, key = api_key_create(organization=campaign.organization, name="bench", scope="read", actor=None)
    return campaign.pk, key


def serialize_ms(campaign_id: int) -> float:
    """What a cache miss costs: loading the snapshot row and serializing it (best of 5, in process)."""
    from ranking.apis.leaderboards import _snapshot_body
    from ranking.models import LeaderboardSnapshot
    from raters.tenancy import scopes_disabled

    best = float("inf")
    with scopes_disabled():
        for _ in range(5):
            t0 = time.perf_counter()
            snapshot = (
                LeaderboardSnapshot.objects.select_related("campaign")
                .defer("pairwise", "pairwise_arrays")
                .get(campaign_id=campaign_id, version=1)
            )
            _snapshot_body(snapshot, include_pairwise=False)
            best = min(best, (time.perf_counter() - t0) * 1000)
    return best


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(port: int, workers: int) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": SETTINGS,
        "LOG_LEVEL": "WARNING",
        # The per-key API throttle would answer 429 to one key read by 50 clients flat out.
        "ARENA_API_KEY_RATE": "100000000/m",
    }
    gunicorn = Path(sys.executable).with_name("gunicorn")
    server = subprocess.Popen(
        [
            str(gunicorn),
            "arena.wsgi:application",
            "-w",
            str(workers),
            "-b",
            f"127.0.0.1:{port}",
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env=env,
    )
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/schema/", timeout=2).close()
            return server
        except urllib.error.HTTPError:
            return server  # the server answers (whatever the status)
        except OSError:
            time.sleep(0.3)
    server.terminate()
    raise SystemExit("the server did not come up")


def stop_server(server: subprocess.Popen[bytes]) -> None:
    server.terminate()
    try:
        server.wait(timeout=20)
    except subprocess.TimeoutExpired:
        server.kill()


def warm(url: str, key: str, workers: int) -> int:
    """A few reads first, so every worker has the serialized snapshot cached; returns its size."""
    size = 0
    for _ in range(workers * 4):
        request = urllib.request.Request(url, headers={"Authorization": f"Api-Key {key}"})
        with urllib.request.urlopen(request, timeout=30) as response:
            size = len(response.read())
    return size


def _pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q)) if values else float("nan")


def run_threads(url: str, key: str, clients: int, seconds: int) -> dict[str, Any]:
    """``clients`` threads, each a client requesting as fast as answers come, for ``seconds``."""
    latencies: list[float] = []
    errors = [0]
    lock = threading.Lock()
    stop_at = time.perf_counter() + seconds

    def client() -> None:
        mine: list[float] = []
        failed = 0
        headers = {"Authorization": f"Api-Key {key}"}
        while time.perf_counter() < stop_at:
            t0 = time.perf_counter()
            try:
                with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=30) as response:
                    response.read()
                mine.append((time.perf_counter() - t0) * 1000)
            except OSError:
                failed += 1
        with lock:
            latencies.extend(mine)
            errors[0] += failed

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=clients) as pool:
        for _ in range(clients):
            pool.submit(client)
    elapsed = time.perf_counter() - started
    return {
        "requests": len(latencies),
        "errors": errors[0],
        "p50_ms": _pct(latencies, 50),
        "p95_ms": _pct(latencies, 95),
        "p99_ms": _pct(latencies, 99),
        "rps": len(latencies) / elapsed,
        "client": "threads",
    }


LOCUSTFILE = """
import os
from locust import FastHttpUser, constant, task

class Reader(FastHttpUser):
    wait_time = constant(0)

    @task
    def read(self):
        self.client.get(os.environ["BENCH_PATH"], headers={"Authorization": "Api-Key " + os.environ["BENCH_KEY"]})
"""


def run_locust(base: str, path: str, key: str, clients: int, seconds: int) -> dict[str, Any]:
    """Locust headless, its CSV stats read back."""
    workdir = Path(tempfile.mkdtemp(prefix="arena-locust-"))
    try:
        (workdir / "locustfile.py").write_text(LOCUSTFILE)
        locust = Path(sys.executable).with_name("locust")
        subprocess.run(
            [
                str(locust),
                "-f",
                str(workdir / "locustfile.py"),
                "--headless",
                "-u",
                str(clients),
                "-r",
                str(clients),
                "-t",
                f"{seconds}s",
                "--host",
                base,
                "--csv",
                str(workdir / "out"),
                "--only-summary",
                "--loglevel",
                "WARNING",
            ],
            env={**os.environ, "BENCH_PATH": path, "BENCH_KEY": key},
            check=False,
            capture_output=True,
        )
        with open(workdir / "out_stats.csv") as handle:
            row = next(r for r in csv.DictReader(handle) if r["Name"] == "Aggregated")
        return {
            "requests": int(row["Request Count"]),
            "errors": int(row["Failure Count"]),
            "p50_ms": float(row["50%"]),
            "p95_ms": float(row["95%"]),
            "p99_ms": float(row["99%"]),
            "rps": float(row["Requests/s"]),
            "client": "locust",
        }
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def measure(base: str, path: str, key: str, clients: int, seconds: int) -> dict[str, Any]:
    if shutil.which("locust", path=str(Path(sys.executable).parent)):
        return run_locust(base, path, key, clients, seconds)
    return run_threads(base + path, key, clients, seconds)


def run(*, clients: int = 50, seconds: int = 20, workers: int | None = None) -> dict[str, Any]:
    setup_django(os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/arena_bench_api"))
    campaign_id, key = load()
    uncached_ms = serialize_ms(campaign_id)
    workers = workers or max(2, min(8, (os.cpu_count() or 2)))
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    leaderboard = f"/api/v1/campaigns/{campaign_id}/leaderboard/"
    baseline = f"/api/v1/campaigns/{campaign_id}/publication/"
    server = start_server(port, workers)
    try:
        size = warm(base + leaderboard, key, workers)
        warm(base + baseline, key, workers)
        board = measure(base, leaderboard, key, clients, seconds)
        floor = measure(base, baseline, key, clients, seconds)
    finally:
        stop_server(server)
    return {
        "competitors": N_COMPETITORS,
        "clients": clients,
        "seconds": seconds,
        "workers": workers,
        "response_bytes": size,
        "uncached_serialize_ms": uncached_ms,
        "leaderboard": board,
        "baseline": floor,
        "p95_ratio": board["p95_ms"] / floor["p95_ms"] if floor["p95_ms"] else float("nan"),
        "target_p95_ms": TARGET_P95_MS,
        "meets_target": board["p95_ms"] <= TARGET_P95_MS,
        "cpus": os.cpu_count(),
        "load_average": os.getloadavg()[0],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument("--workers", type=int, default=None)
    args = parser.parse_args()
    result = run(clients=args.clients, seconds=args.seconds, workers=args.workers)
    board, floor = result["leaderboard"], result["baseline"]
    print(
        f"{result['competitors']} competitors, {result['clients']} clients for {result['seconds']} s, "
        f"{result['workers']} gunicorn workers, {board['client']} clients, {result['cpus']} CPUs "
        f"(load {result['load_average']:.1f}); leaderboard response {result['response_bytes']} bytes, "
        f"{result['uncached_serialize_ms']:.1f} ms to load and serialize on a cache miss"
    )
    for name, r in (("latest leaderboard", board), ("baseline (publication)", floor)):
        print(
            f"  {name:24s} p50 {r['p50_ms']:7.1f} ms  p95 {r['p95_ms']:7.1f} ms  p99 {r['p99_ms']:7.1f} ms  "
            f"{r['rps']:7.1f} req/s  ({r['requests']} requests, {r['errors']} errors)"
        )
    print(
        f"  ratio p95 leaderboard / baseline: {result['p95_ratio']:.2f}; target p95 <= {TARGET_P95_MS:.0f} ms: "
        f"{'met' if result['meets_target'] else 'NOT met'}"
    )
    print(json.dumps(result, default=str))


if __name__ == "__main__":
    main()
