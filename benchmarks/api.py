"""The REST API's benchmarks (issue 10), one command:

    python benchmarks/api.py [--only export,leaderboard,shadow] [--quick]

Runs, each in its own process (each sets up Django against its own benchmark database, named by its
BENCH_DATABASE_URL default), and each printing its figures with the baseline it measures in the same run:

  export       benchmarks/api_export.py       vote log as JSON lines over HTTP from PostgreSQL: rows/s vs a
                                              raw COPY of the same rows, server peak RSS at 100k and 1M votes
                                              (targets >= 50,000 rows/s, <= 300 MB, flat)
  leaderboard  benchmarks/api_leaderboard.py  latest leaderboard of 200 competitors under 50 concurrent clients:
                                              p50/p95/p99 vs the smallest authenticated endpoint (target p95 <= 50 ms)
  shadow       benchmarks/api_shadow.py       shadow battles imported in validated batches: battles/s vs bulk ORM
                                              inserts with nothing validated (target >= 500 battles/s)

``--quick`` runs smaller sizes (100,000 votes, 10 s of load, 5,000 battles) for a first look; the targets are
stated for the full sizes. The exit status is non-zero when a part fails to run (a missed target is printed,
not an error: the figures are what a benchmark is for).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

PARTS: dict[str, tuple[str, list[str], list[str]]] = {
    # name: (script, full-size arguments, quick arguments)
    "export": ("api_export.py", [], ["--votes", "100000"]),
    "leaderboard": ("api_leaderboard.py", [], ["--seconds", "10"]),
    "shadow": ("api_shadow.py", [], ["--battles", "5000", "--single", "100"]),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default=",".join(PARTS), help="comma-separated parts: " + ", ".join(PARTS))
    parser.add_argument("--quick", action="store_true", help="smaller sizes for a first look")
    args = parser.parse_args(argv)
    chosen = [name.strip() for name in args.only.split(",") if name.strip()]
    unknown = [name for name in chosen if name not in PARTS]
    if unknown:
        parser.error(f"unknown part(s): {', '.join(unknown)}")
    failed = []
    for name in chosen:
        script, full, quick = PARTS[name]
        command = [sys.executable, str(HERE / script), *(quick if args.quick else full)]
        print(f"\n=== {name}: {' '.join(command[1:])}", flush=True)
        started = time.perf_counter()
        code = subprocess.call(command)
        print(f"=== {name}: exit {code} after {time.perf_counter() - started:.0f} s", flush=True)
        if code != 0:
            failed.append(name)
    if failed:
        print(f"\nfailed to run: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
