"""Load: raters requesting battles and voting through the real HTTP stack, against the raw insert rate.

    python benchmarks/load.py [--raters 8] [--seconds 20] [--web-workers 2] [--worker-concurrency 4] [--web asgi|wsgi]

Starts the stack of tests/reliability/stack.py on loopback, all of its own (a PostgreSQL cluster made by
initdb in a temporary folder, Redis, Triton with the fast test models zen-bigram and stdlib-trigram,
gunicorn with uvicorn workers and production settings, a Celery worker on both queues), then in one run:

  baseline  pgbench on the same cluster: clients inserting one row each transaction into a table shaped
            like the vote log's (what PostgreSQL alone takes: inserts/s)
  peak      ``--raters`` raters, each in a closed loop (log in once; then next battle, the preparing
            page's poll on the page's own schedule: at once, then from 1 s growing by a quarter, the
            battle page, the vote, with the session cookie and CSRF token), for
            ``--seconds``: sustained votes/s, p50 / p99 of the vote and next-battle requests, errors
  half      the same raters paced to half of the peak's votes/s: the vote's p50 / p99 there

Every vote's answer is counted against the rows stored (0 lost, 0 doubled). Targets (issue 8): votes/s
>= 0.30 x the pgbench insert rate; vote p99 <= 100 ms at half of peak. The machine's load (``uptime``)
is printed before and after: the figures are only comparable at similar load.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.reliability.stack import PG_BIN, Ledger, Rater, Refused, Stack  # noqa: E402

PGBENCH_SCRIPT = """\\set battle random(1, 1000000000)
INSERT INTO bench_vote (battle, choice, decision_ms, created_at) VALUES (:battle, 'left', 1200, now());
"""


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def pgbench_inserts(stack: Stack, clients: int, seconds: int, folder: Path) -> float:
    """Rows/s of single-row INSERT transactions by pgbench into a vote-shaped table (indexed id)."""
    assert stack.pg is not None
    stack.pg.query(
        "CREATE TABLE IF NOT EXISTS bench_vote (id bigserial PRIMARY KEY, battle bigint NOT NULL, "
        "choice varchar(16) NOT NULL, decision_ms integer NOT NULL, created_at timestamptz NOT NULL)"
    )
    script = folder / "insert.sql"
    script.write_text(PGBENCH_SCRIPT)
    pgbench = PG_BIN / "pgbench" if PG_BIN is not None and (PG_BIN / "pgbench").exists() else Path("pgbench")
    out = subprocess.run(
        [str(pgbench), "-n", "-h", "127.0.0.1", "-p", str(stack.pg.port), "-U", "postgres", "-c", str(clients),
         "-j", "2", "-T", str(seconds), "-f", str(script), "arena"],
        capture_output=True, text=True, check=True, timeout=seconds + 60,
    ).stdout  # fmt: skip
    for line in out.splitlines():
        if line.startswith("tps = "):
            return float(line.split()[2])
    raise RuntimeError(f"no tps in pgbench's output:\n{out}")


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def drive(raters: list[Rater], seconds: float, interval_s: float | None) -> tuple[Ledger, float]:
    """Each rater battles and votes until time is up; ``interval_s``: one battle per interval each
    (paced), None: as fast as the stack answers (closed loop). The ledger and the elapsed seconds."""
    ledger = Ledger()
    end = time.monotonic() + seconds

    def run(index: int, rater: Rater) -> None:
        # Paced raters start spread over one interval, so the arrivals are even.
        next_at = time.monotonic() + (interval_s or 0) * index / len(raters)
        while True:
            if interval_s is not None:
                time.sleep(max(0.0, next_at - time.monotonic()))
                next_at += interval_s
            if time.monotonic() >= end:
                return
            try:
                rater.battle_and_vote(ledger)
            except (Refused, TimeoutError, OSError, ValueError) as exc:
                with ledger.lock:
                    ledger.errors[f"flow {type(exc).__name__}"] += 1

    t0 = time.monotonic()
    threads = [threading.Thread(target=run, args=(i, r), daemon=True) for i, r in enumerate(raters)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=seconds + 120)
    return ledger, time.monotonic() - t0


def summary(name: str, ledger: Ledger, elapsed: float, stack: Stack) -> dict[str, object]:
    stored = stack.stored_votes()
    counts = ledger.check(type(stored)({b: n for b, n in stored.items() if b in set(ledger.acknowledged)}))
    votes = ledger.latencies.get("vote", [])
    nexts = ledger.latencies.get("next", [])
    result: dict[str, object] = {
        "phase": name,
        "votes_per_s": round(len(ledger.acknowledged) / elapsed, 2),
        "vote_p50_ms": round(percentile(votes, 0.5) * 1000, 1),
        "vote_p99_ms": round(percentile(votes, 0.99) * 1000, 1),
        "next_p50_ms": round(percentile(nexts, 0.5) * 1000, 1),
        "next_p99_ms": round(percentile(nexts, 0.99) * 1000, 1),
        "errors": dict(ledger.errors),
        **counts,
    }
    print(f"{name:>5}: {len(ledger.acknowledged)} votes in {elapsed:.1f} s = {result['votes_per_s']} votes/s; "
          f"vote p50 {result['vote_p50_ms']} ms p99 {result['vote_p99_ms']} ms; next p50 {result['next_p50_ms']} "
          f"ms p99 {result['next_p99_ms']} ms; errors {dict(ledger.errors) or 0}; lost {counts['lost']}, "
          f"doubled {counts['doubled']}", flush=True)  # fmt: skip
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--raters", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=20.0, help="each of the peak and half phases")
    parser.add_argument("--web-workers", type=int, default=2)
    parser.add_argument("--worker-concurrency", type=int, default=4)
    parser.add_argument(
        "--web", choices=("asgi", "wsgi"), default="asgi", help="uvicorn (the deployment's) or sync workers"
    )
    parser.add_argument("--poll-s", type=float, default=1.0, help="the preparing page's first poll interval")
    parser.add_argument("--pgbench-clients", type=int, default=8)
    parser.add_argument("--pgbench-seconds", type=int, default=5)
    args = parser.parse_args()

    print(f"before: {uptime()}", flush=True)
    with tempfile.TemporaryDirectory(prefix="arena-load-") as tmp:
        folder = Path(tmp)
        stack = Stack(folder, web_workers=args.web_workers, worker_concurrency=args.worker_concurrency,
                      raters=args.raters, web_server=args.web)  # fmt: skip
        try:
            t0 = time.monotonic()
            stack.start()
            print(f"stack up in {time.monotonic() - t0:.0f} s", flush=True)
            raters = [stack.rater(i, poll_s=args.poll_s) for i in range(args.raters)]
            drive(raters, 3.0, None)  # warm-up: connections, the worker's first tasks, the pages' caches
            inserts = pgbench_inserts(stack, args.pgbench_clients, args.pgbench_seconds, folder)
            print(f"pgbench: {inserts:.0f} single-row inserts/s ({args.pgbench_clients} clients)", flush=True)
            peak_ledger, elapsed = drive(raters, args.seconds, None)
            peak = summary("peak", peak_ledger, elapsed, stack)
            rate = float(peak["votes_per_s"])  # type: ignore[arg-type]
            half_ledger, elapsed = drive(raters, args.seconds, args.raters / max(rate / 2, 0.01))
            half = summary("half", half_ledger, elapsed, stack)
        except BaseException:
            print(stack.logs())
            raise
        finally:
            stack.stop()
    ratio = rate / inserts
    print(f"votes/s at peak / pgbench inserts/s = {ratio:.4f} (target >= 0.30); vote p99 at half of peak "
          f"{half['vote_p99_ms']} ms (target <= 100 ms)")  # fmt: skip
    print(f"after: {uptime()}")
    print(json.dumps({"pgbench_inserts_per_s": round(inserts, 1), "peak": peak, "half": half, "ratio": ratio}))
    lost = int(peak["lost"]) + int(half["lost"])  # type: ignore[call-overload]
    doubled = int(peak["doubled"]) + int(half["doubled"])  # type: ignore[call-overload]
    return 1 if lost or doubled else 0


if __name__ == "__main__":
    raise SystemExit(main())
