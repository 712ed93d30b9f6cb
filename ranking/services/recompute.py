"""Recompute every leaderboard of a campaign from its vote log, and schedule it: debounced after votes,
at once for a manager, and beat's safety net over the open campaigns (self-healing marks and leases)."""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
from celery import shared_task
from celery.signals import worker_ready
from django.conf import settings
from django.core.cache import cache
from django.db import connections, transaction
from django.db.models import Max

from battles.models import Campaign, Competitor, Vote
from battles.selectors import campaign_organization_id
from core import queues
from core.tasks import TransactionAwareTask
from raters.models import WebhookEvent
from raters.selectors import rater_attributes_by_key
from raters.services import webhook_event_emit
from raters.tenancy import TenantTask, organization_scope, scopes_disabled

from .. import selectors
from ..board_analyses import board_analyses
from ..compute import Method, board_compute, elo_compute, per_vote_note
from ..models import LeaderboardSnapshot
from ..policy import PER_VOTE_MAX, RELIABILITY_MAX, VoteArrays, sample_mask, sample_rate
from .rater_figures import _rater_figures_warm
from .rater_flags import rater_flags_check_task

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


def _method_record(method: Method, view: str, extra: dict[str, Any]) -> dict[str, Any]:
    """The snapshot's method, with the interval the board actually got where the view chooses it per board
    (the reliability view: the rater bootstrap or, on large boards, the sandwich clustered by rater)."""
    record = method.as_dict(view=view)
    chosen = extra.get("reliability_interval", {}).get("chosen")
    if view == LeaderboardSnapshot.View.RELIABILITY and chosen:
        record["interval"] = chosen
    return record


