"""Generation-worker benchmark: battles per second through the generation queue, 1, 2 and 4 workers.

    python benchmarks/generation.py [--battles 40] [--fast-ms 300] [--slow-ms 400] [--workers 1,2,4]

Starts a real Triton server with two delay models (fixed delays, 4 instances each, so up to 4 battles
run at once), and, for each worker count N, N real Celery worker processes (``celery worker -Q
generation --pool=solo``: one battle at a time each) on a Redis broker (BENCH_REDIS_URL, default
redis://127.0.0.1:6379/15, flushed first) and the PostgreSQL database BENCH_DATABASE_URL (default a
local database arena_bench_generation). It queues ``--battles`` battles of a campaign between the two
models (as a buffer fill does: a battle row, then its task) and times until every one is ready.

The ideal, for comparison: each battle takes the slower side's delay when both sides run at once, so N
workers can finish N / slow battles a second; the ratio measured / ideal is printed for each N (1.0 is
perfect; the gap is the queue, the database writes and the two gRPC calls per battle).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def setup_django(url: str, redis_url: str) -> None:
    from benchmarks.database import database_ensure

    database_ensure(url)
    os.environ["DATABASE_URL"] = url
    os.environ["REDIS_URL"] = redis_url
    os.environ["DJANGO_SETTINGS_MODULE"] = "arena.settings.local"
    os.environ["ARENA_MODEL_HOSTS"] = "127.0.0.0/8"
    os.environ["LOG_LEVEL"] = "WARNING"
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def start_workers(n: int) -> list[subprocess.Popen[str]]:
    env = {**os.environ}
    return [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "arena",
                "worker",
                "--pool=solo",
                "--queues=generation",
                "--loglevel=WARNING",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
                f"--hostname=bench-{i}@%h",
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        for i in range(n)
    ]


def stop(workers: list[subprocess.Popen[str]]) -> None:
    for worker in workers:
        worker.terminate()
    for worker in workers:
        try:
            worker.wait(timeout=20)
        except subprocess.TimeoutExpired:
            worker.kill()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--battles", type=int, default=40)
    parser.add_argument("--fast-ms", type=int, default=300)
    parser.add_argument("--slow-ms", type=int, default=400)
    parser.add_argument("--workers", default="1,2,4")
    args = parser.parse_args(argv)
    counts = [int(x) for x in args.workers.split(",")]
    redis_url = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/15")
    setup_django(
        os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/arena_bench_generation"), redis_url
    )

    import redis
    from django.utils import timezone

    from battles.models import Battle, Campaign, Competitor, Prompt
    from battles.prompting import prompt_hash
    from battles.tasks import battle_generate_task
    from benchmarks.fanout import CONFIG
    from benchmarks.fanout import MODEL as DELAY_MODEL
    from raters.models import Organization
    from raters.tenancy import scopes_disabled
    from serving.models import ModelEndpoint
    from serving.triton.server import TritonServer

    redis.Redis.from_url(redis_url).flushdb()
    with tempfile.TemporaryDirectory(prefix="arena-generation-") as tmp:
        root = Path(tmp)
        for name, delay in (("bench-fast", args.fast_ms), ("bench-slow", args.slow_ms)):
            (root / name / "1").mkdir(parents=True)
            (root / name / "config.pbtxt").write_text(CONFIG.format(delay_ms=delay, instances=4))
            (root / name / "1" / "model.py").write_text(DELAY_MODEL)
        with TritonServer([root]) as server, scopes_disabled():
            organization, _ = Organization.objects.get_or_create(slug="bench-gen", defaults={"name": "Generation"})
            campaign, _ = Campaign.objects.get_or_create(
                organization=organization,
                slug="bench-gen",
                defaults={"name": "bench", "status": "open", "buffer_size": 0},
            )
            competitors = []
            for name in ("bench-fast", "bench-slow"):
                endpoint, _ = ModelEndpoint.objects.update_or_create(
                    organization=organization, name=name, defaults={"url": server.grpc_url, "model_name": name}
                )
                competitor, _ = Competitor.objects.get_or_create(
                    organization=organization, campaign=campaign, endpoint=endpoint, defaults={"version_label": "1"}
                )
                competitors.append(competitor)
            prompt, _ = Prompt.objects.get_or_create(
                organization=organization,
                campaign=campaign,
                text="benchmark prompt",
                defaults={"text_hash": prompt_hash("benchmark prompt")},
            )
            print(f"{args.battles} battles per run; delay models {args.fast_ms} / {args.slow_ms} ms (4 instances each)")
            print(f"{'workers':>8s} {'seconds':>8s} {'battles/s':>10s} {'ideal/s':>8s} {'ratio':>6s}")
            for n in counts:
                workers = start_workers(n)
                try:
                    time.sleep(4)  # the workers connect
                    battles = Battle.objects.bulk_create(
                        Battle(
                            organization=organization,
                            campaign=campaign,
                            prompt=prompt,
                            left=competitors[i % 2],
                            right=competitors[1 - i % 2],
                            params={**campaign.sampling_params(), "seed": i},
                        )
                        for i in range(args.battles)
                    )
                    ids = [b.pk for b in battles]
                    started = time.perf_counter()
                    for battle in battles:
                        battle_generate_task.delay(str(battle.pk), organization_id=organization.pk)
                    pending = Battle.objects.filter(pk__in=ids, status=Battle.Status.GENERATING)
                    while pending.exists():
                        if any(w.poll() is not None for w in workers):
                            raise SystemExit("a worker exited")
                        time.sleep(0.02)
                    seconds = time.perf_counter() - started
                finally:
                    stop(workers)
                failed = Battle.objects.filter(pk__in=ids).exclude(status=Battle.Status.READY).count()
                rate = args.battles / seconds
                ideal = n / (args.slow_ms / 1000)
                print(
                    f"{n:8d} {seconds:8.2f} {rate:10.2f} {ideal:8.2f} {rate / ideal:6.2f}"
                    + (f"  ({failed} voided)" if failed else "")
                )
                Battle.objects.filter(pk__in=ids).update(
                    status=Battle.Status.VOID, void_reason="benchmark", ready_at=timezone.now()
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
