"""Vote log export over HTTP: rows per second and the server's peak memory, at 100,000 and 1,000,000 votes.

    python benchmarks/api_export.py [--votes 1000000]

Loads (once; reused on later runs) campaigns of 100,000 and 1,000,000 votes with the loader of
benchmarks/ranking_e2e.py into the PostgreSQL database named by BENCH_DATABASE_URL (default: a local
database arena_bench_export), then, for each size, in the same run:

  baseline  a raw psycopg ``COPY (SELECT * FROM battles_vote WHERE campaign_id = ...) TO STDOUT`` of the
            same rows, read and dropped (what the database alone can stream)
  export    ``GET /api/v1/campaigns/<id>/votes.jsonl`` from a real server process (gunicorn, one sync
            worker, production settings, an API key), read with a streaming HTTP client that counts
            lines; a fresh server per size, whose peak RSS (VmHWM of /proc/<pid>/status) is read after
            the export

and prints rows/s, the ratio to the baseline, and the server's peak RSS. Targets: >= 50,000 rows/s and
<= 300 MB peak RSS at both sizes (flat memory: the 1M peak is about the 100k one). With ``--python`` it
also times the pure-Python path (``Vote.as_event()`` per row, as on SQLite) in-process over 100,000
votes, for comparison.
"""

from __future__ import annotations

import argparse
import http.client
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/arena_bench_export"
SMALL = 100_000


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _vm(pid: int, field: str) -> float:
    """A /proc/<pid>/status memory field (VmHWM, VmRSS) in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} for pid {pid}")


def _worker_pid(master: int, timeout_s: float = 30.0) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        children = Path(f"/proc/{master}/task/{master}/children").read_text().split()
        if children:
            return int(children[0])
        time.sleep(0.1)
    raise RuntimeError("gunicorn started no worker")


class Server:
    """gunicorn serving the platform (production settings, DEBUG off) against the benchmark database."""

    def __init__(self, database_url: str) -> None:
        self.port = _free_port()
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "arena.settings.base",
            "DATABASE_URL": database_url,
            "SECRET_KEY": "benchmark-only-secret-key-benchmark-only-secret-key",
            "DEBUG": "false",
            "ALLOWED_HOSTS": "127.0.0.1",
            "SECURE_SSL_REDIRECT": "false",
            "SECURE_HSTS_SECONDS": "0",
            "SESSION_COOKIE_SECURE": "false",
            "CSRF_COOKIE_SECURE": "false",
            "LOG_LEVEL": "WARNING",
        }
        env.pop("REDIS_URL", None)
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gunicorn",
                "arena.wsgi:application",
                "--workers",
                "1",
                "--bind",
                f"127.0.0.1:{self.port}",
                "--timeout",
                "600",
                "--log-level",
                "warning",
            ],
            cwd=ROOT,
            env=env,
        )
        self.worker = _worker_pid(self.process.pid)
        self._wait_ready()

    def _wait_ready(self, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
                conn.request("GET", "/api/v1/schema/")
                conn.getresponse().read()
                conn.close()
                return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError("the server did not start")

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def http_export(port: int, campaign_id: int, key: str) -> tuple[int, int, float]:
    """Rows (lines), bytes and seconds of one streamed export, read in 1 MiB pieces."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    t0 = time.perf_counter()
    conn.request("GET", f"/api/v1/campaigns/{campaign_id}/votes.jsonl", headers={"Authorization": f"Api-Key {key}"})
    response = conn.getresponse()
    if response.status != 200:
        raise RuntimeError(f"export answered {response.status}: {response.read()[:500]!r}")
    rows = size = 0
    while True:
        piece = response.read1(1 << 20)
        if not piece:
            break
        rows += piece.count(b"\n")
        size += len(piece)
    seconds = time.perf_counter() - t0
    conn.close()
    return rows, size, seconds


def copy_baseline(database_url: str, campaign_id: int) -> tuple[int, float]:
    import psycopg

    with psycopg.connect(database_url) as conn, conn.cursor() as cursor:
        t0 = time.perf_counter()
        rows = 0
        sql = f"COPY (SELECT * FROM battles_vote WHERE campaign_id = {int(campaign_id)} ORDER BY id) TO STDOUT"
        with cursor.copy(sql) as copy:
            for chunk in copy:
                rows += bytes(chunk).count(b"\n")
        return rows, time.perf_counter() - t0