def leaderboards_recompute(*, campaign_id: int) -> list[LeaderboardSnapshot]:
    """One new version of every snapshot of the campaign: overall and per category, raw,
    style-controlled and reliability-weighted, under the campaign's exclusion policy. Computed outside
    any transaction and written in one, so readers see all of a version or none of it."""
    started = time.perf_counter()
    campaign = Campaign.objects.filter(pk=campaign_id).first()
    if campaign is None:  # deleted while the task waited in the queue
        return []
    policy = selectors.exclusion_policy_for(campaign)
    method = method_for(campaign)
    # Counts for every vote, grouped by PostgreSQL; each vote on its own only in the sample the per-vote
    # views read (style, reliability, Elo: all kept votes up to PER_VOTE_MAX). Grouped by prompt only
    # when the raw view's interval may resample prompts.
    log = selectors.vote_log(
        campaign_id=campaign.pk,
        policy=policy,
        by_prompt=method.interval in ("auto", "cluster_bootstrap"),
        per_vote_max=PER_VOTE_MAX,
    )
    counted, sample = log.counted, log.sample
    # Nested in the sample: the same hash under a lower threshold (RELIABILITY_MAX <= PER_VOTE_MAX).
    reliability_sample = sample.subset(sample_mask(sample.vote_id, sample_rate(log.kept, RELIABILITY_MAX)))
    # Never the gold pseudo-competitors (their votes are not in the arrays either).
    competitors = list(
        Competitor.objects.filter(campaign=campaign, gold=False).select_related("endpoint").order_by("id")
    )
    competitor_ids = np.array([c.pk for c in competitors], dtype=np.int64)
    labels = {c.pk: f"{c.model_name} {c.version_label}" for c in competitors}
    last_vote_id = log.last_vote_id
    # The raters' attributes, for the overall raw board's rater-segment boards (ranking/segments.py).
    rater_attributes = rater_attributes_by_key(
        organization_id=campaign.organization_id, rater_ids=np.unique(sample.rater).tolist()
    )

    drafts = []
    selections: list[tuple[str, int | None, int]] = [("", None, log.total)]
    selections += [(name, code, int(log.totals[code])) for code, name in enumerate(log.categories)]
    for category, code, total in selections:

        def of(rows: VoteArrays, code: int | None = code) -> VoteArrays:
            return rows if code is None else rows.subset(rows.category == code)

        by_vote, paired = of(counted), of(log.paired)
        for view in LeaderboardSnapshot.View:
            t0 = time.perf_counter()
            # Only the raw view's bootstrap by prompt needs the counts per prompt (about one row a vote at
            # scale); the others read the same votes grouped by pair, which aggregate to the same cells.
            subset = by_vote if view == LeaderboardSnapshot.View.RAW else paired
            per_vote = of(reliability_sample if view == LeaderboardSnapshot.View.RELIABILITY else sample)
            # A View member is the str its Literal names ("raw", "style", "reliability"); mypy cannot relate a
            # TextChoices member to a Literal, as with the campaign's interval choices above.
            board = board_compute(
                subset,
                competitor_ids,
                labels,
                method,
                view=view,  # type: ignore[arg-type]
                per_vote=per_vote if view != LeaderboardSnapshot.View.RAW else None,
                prompts=of(log.prompts),
            )
            extra = dict(board.extra)
            if view != LeaderboardSnapshot.View.RAW and per_vote.votes < subset.votes:
                extra["per_vote_sample"] = per_vote_note(per_vote.votes, subset.votes)
            if view == LeaderboardSnapshot.View.RAW:
                # The analyses read cells and counts only: the votes grouped by pair give them exactly, without
                # a pass over every vote each (ten million rows, and as many cells built, per analysis).
                extra.update(
                    board_analyses(
                        paired,
                        of(sample),
                        competitor_ids,
                        labels,
                        method,
                        board,
                        overall=category == "",
                        kept=log.kept,
                        attributes=rater_attributes,
                    )
                )
            if category == "" and view == LeaderboardSnapshot.View.RAW:
                extra["elo"], extra["elo_order"] = elo_compute(sample, competitor_ids, labels, method)
                if len(sample) < subset.votes:
                    extra["elo_sample"] = per_vote_note(len(sample), subset.votes)
            drafts.append(
                LeaderboardSnapshot(
                    organization_id=campaign.organization_id,
                    campaign=campaign,
                    category=category,
                    view=view,
                    last_vote_id=last_vote_id,
                    votes_total=total,
                    votes_used=subset.votes,
                    method=_method_record(method, view, extra),
                    policy=policy.as_dict(),
                    excluded=log.excluded_in[category] if category else log.excluded,
                    rows=board.rows,
                    pairwise=board.pairwise,
                    pairwise_arrays=board.pairwise_arrays,
                    extra=extra,
                    compute_seconds=round(time.perf_counter() - t0, 4),
                )
            )
    with transaction.atomic():
        # The campaign row lock orders concurrent recomputes; versions never collide or interleave.
        Campaign.objects.select_for_update().filter(pk=campaign.pk).first()
        newest = (
            LeaderboardSnapshot.objects.filter(campaign=campaign, category="")
            .order_by("-version")
            .values_list("last_vote_id", "votes_total")
            .first()
        )
        if newest is not None and tuple(newest) > (last_vote_id, log.total):
            # A recompute that read the log later committed first: this one is out of date. (The count
            # catches a vote with a lower id that committed after this recompute read the log.)
            logger.info(
                "campaign %s: recompute over %s votes up to id %s dropped; a newer one exists",
                campaign.pk,
                log.total,
                last_vote_id,
            )
            return []
        version = (LeaderboardSnapshot.objects.filter(campaign=campaign).aggregate(v=Max("version"))["v"] or 0) + 1
        for draft in drafts:
            draft.version = version
        snapshots = LeaderboardSnapshot.objects.bulk_create(drafts)
        if campaign.outlier_alpha is not None or campaign.gold_min_accuracy is not None:
            organization_id = campaign.organization_id
            transaction.on_commit(lambda: rater_flags_check_task.delay(campaign.pk, organization_id=organization_id))
        webhook_event_emit(
            organization_id=campaign.organization_id,
            event=WebhookEvent.LEADERBOARD_UPDATED,
            payload={
                "campaign_id": campaign.pk,
                "version": version,
                "categories": sorted({draft.category for draft in drafts}),
                "views": sorted({draft.view for draft in drafts}),
                "votes_total": log.total,
                "votes_used": log.kept,
                "last_vote_id": last_vote_id,
            },
        )
    logger.info(
        "campaign %s: leaderboards v%s from %s votes (%s kept) in %.2f s",
        campaign.pk,
        version,
        log.total,
        log.kept,
        time.perf_counter() - started,
    )
    return snapshots


