"""Writes for rankings: recompute every leaderboard of a campaign from its vote log, and schedule it."""

from __future__ import annotations

import logging
import time

import numpy as np
from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from django.db.models import Max

from battles.models import Campaign, Competitor

from . import selectors
from .compute import Method, board_compute, elo_compute
from .models import LeaderboardSnapshot

logger = logging.getLogger(__name__)


def method_for(campaign: Campaign) -> Method:
    return Method(
        both_bad="tie" if campaign.both_bad_as_tie else "drop",
        rounds=campaign.ranking_bootstrap_rounds,
        seed=0,
        min_votes=campaign.ranking_min_votes,
        interval=campaign.ranking_interval,  # type: ignore[arg-type]
        style_interval=campaign.ranking_style_interval,  # type: ignore[arg-type]
        anchor=campaign.ranking_anchor_id,
        ties=campaign.ranking_ties,  # type: ignore[arg-type]
    )


def leaderboards_recompute(*, campaign_id: int) -> list[LeaderboardSnapshot]:
    """One new version of every snapshot of the campaign: overall and per category, raw and
    style-controlled, under the campaign's exclusion policy. Computed outside any transaction and
    written in one, so readers see all of a version or none of it."""
    started = time.perf_counter()
    campaign = Campaign.objects.filter(pk=campaign_id).first()
    if campaign is None:  # deleted while the task waited in the queue
        return []
    votes = selectors.vote_arrays(campaign_id=campaign.pk)
    policy = selectors.exclusion_policy_for(campaign)
    keep, excluded = policy.apply(votes)
    excluded_in = policy.counts_by_category(votes)
    kept = votes.subset(keep)
    competitors = list(Competitor.objects.filter(campaign=campaign).select_related("endpoint").order_by("id"))
    competitor_ids = np.array([c.pk for c in competitors], dtype=np.int64)
    labels = {c.pk: f"{c.endpoint.name} {c.version_label}" for c in competitors}
    method = method_for(campaign)
    last_vote_id = int(votes.vote_id.max()) if len(votes) else 0

    drafts = []
    totals = np.bincount(votes.category, minlength=len(votes.categories))
    selections: list[tuple[str, np.ndarray, int]] = [("", np.ones(len(kept), dtype=bool), len(votes))]
    selections += [(name, kept.category == code, int(totals[code])) for code, name in enumerate(kept.categories)]
    for category, mask, total in selections:
        subset = kept.subset(mask)
        for view in (LeaderboardSnapshot.View.RAW, LeaderboardSnapshot.View.STYLE):
            t0 = time.perf_counter()
            # A View member is the str its Literal names ("raw", "style"); mypy cannot relate a
            # TextChoices member to a Literal, as with the campaign's interval choices above.
            board = board_compute(subset, competitor_ids, labels, method, view=view)  # type: ignore[arg-type]
            extra = dict(board.extra)
            if category == "" and view == LeaderboardSnapshot.View.RAW:
                extra["elo"] = elo_compute(kept, competitor_ids, labels, method)
            drafts.append(LeaderboardSnapshot(
                organization_id=campaign.organization_id, campaign=campaign, category=category, view=view,
                last_vote_id=last_vote_id, votes_total=total,
                votes_used=len(subset), method=method.as_dict(view=view), policy=policy.as_dict(),
                excluded=excluded_in[category] if category else excluded,
                rows=board.rows, pairwise=board.pairwise, extra=extra,
                compute_seconds=round(time.perf_counter() - t0, 4),
            ))
    with transaction.atomic():
        # The campaign row lock orders concurrent recomputes; versions never collide or interleave.
        Campaign.objects.select_for_update().filter(pk=campaign.pk).first()
        newest = (LeaderboardSnapshot.objects.filter(campaign=campaign, category="")
                  .order_by("-version").values_list("last_vote_id", "votes_total").first())
        if newest is not None and tuple(newest) > (last_vote_id, len(votes)):
            # A recompute that read the log later committed first: this one is out of date. (The count
            # catches a vote with a lower id that committed after this recompute read the log.)
            logger.info("campaign %s: recompute over %s votes up to id %s dropped; a newer one exists",
                        campaign.pk, len(votes), last_vote_id)
            return []
        version = (LeaderboardSnapshot.objects.filter(campaign=campaign).aggregate(v=Max("version"))["v"] or 0) + 1
        for draft in drafts:
            draft.version = version
        snapshots = LeaderboardSnapshot.objects.bulk_create(drafts)
    logger.info("campaign %s: leaderboards v%s from %s votes (%s kept) in %.2f s", campaign.pk, version,
                len(votes), len(kept), time.perf_counter() - started)
    return snapshots


def _pending_key(campaign_id: int) -> str:
    return f"ranking:recompute-pending:{campaign_id}"


def leaderboards_schedule(*, campaign_id: int) -> bool:
    """Debounced: the first new vote after a recompute schedules one ``ARENA_RANKING_DEBOUNCE_S`` later;
    votes arriving meanwhile ride along. Returns whether a recompute was scheduled."""
    from .tasks import leaderboards_recompute_task

    delay = settings.ARENA_RANKING_DEBOUNCE_S
    if not cache.add(_pending_key(campaign_id), 1, timeout=delay + 300):
        return False
    leaderboards_recompute_task.apply_async(args=[campaign_id], countdown=delay)
    return True


def leaderboards_recompute_pending(*, campaign_id: int) -> list[LeaderboardSnapshot]:
    """What the scheduled task runs: clear the pending mark first, so votes that arrive during the
    computation schedule the next one."""
    cache.delete(_pending_key(campaign_id))
    return leaderboards_recompute(campaign_id=campaign_id)


def leaderboards_schedule_open_campaigns() -> int:
    """Periodic safety net (celery beat): schedule a recompute of every open campaign with votes newer
    than its latest snapshot, through the same debounce as votes (never two queued at once)."""
    count = 0
    for campaign in Campaign.objects.filter(status=Campaign.Status.OPEN):
        newest = campaign.votes.aggregate(v=Max("id"))["v"]
        seen = LeaderboardSnapshot.objects.filter(campaign=campaign).aggregate(v=Max("last_vote_id"))["v"] or 0
        if newest and newest > seen and leaderboards_schedule(campaign_id=campaign.pk):
            count += 1
    return count


def leaderboards_recompute_soon(*, campaign_id: int) -> None:
    """A manager asked for fresh leaderboards: queue a recompute now, past the debounce."""
    from .tasks import leaderboards_recompute_task

    transaction.on_commit(lambda: leaderboards_recompute_task.delay(campaign_id))
