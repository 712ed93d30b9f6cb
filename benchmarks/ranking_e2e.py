"""End-to-end ranking benchmark: PostgreSQL vote log -> every leaderboard snapshot of a campaign.

    python benchmarks/ranking_e2e.py [--votes 1000000] [--competitors 200] [--categories 5]

Loads (once; reused on later runs) a campaign of 1,000,000 votes among 200 competitors in 5 categories
into the database named by BENCH_DATABASE_URL (default: a local PostgreSQL database arena_bench), then
measures in the same run:

  floor     read the vote log into arrays (COPY) and count the (pair, outcome) cells
  recompute leaderboards_recompute: exclusion policy, overall + every category, raw (100-round
            bootstrap) + style-controlled (analytic intervals) + reliability-weighted (rater
            bootstrap, rounds capped on big boards), rank ranges, pairwise tables, Elo, snapshots
            written

and prints both, the ratio, and the peak memory of the process. Target: recompute <= 20 s, peak <= 2 GB.
"""

from __future__ import annotations

import argparse
import io
import os
import resource
import sys
import time
import uuid
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def setup_django(url: str) -> None:
    from benchmarks.database import database_ensure

    database_ensure(url)
    os.environ["DATABASE_URL"] = url
    os.environ.pop("REDIS_URL", None)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "arena.settings.local")
    os.environ["LOG_LEVEL"] = "WARNING"
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def _copy(table: str, frame: pd.DataFrame) -> None:
    from django.db import connection

    buffer = io.StringIO()
    frame.to_csv(buffer, index=False, header=False)
    data = buffer.getvalue().encode()
    with connection.cursor() as cursor:
        # NULL '\\N': an empty field is an empty string (the log's text columns are NOT NULL), not NULL.
        sql = f"COPY {table} ({', '.join(frame.columns)}) FROM STDIN WITH (FORMAT csv, NULL '\\N')"
        with cursor.cursor.copy(sql) as copy:
            step = 8 << 20
            for start in range(0, len(data), step):
                copy.write(data[start : start + step])


def load(n_votes: int, n_competitors: int, n_categories: int, seed: int = 0, spread_days: int = 0) -> int:
    """Create the benchmark campaign and its vote log with COPY; return the campaign id. With
    ``spread_days`` the votes are spread over that many days before now (in time order per rater, as a
    real log is), else all are stamped now."""
    from django.db import transaction

    from battles.models import Campaign

    slug = f"bench-{n_votes}-{n_competitors}-{n_categories}" + (f"-d{spread_days}" if spread_days else "")
    existing = Campaign.objects.filter(slug=slug).first()
    if existing is not None and existing.votes.count() == n_votes:
        return existing.pk
    if existing is not None:
        raise SystemExit(f"campaign {slug} has a partial log; drop the benchmark database and run again")
    with transaction.atomic():  # all or nothing: an interrupted load leaves no partial campaign behind
        return _load(slug, n_votes, n_competitors, n_categories, np.random.default_rng(seed), spread_days)