# Scheduling is self-healing: no mark outlives the work it stands for by more than ARENA_RANKING_LEASE_S.
#
# - "pending" says a recompute is queued: set by the first new vote, for the debounce plus one lease. A
#   worker that dies holding the delayed task cannot hold the mark longer; the next vote, or beat, then
#   schedules again.
# - "running" says a recompute is computing: set by the task for one lease and renewed by a heartbeat
#   thread while it computes. Beat leaves a campaign alone while its heartbeat beats, and takes over
#   within one lease when the worker died mid-computation.
# - A recompute worker that starts (a supervisor's restart after a kill) re-arms at once every debounced
#   recompute that is due and that nothing computes, for the time its mark says it was due
#   (``leaderboards_rearm``): the delayed task a killed worker held is not delivered again before the
#   broker's visibility timeout, and without the re-arm the board waited for the mark to expire and
#   beat's next tick (61-64 s after a kill with the compose file's settings).
# The broker's visibility timeout (settings) is the last resort: an unacknowledged task of a killed worker
# is delivered again; recomputes are idempotent (a second one over the same votes changes nothing).


def _pending_key(campaign_id: int) -> str:
    return f"ranking:recompute-pending:{campaign_id}"


def _running_key(campaign_id: int) -> str:
    return f"ranking:recompute-running:{campaign_id}"


def leaderboards_schedule(
    *, campaign_id: int, countdown: int | None = None, organization_id: int | None = None
) -> bool:
    """Debounced: the first new vote after a recompute schedules one ``ARENA_RANKING_DEBOUNCE_S`` later
    (or ``countdown`` seconds); votes arriving meanwhile ride along. Returns whether a recompute was
    scheduled. Call it after the change has committed (the receivers run on commit): the pending mark
    is set at once. Raises if the broker refuses the task, after clearing the mark so the next vote
    retries. ``organization_id``: the campaign's, when the caller has it (else it is looked up)."""
    delay = settings.ARENA_RANKING_DEBOUNCE_S if countdown is None else countdown
    return _arm(campaign_id=campaign_id, organization_id=organization_id, delay=delay)


def _arm(*, campaign_id: int, organization_id: int | None, delay: int, replace: bool = False) -> bool:
    """Set the pending mark, which holds the time the recompute is due (``leaderboards_rearm`` reads it),
    for the delay plus one lease, and queue the task ``delay`` seconds ahead. Without ``replace`` a mark
    already there wins (nothing queued, False). A broker that refuses the task clears the mark again."""
    key = _pending_key(campaign_id)
    due, timeout = time.time() + delay, delay + settings.ARENA_RANKING_LEASE_S
    if replace:
        cache.set(key, due, timeout=timeout)
    elif not cache.add(key, due, timeout=timeout):
        return False
    try:
        leaderboards_recompute_task.apply_async(
            args=[campaign_id],
            kwargs={"organization_id": organization_id or campaign_organization_id(campaign_id)},
            countdown=delay,
        )
    except Exception:
        cache.delete(key)
        raise
    return True


@contextmanager
def _running_lease(campaign_id: int) -> Iterator[None]:
    """Hold the "running" mark while the body runs, renewing it every third of a lease; a killed worker
    stops renewing, and the mark is gone one lease later."""
    lease = settings.ARENA_RANKING_LEASE_S
    key = _running_key(campaign_id)
    done = threading.Event()

    def renew() -> None:
        while not done.wait(lease / 3):
            try:
                cache.set(key, time.time(), timeout=lease)
            except Exception:  # a cache outage must not kill the recompute it guards
                logger.warning("campaign %s: could not renew the recompute lease", campaign_id, exc_info=True)

    cache.set(key, time.time(), timeout=lease)
    heartbeat = threading.Thread(target=renew, name=f"ranking-lease-{campaign_id}", daemon=True)
    heartbeat.start()
    try:
        yield
    finally:
        done.set()
        heartbeat.join()
        cache.delete(key)


def leaderboards_recompute_pending(*, campaign_id: int) -> list[LeaderboardSnapshot]:
    """What the scheduled task runs: clear the pending mark first, so votes that arrive during the
    computation schedule the next one, and hold the running lease while computing. Then the per-rater
    figures are refreshed too (``_rater_figures_warm``): the log that grew the boards grew them."""
    cache.delete(_pending_key(campaign_id))
    logger.info("campaign %s: recompute started", campaign_id)
    with _running_lease(campaign_id):
        snapshots = leaderboards_recompute(campaign_id=campaign_id)
    _rater_figures_warm(campaign_id)
    return snapshots