def python_path(campaign_id: int) -> tuple[int, float]:
    """The pure-Python export (model rows, ``as_event``, ``json.dumps``), in this process."""
    from battles import exporting, selectors
    from battles.models import Campaign
    from raters.tenancy import scopes_disabled

    with scopes_disabled():
        campaign = Campaign.objects.get(pk=campaign_id)
        votes = selectors.votes_filtered(campaign=campaign)
        t0 = time.perf_counter()
        rows = sum(chunk.count("\n") for chunk in exporting.jsonl_from_events(selectors.vote_events(votes=votes)))
        return rows, time.perf_counter() - t0


def run(*, votes: int = 1_000_000, python: bool = False) -> dict[str, Any]:
    from benchmarks.ranking_e2e import load, setup_django

    database_url = os.environ.get("BENCH_DATABASE_URL", DEFAULT_URL)
    setup_django(database_url)
    from raters.models import Organization
    from raters.services import api_key_create
    from raters.tenancy import scopes_disabled

    sizes = sorted({min(SMALL, votes), votes})
    campaigns: dict[int, int] = {}
    for n in sizes:
        t0 = time.perf_counter()
        with scopes_disabled():
            campaigns[n] = load(n, 200, 5)
        print(f"{n:>9,} votes ready in {time.perf_counter() - t0:.1f} s (not part of any figure)", flush=True)
    with scopes_disabled():
        organization = Organization.objects.get(slug="bench")
        _, key = api_key_create(organization=organization, name="export benchmark", scope="read", actor=None)

    results: dict[str, Any] = {"sizes": {}, "targets": {"rows_per_s": 50_000, "peak_rss_mib": 300}}
    for n in sizes:
        copy_rows, copy_s = copy_baseline(database_url, campaigns[n])
        server = Server(database_url)
        try:
            idle_rss = _vm(server.worker, "VmRSS")
            rows, size, seconds = http_export(server.port, campaigns[n], key)
            peak = _vm(server.worker, "VmHWM")
        finally:
            server.stop()
        if rows != n or copy_rows != n:
            raise RuntimeError(f"expected {n} rows; the export gave {rows}, COPY {copy_rows}")
        entry = {
            "rows": rows,
            "bytes": size,
            "seconds": round(seconds, 3),
            "rows_per_s": round(rows / seconds),
            "mib_per_s": round(size / seconds / 2**20, 1),
            "baseline_copy_s": round(copy_s, 3),
            "baseline_rows_per_s": round(copy_rows / copy_s),
            "ratio_to_copy": round(copy_s / seconds, 3),
            "server_rss_before_mib": round(idle_rss, 1),
            "server_peak_rss_mib": round(peak, 1),
        }
        results["sizes"][n] = entry
        print(
            f"{n:>9,} rows: export {entry['rows_per_s']:>8,} rows/s ({entry['mib_per_s']} MiB/s, {seconds:.2f} s) | "
            f"COPY baseline {entry['baseline_rows_per_s']:>9,} rows/s ({copy_s:.2f} s) | "
            f"ratio {entry['ratio_to_copy']} | "
            f"server RSS {idle_rss:.0f} MiB before, peak {peak:.0f} MiB",
            flush=True,
        )
    if python:
        rows, seconds = python_path(campaigns[sizes[0]])
        results["python_path"] = {"rows": rows, "seconds": round(seconds, 3), "rows_per_s": round(rows / seconds)}
        print(f"{rows:>9,} rows: pure-Python path (as_event per row, in-process) {rows / seconds:,.0f} rows/s")
    worst_rate = min(e["rows_per_s"] for e in results["sizes"].values())
    worst_peak = max(e["server_peak_rss_mib"] for e in results["sizes"].values())
    results["ok"] = worst_rate >= 50_000 and worst_peak <= 300
    print(
        f"slowest {worst_rate:,} rows/s (target >= 50,000), highest peak {worst_peak:.0f} MiB (target <= 300): "
        + ("met" if results["ok"] else "NOT met")
    )
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--votes", type=int, default=1_000_000)
    parser.add_argument("--python", action="store_true", help="also time the pure-Python path over 100k votes")
    args = parser.parse_args(argv)
    run(votes=args.votes, python=args.python)
    return 0  # a missed target is printed, not an error (benchmarks/api.py): the figures are the point


if __name__ == "__main__":
    raise SystemExit(main())