def _load(
    slug: str, n_votes: int, n_competitors: int, n_categories: int, rng: np.random.Generator, spread_days: int = 0
) -> int:
    from django.contrib.auth import get_user_model

    from battles.models import Campaign, Competitor, Prompt
    from battles.prompting import CATEGORIES, prompt_hash
    from raters.models import Organization, RaterPool
    from serving.models import ModelEndpoint

    organization, _ = Organization.objects.get_or_create(slug="bench", defaults={"name": "Benchmark"})
    pool = RaterPool.objects.create(organization=organization, name=f"pool {slug}")
    campaign = Campaign.objects.create(
        organization=organization,
        name=slug,
        slug=slug,
        status=Campaign.Status.OPEN,
        min_decision_ms=1500,
        ranking_min_votes=50,
    )
    endpoints = ModelEndpoint.objects.bulk_create(
        ModelEndpoint(organization=organization, name=f"{slug}-m{i}", url="127.0.0.1:1", model_name=f"m{i}")
        for i in range(n_competitors)
    )
    competitors = Competitor.objects.bulk_create(
        Competitor(organization=organization, campaign=campaign, endpoint=e, version_label="1") for e in endpoints
    )
    raters = get_user_model().objects.bulk_create(
        get_user_model()(username=f"r{i}-{slug}", email=f"r{i}-{slug}@bench.test", password="!") for i in range(200)
    )
    categories = CATEGORIES[:n_categories]
    texts = [f"benchmark prompt {i}" for i in range(20_000)]
    prompts = Prompt.objects.bulk_create(
        Prompt(
            organization=organization,
            campaign=campaign,
            text=t,
            text_hash=prompt_hash(t),
            category=categories[i % n_categories],
            language="en",
        )
        for i, t in enumerate(texts)
    )

    comp_ids = np.array([c.pk for c in competitors])
    strength = rng.normal(0, 0.8, n_competitors)
    a = rng.integers(0, n_competitors, n_votes)
    b = (a + rng.integers(1, n_competitors, n_votes)) % n_competitors
    tokens_l = rng.poisson(200, n_votes) + 1
    tokens_r = rng.poisson(200, n_votes) + 1
    logit = strength[a] - strength[b] + 0.4 * np.log(tokens_l / tokens_r)
    u = rng.random(n_votes)
    left_wins = rng.random(n_votes) < 1 / (1 + np.exp(-logit))
    outcome = np.where(u < 0.1, 2, np.where(u < 0.13, 3, np.where(left_wins, 0, 1)))
    choice = np.array(["left", "right", "tie", "both_bad"])[outcome]
    prompt_idx = rng.integers(0, len(prompts), n_votes)
    prompt_ids = np.array([p.pk for p in prompts])[prompt_idx]
    prompt_hashes = np.array([p.text_hash for p in prompts], dtype=object)[prompt_idx]
    prompt_cats = np.array([p.category for p in prompts], dtype=object)[prompt_idx]
    rater_ids = np.array([r.pk for r in raters])[rng.integers(0, len(raters), n_votes)]
    battle_ids = [str(uuid.UUID(int=int(x))) for x in rng.integers(1, 2**62, n_votes)]
    now: str | list[str] = pd.Timestamp.now(tz="UTC").isoformat()
    if spread_days:
        # Sorted times: the log's ids then follow time, as an append-only log's do.
        offsets = np.sort(rng.random(n_votes))[::-1] * spread_days * 86_400
        now = list((pd.Timestamp.now(tz="UTC") - pd.to_timedelta(offsets, unit="s")).map(pd.Timestamp.isoformat))
    params = '{"max_tokens": 256, "seed": 1, "system_prompt": "", "temperature": 0.7, "top_p": 1.0}'

    def style(tokens: np.ndarray) -> list[str]:
        headers = rng.poisson(1, n_votes)
        lists = rng.poisson(3, n_votes)
        bold = rng.poisson(1, n_votes)
        return [
            f'{{"bold": {x}, "code_blocks": 0, "headers": {h}, "list_items": {li}, "tokens": {t}}}'
            for t, h, li, x in zip(tokens, headers, lists, bold, strict=True)
        ]

    _copy(
        "battles_battle",
        pd.DataFrame(
            {
                "id": battle_ids,
                "organization_id": organization.pk,
                "campaign_id": campaign.pk,
                "rater_id": rater_ids,
                "pool_id": pool.pk,
                "prompt_id": prompt_ids,
                "left_id": comp_ids[a],
                "right_id": comp_ids[b],
                "status": "voted",
                "void_reason": "",
                "params": params,
                "session_key": "",
                "live": False,
                "created_at": now,
                "ready_at": now,
                "shown_at": now,
                "voted_at": now,
                "requested_at": now,
            }
        ),
    )
    _copy(
        "battles_vote",
        pd.DataFrame(
            {
                "organization_id": organization.pk,
                "campaign_id": campaign.pk,
                "battle_id": battle_ids,
                "created_at": now,
                "rater_id": rater_ids,
                "pool_id": pool.pk,
                "prompt_id": prompt_ids,
                "prompt_hash": prompt_hashes,
                "category": prompt_cats,
                "language": "en",
                "prompt_source": "pool",
                "left_id": comp_ids[a],
                "right_id": comp_ids[b],
                "left_model": "m",
                "left_version": "1",
                "left_tokens": tokens_l,
                "left_finish_reason": "stop",
                "left_latency_s": 1.0,
                "right_model": "m",
                "right_version": "1",
                "right_tokens": tokens_r,
                "right_finish_reason": "stop",
                "right_latency_s": 1.0,
                "params": params,
                "choice": choice,
                "decision_ms": rng.integers(500, 30_000, n_votes),
                "left_style": style(tokens_l),
                "right_style": style(tokens_r),
                "prompt_asks_identity": rng.random(n_votes) < 0.01,
                "answer_names_model": False,
            }
        ),
    )
    return campaign.pk


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--votes", type=int, default=1_000_000)
    parser.add_argument("--competitors", type=int, default=200)
    parser.add_argument("--categories", type=int, default=5)
    parser.add_argument("--load-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if not args.load_only:
        # Load in a child process, so the peak memory measured here is the recompute's, not the loader's.
        import subprocess

        t0 = time.perf_counter()
        subprocess.run(
            [
                sys.executable,
                __file__,
                "--load-only",
                "--votes",
                str(args.votes),
                "--competitors",
                str(args.competitors),
                "--categories",
                str(args.categories),
            ],
            check=True,
        )
        print(
            f"vote log ready ({args.votes:,} votes, {args.competitors} competitors, {args.categories} "
            f"categories) in {time.perf_counter() - t0:.1f} s (not part of any figure)",
            flush=True,
        )
    setup_django(os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/arena_bench"))

    from ranking.estimators import aggregate_cells
    from ranking.selectors import vote_arrays
    from ranking.services import leaderboards_recompute
    from raters.tenancy import scopes_disabled

    # Outside a request or a tenant task no organisation scope is active; the benchmark reads and
    # writes one campaign of its own, as beat's safety net does across organisations.
    with scopes_disabled():
        campaign_id = load(args.votes, args.competitors, args.categories)
    if args.load_only:
        return 0
    rss_before = peak_mib()

    t0 = time.perf_counter()
    with scopes_disabled():
        votes = vote_arrays(campaign_id=campaign_id)
    ids = np.unique(np.concatenate([votes.left, votes.right]))
    aggregate_cells(
        np.searchsorted(ids, votes.left), np.searchsorted(ids, votes.right), votes.outcome, n_competitors=len(ids)
    )
    floor = time.perf_counter() - t0
    del votes

    t0 = time.perf_counter()
    with scopes_disabled():
        snapshots = leaderboards_recompute(campaign_id=campaign_id)
    recompute = time.perf_counter() - t0
    peak = peak_mib()
    print(f"{'stage':44s} {'seconds':>8s} {'x floor':>8s}")
    print(f"{'floor: read log into arrays + count cells':44s} {floor:8.2f} {1.0:8.1f}")
    print(
        f"{'recompute: all ' + str(len(snapshots)) + ' snapshots':44s} {recompute:8.2f} {recompute / floor:8.1f}"
        f"   target <= 20 s {'ok' if recompute <= 20 else 'MISSED'}"
    )
    print(
        f"peak memory {peak:.0f} MiB (before measuring {rss_before:.0f} MiB)   target <= 2048 MiB "
        f"{'ok' if peak <= 2048 else 'MISSED'}"
    )
    slow = sorted(snapshots, key=lambda s: -s.compute_seconds)[:3]
    print(
        "slowest snapshots: " + ", ".join(f"{s.category or 'overall'}/{s.view} {s.compute_seconds:.2f} s" for s in slow)
    )
    return 0 if recompute <= 20 and peak <= 2048 else 1


if __name__ == "__main__":
    raise SystemExit(main())