@shared_task(base=TenantTask, acks_late=True, name="ranking.tasks.leaderboards_recompute_task")
def leaderboards_recompute_task(campaign_id: int, *, organization_id: int) -> int:
    """Runs inside ``organization_id``'s scope (TenantTask, which is transaction-aware as well)."""
    return len(leaderboards_recompute_pending(campaign_id=campaign_id))


def _campaigns_behind() -> Iterator[tuple[int, int]]:
    """(campaign, organisation) of every open campaign with votes newer than its latest snapshot that no
    recompute is computing (no live "running" lease); each yielded inside the organisation's scope."""
    with scopes_disabled():  # the one listing across organisations; each campaign then in its own scope
        open_campaigns = list(Campaign.objects.filter(status=Campaign.Status.OPEN).values_list("pk", "organization_id"))
    for campaign_id, organization_id in open_campaigns:
        with organization_scope(organization_id):
            newest = Vote.objects.filter(campaign_id=campaign_id).aggregate(v=Max("id"))["v"]
            snapshots = LeaderboardSnapshot.objects.filter(campaign_id=campaign_id)
            seen = snapshots.aggregate(v=Max("last_vote_id"))["v"] or 0
            if not newest or newest <= seen or cache.get(_running_key(campaign_id)) is not None:
                continue
            yield campaign_id, organization_id


def leaderboards_schedule_open_campaigns() -> int:
    """Periodic safety net (celery beat): recompute now every open campaign with votes newer than its
    latest snapshot, unless a recompute is queued (pending mark) or computing (live lease). This is what
    takes over after a worker died, or after the broker was down when votes came in."""
    count = 0
    for campaign_id, organization_id in _campaigns_behind():
        if leaderboards_schedule(campaign_id=campaign_id, countdown=0, organization_id=organization_id):
            count += 1
    return count


def leaderboards_rearm() -> int:
    """Run by a recompute worker as it starts: queue again every recompute that is due and that nothing
    computes, for the time its pending mark says (at once when it has none), and renew the mark for it.

    A worker killed while it held a delayed recompute takes that task with it until the broker's
    visibility timeout, and its mark keeps the next vote and beat away until the mark expires; the
    supervisor's restart of the worker re-arms it instead, so the board is fresh when it was due. Where
    another live worker still holds the original, the recompute runs twice at that time: one
    recompute's cost, the same snapshot."""
    count = 0
    for campaign_id, organization_id in _campaigns_behind():
        due = cache.get(_pending_key(campaign_id))
        countdown = max(0, math.ceil(float(due) - time.time())) if isinstance(due, (int, float)) else 0
        _arm(campaign_id=campaign_id, organization_id=organization_id, delay=countdown, replace=True)
        count += 1
    return count


@worker_ready.connect
def _rearm_when_a_recompute_worker_starts(sender: Any = None, **kwargs: Any) -> None:
    """Celery's ``worker_ready``: a worker that consumes the recompute queue re-arms the recomputes a
    killed one took with it (``leaderboards_rearm``). Never fails the worker's start."""
    app = getattr(sender, "app", None)
    consumed = set(app.amqp.queues.consume_from) if app is not None else set()
    if queues.RECOMPUTE not in consumed:
        return
    try:
        count = leaderboards_rearm()
    except Exception:
        logger.exception("recompute worker start: the due recomputes could not be re-armed")
        return
    finally:
        connections.close_all()  # the worker's main process keeps no connection of its own
    logger.info("recompute worker start: %d due recompute(s) re-armed", count)


@shared_task(base=TransactionAwareTask, name="ranking.tasks.leaderboards_recompute_open_task")
def leaderboards_recompute_open_task() -> int:
    """Beat's safety net, across organisations: the service opens each campaign's own scope."""
    return leaderboards_schedule_open_campaigns()


def leaderboards_recompute_soon(*, campaign_id: int) -> None:
    """A manager asked for fresh leaderboards: queue a recompute now, past the debounce (sent when the
    surrounding transaction commits: the task base is transaction-aware)."""
    leaderboards_recompute_task.delay(campaign_id, organization_id=campaign_organization_id(campaign_id))
