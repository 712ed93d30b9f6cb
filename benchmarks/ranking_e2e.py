"""End-to-end ranking benchmark: PostgreSQL vote log -> every leaderboard snapshot of a campaign (issue 23.3).

    python benchmarks/ranking_e2e.py [--votes 10000000] [--competitors 300] [--categories 5]

Loads (once; reused on later runs) a campaign of 10,000,000 votes among 300 competitors in 5 categories into
the database named by BENCH_DATABASE_URL (default: a local PostgreSQL database arena_bench_e), generated
inside PostgreSQL (``load_generated``: INSERT ... SELECT, the log's indexes built after), then measures in the
same run:

  floor     the counts: one GROUP BY (category, pair, outcome) over the log through COPY, reduced to cells
  recompute leaderboards_recompute: exclusion policy, overall + every category, raw ("auto": the bootstrap by
            prompt, 100 rounds) + style-controlled (analytic intervals) + reliability-weighted (rater
            bootstrap), rank ranges, pairwise tables, Elo, snapshots written

and prints both, the ratio, the peak memory of the process and the load average. Goal: recompute <= 60 s,
peak <= 2 GB on the 2-core machine (``--goal-s``, ``--goal-mib``).
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
from typing import Any

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
    campaign, comp_ids, rater_pks, prompts, pool_pk = _fixtures(slug, n_competitors, n_categories, rng)
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
    rater_ids = np.array(rater_pks)[rng.integers(0, len(rater_pks), n_votes)]
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
                "organization_id": campaign.organization_id,
                "campaign_id": campaign.pk,
                "rater_id": rater_ids,
                "pool_id": pool_pk,
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
                "organization_id": campaign.organization_id,
                "campaign_id": campaign.pk,
                "battle_id": battle_ids,
                "created_at": now,
                "rater_id": rater_ids,
                "pool_id": pool_pk,
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


def load_generated(n_votes: int, n_competitors: int, n_categories: int, seed: float = 0.25) -> int:
    """A campaign and its log of ``n_votes`` votes generated inside PostgreSQL (``INSERT ... SELECT`` over
    ``generate_series``, 1,000,000 rows a statement, seeded ``random()``): ten million votes load in minutes
    where the pandas loader would build gigabytes of strings. The same model as ``load`` (Bradley-Terry
    strengths, a length effect, 10% ties, 3% both-bad, 1% identity leaks, decisions 0.5-30 s, 20,000 prompts,
    200 raters). The battles table is not filled (the recompute never reads it): the load runs with
    ``session_replication_role = replica``, which skips the foreign-key checks. VACUUM ANALYZE at the end, as
    autovacuum would leave a log this old."""
    from django.db import connection, transaction

    from battles.models import Campaign

    slug = f"gen-{n_votes}-{n_competitors}-{n_categories}"
    existing = Campaign.objects.filter(slug=slug).first()
    if existing is not None and existing.votes.count() == n_votes:
        return existing.pk  # a log loaded before its copy existed was copied by migration ranking 0010
    if existing is not None:
        raise SystemExit(f"campaign {slug} has a partial log; drop the benchmark database and run again")
    rng = np.random.default_rng(0)
    with transaction.atomic():
        campaign, comp_ids, rater_ids, prompts, pool_id = _fixtures(slug, n_competitors, n_categories, rng)
    strength = rng.normal(0, 0.8, n_competitors)

    def table(name: str, columns: str, rows: list[tuple[Any, ...]]) -> None:
        # Small lookup tables joined by key (a subscript into a large array would detoast it on every row).
        cursor.execute(f"CREATE TEMP TABLE {name} ({columns})")
        with cursor.cursor.copy(f"COPY {name} FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
        cursor.execute(f"ANALYZE {name}")

    params = '{"max_tokens": 256, "seed": 1, "system_prompt": "", "temperature": 0.7, "top_p": 1.0}'
    batch = 1_000_000
    with connection.cursor() as cursor:
        cursor.execute("SET session_replication_role = replica")
        table(
            "gen_comp",
            "k int PRIMARY KEY, id bigint, s float8",
            [(k, int(c), float(strength[k])) for k, c in enumerate(comp_ids)],
        )
        table("gen_rater", "k int PRIMARY KEY, id bigint", [(k, int(r)) for k, r in enumerate(rater_ids)])
        table(
            "gen_prompt",
            "k int PRIMARY KEY, id bigint, hash text, cat text",
            [(k, p.pk, p.text_hash, p.category) for k, p in enumerate(prompts)],
        )
        # The log's secondary indexes are built once after the load, not maintained row by row (those backing
        # a constraint stay).
        cursor.execute(
            "SELECT i.indexname, i.indexdef FROM pg_indexes i JOIN pg_class c ON c.relname = i.indexname "
            "WHERE i.tablename = 'battles_vote' AND NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conindid = c.oid)"
        )
        indexes = cursor.fetchall()
        for name, _ in indexes:
            cursor.execute(f'DROP INDEX "{name}"')
        cursor.execute("SELECT setseed(%s)", [seed])
        for done in range(0, n_votes, batch):
            t0 = time.perf_counter()
            rows = min(batch, n_votes - done)
            cursor.execute(
                f"""
                INSERT INTO battles_vote (organization_id, campaign_id, battle_id, created_at, rater_id, pool_id,
                  prompt_id, prompt_hash, category, language, prompt_source, left_id, right_id, left_model,
                  left_version, left_tokens, left_finish_reason, left_latency_s, right_model, right_version,
                  right_tokens, right_finish_reason, right_latency_s, params, choice, decision_ms, left_style,
                  right_style, prompt_asks_identity, answer_names_model, source)
                SELECT {campaign.organization_id}, {campaign.pk}, gen_random_uuid(), now(), gr.id,
                  {pool_id}, gp.id, gp.hash, gp.cat, 'en', 'pool', ca.id, cb.id, 'm', '1', g.tl, 'stop', 1.0,
                  'm', '1', g.tr, 'stop', 1.0, '{params}'::jsonb,
                  CASE WHEN g.u < 0.1 THEN 'tie' WHEN g.u < 0.13 THEN 'both_bad'
                       WHEN g.v < 1 / (1 + exp(-(ca.s - cb.s + 0.4 * ln(g.tl::float8 / g.tr)))) THEN 'left'
                       ELSE 'right' END,
                  g.decision, jsonb_build_object('bold', g.bl, 'code_blocks', 0, 'headers', g.hl,
                  'list_items', g.ll, 'tokens', g.tl), jsonb_build_object('bold', g.br, 'code_blocks', 0,
                  'headers', g.hr, 'list_items', g.lr, 'tokens', g.tr), g.identity, false, 'generated'
                FROM (
                  SELECT i, a, (a + 1 + d) % {n_competitors} AS b, p, rater, tl, tr, u, v, decision, identity,
                    hl, hr, ll, lr, bl, br
                  FROM (
                    SELECT i, floor(random() * {n_competitors})::int AS a,
                      floor(random() * {n_competitors - 1})::int AS d,
                      floor(random() * {len(prompts)})::int AS p, floor(random() * {len(rater_ids)})::int
                      AS rater, 100 + floor(random() * 200)::int AS tl, 100 + floor(random() * 200)::int AS tr,
                      random() AS u, random() AS v, 500 + floor(random() * 29500)::int AS decision,
                      random() < 0.01 AS identity, floor(random() * 3)::int AS hl, floor(random() * 3)::int AS hr,
                      floor(random() * 7)::int AS ll, floor(random() * 7)::int AS lr, floor(random() * 3)::int
                      AS bl, floor(random() * 3)::int AS br
                    FROM generate_series(1, {rows}) AS i
                  ) x
                ) g
                JOIN gen_comp ca ON ca.k = g.a JOIN gen_comp cb ON cb.k = g.b JOIN gen_rater gr ON gr.k = g.rater
                JOIN gen_prompt gp ON gp.k = g.p
                ORDER BY g.i
                """
            )
            print(f"  {done + rows:,} votes written ({time.perf_counter() - t0:.0f} s for this million)", flush=True)
        cursor.execute("SET session_replication_role = origin")
        cursor.execute("SET maintenance_work_mem = '512MB'")
        t0 = time.perf_counter()
        for _, definition in indexes:
            cursor.execute(definition)
        print(f"  {len(indexes)} indexes built in {time.perf_counter() - t0:.0f} s", flush=True)
    # The load bypassed the triggers, so the log's narrow copy that the recompute reads (ranking_logvote) is
    # written here, once, as the trigger would have written it vote by vote.
    from ranking.services import log_copy_backfill

    t0 = time.perf_counter()
    copied = log_copy_backfill(campaign_id=campaign.pk)
    print(f"  {copied:,} votes copied to the recompute's narrow copy in {time.perf_counter() - t0:.0f} s", flush=True)
    with connection.cursor() as cursor:
        cursor.execute("VACUUM (ANALYZE) battles_vote")
        cursor.execute("VACUUM (ANALYZE) ranking_logvote")
    return campaign.pk


def _fixtures(
    slug: str, n_competitors: int, n_categories: int, rng: np.random.Generator
) -> tuple[Any, np.ndarray, list[int], list[Any], int]:
    """The campaign, its competitors (ids), 200 raters, 20,000 prompts and a pool."""
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
    return campaign, np.array([c.pk for c in competitors]), [r.pk for r in raters], prompts, pool.pk


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def floor_counts(campaign_id: int) -> float:
    """The floor: the kept votes' counts per (category, pair, outcome) read from PostgreSQL (one GROUP BY
    over the log, through COPY) and reduced to cells; the least a recompute of every board must do."""
    from django.db import connection

    from ranking.estimators import aggregate_cells

    t0 = time.perf_counter()
    sql = (
        "SELECT category, left_id, right_id, CASE choice WHEN 'left' THEN 0 WHEN 'right' THEN 1 WHEN 'tie' THEN 2 "
        f"ELSE 3 END AS o, count(*) FROM battles_vote WHERE campaign_id = {int(campaign_id)} AND source <> 'gold' "
        "GROUP BY 1, 2, 3, 4"
    )
    buffer = io.BytesIO()
    with connection.cursor() as cursor:
        with cursor.cursor.copy(f"COPY ({sql}) TO STDOUT WITH (FORMAT csv)") as copy:
            for chunk in copy:
                buffer.write(chunk)
    buffer.seek(0)
    frame = pd.read_csv(buffer, header=None, names=["category", "left", "right", "outcome", "n"])
    ids = np.unique(np.concatenate([frame["left"].to_numpy(), frame["right"].to_numpy()]))
    aggregate_cells(
        np.searchsorted(ids, frame["left"].to_numpy()),
        np.searchsorted(ids, frame["right"].to_numpy()),
        frame["outcome"].to_numpy(),
        n_competitors=len(ids),
        count=frame["n"].to_numpy(),
    )
    return time.perf_counter() - t0


def loadavg() -> str:
    return Path("/proc/loadavg").read_text().split(" ", 3)[:3].__str__() if Path("/proc/loadavg").exists() else "?"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--votes", type=int, default=10_000_000)
    parser.add_argument("--competitors", type=int, default=300)
    parser.add_argument("--categories", type=int, default=5)
    parser.add_argument("--goal-s", type=float, default=60.0)
    parser.add_argument("--goal-mib", type=float, default=2048.0)
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
    setup_django(os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/arena_bench_e"))

    from ranking.services import leaderboards_recompute
    from raters.tenancy import scopes_disabled

    # Outside a request or a tenant task no organisation scope is active; the benchmark reads and
    # writes one campaign of its own, as beat's safety net does across organisations.
    with scopes_disabled():
        campaign_id = load_generated(args.votes, args.competitors, args.categories)
    if args.load_only:
        return 0
    rss_before = peak_mib()
    print(f"load average before: {loadavg()}", flush=True)
    with scopes_disabled():
        floor_counts(campaign_id)  # warms PostgreSQL's and the OS's caches for both measurements
        floor = floor_counts(campaign_id)
    print(f"load average after the floor: {loadavg()}", flush=True)

    t0, cpu0 = time.perf_counter(), time.process_time()
    with scopes_disabled():
        snapshots = leaderboards_recompute(campaign_id=campaign_id)
    recompute, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    peak = peak_mib()
    print(f"load average after the recompute: {loadavg()}", flush=True)
    ok = recompute <= args.goal_s and peak <= args.goal_mib
    print(f"{'stage':48s} {'seconds':>8s} {'x floor':>8s}")
    print(f"{'floor: the counts per (category, pair, outcome)':48s} {floor:8.2f} {1.0:8.1f}")
    print(
        f"{'recompute: all ' + str(len(snapshots)) + ' snapshots':48s} {recompute:8.2f} {recompute / floor:8.1f}"
        f"   goal <= {args.goal_s:.0f} s {'met' if recompute <= args.goal_s else 'MISSED'}"
    )
    print(
        f"  this process's CPU time {cpu:.1f} s (PostgreSQL's own not counted): on a shared machine the wall "
        "seconds are the load's as much as the recompute's"
    )
    print(
        f"peak memory {peak:.0f} MiB (before measuring {rss_before:.0f} MiB)   goal <= {args.goal_mib:.0f} MiB "
        f"{'met' if peak <= args.goal_mib else 'MISSED'}"
    )
    slow = sorted(snapshots, key=lambda s: -s.compute_seconds)[:4]
    print(
        "slowest snapshots: " + ", ".join(f"{s.category or 'overall'}/{s.view} {s.compute_seconds:.2f} s" for s in slow)
    )
    print(f"snapshots' own compute: {sum(s.compute_seconds for s in snapshots):.1f} s (the rest: reading the log)")
    overall = {s.view: s for s in snapshots if s.category == ""}
    for view, snap in overall.items():
        note = snap.extra.get("per_vote_sample") or snap.extra.get("elo_sample")
        if note:
            print(f"  overall/{view}: fitted on {note['votes']:,} of {note['of']:,} kept votes")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
