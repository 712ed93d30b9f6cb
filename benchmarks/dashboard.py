"""The managers' dashboard at a million votes: each aggregate, the whole page, the rater CSV and a page of the
rater-report API, against one scan of the log measured in the same run.

    python benchmarks/dashboard.py [--votes 1000000] [--competitors 50] [--days 60]

Loads (once; reused on later runs) a campaign of ``--votes`` votes among ``--competitors`` competitors and
200 raters, spread over ``--days`` days, into BENCH_DATABASE_URL (default: a local PostgreSQL database
arena_bench_dashboard; ranking_e2e's loader), then times:

  floor       SELECT COUNT(*), AVG(decision_ms) over the campaign's votes (one scan of the log)
  per-day     votes and active raters per UTC day
  coverage    voted battles per pair
  counts, one read   per-day, coverage, histogram and vote counts from the page's one read of the log
  histogram   decision times in bins
  raters      per-rater reports (pace over active time, median decision, gold accuracy, agreement)
  cadence     pairs of active competitors under the threshold in 7 days
  page        the dashboard's view, rendered (every query above and the SVG)
  csv         every rater's report as CSV
  api         one page (50) of GET /api/v1/campaigns/<id>/raters/report/
  page, cached / csv, cached   the same again with the log unchanged: the per-rater figures (pure
              functions of the append-only log) come from the cache, keyed on the log's state
  page, after a vote / api, after a vote   the first view after a new vote: the entry for the log's
              state gone, the latest one a vote older, so the view serves it (labelled) and queues
              the refresh (here dropped: a worker would run it). Simulated in the cache, so that
              the loaded log stays as it is

Every other figure is timed with the cache emptied first. It prints each in seconds with its ratio to
the floor. Goal (issue 23.3): the page opens in at most 2 s at a million votes, fresh (nothing cached).
The log is vacuumed after the load, as autovacuum leaves an append-only log, so that the dashboard's read
is an index-only scan of the covering index (migration ranking 0017).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest import mock

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.ranking_e2e import load, setup_django  # noqa: E402

GOAL_S = 2.0  # issue 23.3: the dashboard at a million votes opens in <= 2 s fresh


def timed(fn: Callable[[], Any], repeat: int = 2, cold: bool = True) -> float:
    """The best of ``repeat`` runs (the first also warms PostgreSQL's buffers). ``cold``: the platform's
    cache (this process's own: the benchmark runs without Redis) is emptied before each run, so the
    per-rater figures cached on the log's state are computed every time."""
    from django.core.cache import cache

    best = float("inf")
    for _ in range(repeat):
        if cold:
            cache.clear()
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def run(*, votes: int, competitors: int, days: int) -> dict[str, float]:
    from django.contrib.auth.models import User
    from django.db import connection
    from django.test import Client
    from django.urls import reverse
    from django_scopes import scopes_disabled

    from battles.models import Campaign
    from ranking import selectors
    from raters.models import Membership, Role

    started = time.perf_counter()
    with scopes_disabled():
        campaign_id = load(votes, competitors, 1, spread_days=days)
        campaign = Campaign.objects.get(pk=campaign_id)
        manager, _ = User.objects.get_or_create(username=f"manager-{campaign_id}", defaults={"email": "m@bench.test"})
        Membership.objects.get_or_create(user=manager, organization=campaign.organization, role=Role.MANAGER)
    print(f"campaign {campaign_id}: {votes:,} votes, {competitors} competitors, {days} days "
          f"(ready in {time.perf_counter() - started:.0f} s)")  # fmt: skip
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE battles_vote")

    def floor() -> None:
        with connection.cursor() as cursor:
            cursor.execute("SELECT COUNT(*), AVG(decision_ms) FROM battles_vote WHERE campaign_id = %s", [campaign_id])

    client = Client()
    client.force_login(manager)
    page_url = reverse("ranking:campaign-dashboard", args=[campaign_id])
    csv_url = reverse("ranking:campaign-raters-csv", args=[campaign_id])
    api_url = reverse("api-rater-reports", args=[campaign_id])

    def get(url: str) -> Callable[[], None]:
        def fetch() -> None:
            response = client.get(url)
            assert response.status_code == 200, (url, response.status_code)

        return fetch

    with scopes_disabled():
        results = {
            "floor": timed(floor),
            "per-day": timed(
                lambda: (selectors.votes_per_day(campaign=campaign), selectors.active_raters_per_day(campaign=campaign))
            ),
            "coverage": timed(lambda: selectors.pair_coverage(campaign=campaign)),
            "counts, one read": timed(lambda: selectors.dashboard_counts(campaign=campaign)),
            "histogram": timed(lambda: selectors.decision_time_histogram(campaign=campaign)),
            "raters": timed(lambda: selectors.rater_reports(campaign=campaign)),
            "cadence": timed(lambda: selectors.cadence(campaign=campaign)),
        }
    results["page"] = timed(get(page_url))
    results["csv"] = timed(get(csv_url))
    results["api"] = timed(get(api_url))
    get(page_url)()  # the log's figures cached; the next views read them
    results["page, cached"] = timed(get(page_url), cold=False)
    results["csv, cached"] = timed(get(csv_url), cold=False)
    results.update(after_a_vote(campaign, {"page, after a vote": get(page_url), "api, after a vote": get(api_url)}))
    base = results["floor"]
    for name, seconds in results.items():
        print(f"{name:18s} {seconds:8.2f} s   {seconds / base:6.1f} x floor")
    verdict = "met" if results["page"] <= GOAL_S else "NOT met"
    print(f"goal: the page <= {GOAL_S:g} s at {votes:,} votes, fresh (cold cache): {results['page']:.2f} s = "
          f"{results['page'] / GOAL_S:.2f} x the goal, {results['page'] / base:.1f} x one scan of the log: {verdict}; "
          f"a view of the same log again "
          f"{results['page, cached']:.2f} s, the first after a vote {results['page, after a vote']:.2f} s; "
          f"load average {os.getloadavg()[0]:.1f}")  # fmt: skip
    return results


def after_a_vote(campaign: Any, views: dict[str, Callable[[], None]]) -> dict[str, float]:
    """Each view timed as the first one after a new vote: the cache holds the per-rater figures of the log
    one vote back (its latest entry), none for the log as it stands, and no refresh is queued yet."""
    from django.core.cache import cache
    from django_scopes import scopes_disabled

    from ranking import selectors, tasks
    from ranking.selectors import log_cache
    from ranking.services import rater_figures as rater_figures_services

    with scopes_disabled():
        figures = selectors.rater_figures_compute(campaign=campaign)
    exact = log_cache._log_key(selectors.RATER_FIGURES, campaign.pk, [], figures.mark)
    latest = log_cache._log_key(selectors.RATER_FIGURES, campaign.pk, [], None)
    older = (figures.value, [figures.votes - 1, *figures.mark[1:]], figures.computed_at.isoformat())
    out = {}
    with mock.patch.object(tasks.rater_figures_refresh_task, "delay"):  # queued nowhere: a worker would run it
        for name, view in views.items():

            def first_after_a_vote(view: Callable[[], None] = view) -> None:
                cache.delete_many([exact, rater_figures_services._rater_refresh_key(campaign.pk)])
                cache.set(latest, older, selectors.LOG_LATEST_S)
                view()

            out[name] = timed(first_after_a_vote, cold=False)
            # Served, not computed: a computation would have stored the figures of the log as it stands.
            assert cache.get(exact) is None, f"{name}: the view computed the per-rater figures"
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--votes", type=int, default=1_000_000)
    parser.add_argument("--competitors", type=int, default=50)
    parser.add_argument("--days", type=int, default=60)
    args = parser.parse_args(argv)
    setup_django(os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/arena_bench_dashboard"))
    run(votes=args.votes, competitors=args.competitors, days=args.days)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
