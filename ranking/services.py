"""Writes for rankings: recompute every leaderboard of a campaign from its vote log, and schedule it."""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
from django.conf import settings
from django.contrib.auth.models import User
from django.core.cache import cache
from django.db import transaction
from django.db.models import Max

from battles import services as battle_services
from battles.models import Campaign, Competitor, Judge, JudgeRun, JudgeVerdict, Vote
from raters.errors import Invalid
from raters.models import AuditAction, WebhookEvent
from raters.services import audit_record, webhook_event_emit
from raters.tenancy import organization_scope, scopes_disabled

from . import selectors
from .compute import Method, board_compute, calibration_compute, elo_compute, head_to_head_check
from .models import BoardPublication, JudgeBoard, JudgeCalibration, LeaderboardSnapshot

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
    """One new version of every snapshot of the campaign: overall and per category, raw,
    style-controlled and reliability-weighted, under the campaign's exclusion policy. Computed outside
    any transaction and written in one, so readers see all of a version or none of it."""
    started = time.perf_counter()
    campaign = Campaign.objects.filter(pk=campaign_id).first()
    if campaign is None:  # deleted while the task waited in the queue
        return []
    votes = selectors.vote_arrays(campaign_id=campaign.pk)
    policy = selectors.exclusion_policy_for(campaign)
    keep, excluded = policy.apply(votes)
    excluded_in = policy.counts_by_category(votes)
    kept = votes.subset(keep)
    # Never the gold pseudo-competitors (their votes are not in the arrays either).
    competitors = list(
        Competitor.objects.filter(campaign=campaign, gold=False).select_related("endpoint").order_by("id")
    )
    competitor_ids = np.array([c.pk for c in competitors], dtype=np.int64)
    labels = {c.pk: f"{c.model_name} {c.version_label}" for c in competitors}
    method = method_for(campaign)
    last_vote_id = int(votes.vote_id.max()) if len(votes) else 0

    drafts = []
    totals = np.bincount(votes.category, minlength=len(votes.categories))
    selections: list[tuple[str, np.ndarray, int]] = [("", np.ones(len(kept), dtype=bool), len(votes))]
    selections += [(name, kept.category == code, int(totals[code])) for code, name in enumerate(kept.categories)]
    for category, mask, total in selections:
        subset = kept.subset(mask)
        for view in LeaderboardSnapshot.View:
            t0 = time.perf_counter()
            # A View member is the str its Literal names ("raw", "style", "reliability"); mypy cannot relate a
            # TextChoices member to a Literal, as with the campaign's interval choices above.
            board = board_compute(subset, competitor_ids, labels, method, view=view)  # type: ignore[arg-type]
            extra = dict(board.extra)
            if category == "" and view == LeaderboardSnapshot.View.RAW:
                extra["elo"] = elo_compute(kept, competitor_ids, labels, method)
            drafts.append(
                LeaderboardSnapshot(
                    organization_id=campaign.organization_id,
                    campaign=campaign,
                    category=category,
                    view=view,
                    last_vote_id=last_vote_id,
                    votes_total=total,
                    votes_used=len(subset),
                    method=method.as_dict(view=view),
                    policy=policy.as_dict(),
                    excluded=excluded_in[category] if category else excluded,
                    rows=board.rows,
                    pairwise=board.pairwise,
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
        if newest is not None and tuple(newest) > (last_vote_id, len(votes)):
            # A recompute that read the log later committed first: this one is out of date. (The count
            # catches a vote with a lower id that committed after this recompute read the log.)
            logger.info(
                "campaign %s: recompute over %s votes up to id %s dropped; a newer one exists",
                campaign.pk,
                len(votes),
                last_vote_id,
            )
            return []
        version = (LeaderboardSnapshot.objects.filter(campaign=campaign).aggregate(v=Max("version"))["v"] or 0) + 1
        for draft in drafts:
            draft.version = version
        snapshots = LeaderboardSnapshot.objects.bulk_create(drafts)
        webhook_event_emit(
            organization_id=campaign.organization_id,
            event=WebhookEvent.LEADERBOARD_UPDATED,
            payload={
                "campaign_id": campaign.pk,
                "version": version,
                "categories": sorted({draft.category for draft in drafts}),
                "views": sorted({draft.view for draft in drafts}),
                "votes_total": len(votes),
                "votes_used": len(kept),
                "last_vote_id": last_vote_id,
            },
        )
    logger.info(
        "campaign %s: leaderboards v%s from %s votes (%s kept) in %.2f s",
        campaign.pk,
        version,
        len(votes),
        len(kept),
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
    from .tasks import leaderboards_recompute_task

    delay = settings.ARENA_RANKING_DEBOUNCE_S if countdown is None else countdown
    if not cache.add(_pending_key(campaign_id), time.time(), timeout=delay + settings.ARENA_RANKING_LEASE_S):
        return False
    try:
        leaderboards_recompute_task.apply_async(
            args=[campaign_id],
            kwargs={"organization_id": organization_id or _organization_of(campaign_id)},
            countdown=delay,
        )
    except Exception:
        cache.delete(_pending_key(campaign_id))
        raise
    return True


def _organization_of(campaign_id: int) -> int:
    return Campaign.objects.values_list("organization_id", flat=True).get(pk=campaign_id)


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
    computation schedule the next one, and hold the running lease while computing."""
    cache.delete(_pending_key(campaign_id))
    logger.info("campaign %s: recompute started", campaign_id)
    with _running_lease(campaign_id):
        return leaderboards_recompute(campaign_id=campaign_id)


def leaderboards_schedule_open_campaigns() -> int:
    """Periodic safety net (celery beat): recompute now every open campaign with votes newer than its
    latest snapshot, unless a recompute is queued (pending mark) or computing (live lease). This is what
    takes over after a worker died, or after the broker was down when votes came in."""
    count = 0
    with scopes_disabled():  # the one listing across organisations; each campaign then in its own scope
        open_campaigns = list(Campaign.objects.filter(status=Campaign.Status.OPEN).values_list("pk", "organization_id"))
    for campaign_id, organization_id in open_campaigns:
        with organization_scope(organization_id):
            newest = Vote.objects.filter(campaign_id=campaign_id).aggregate(v=Max("id"))["v"]
            snapshots = LeaderboardSnapshot.objects.filter(campaign_id=campaign_id)
            seen = snapshots.aggregate(v=Max("last_vote_id"))["v"] or 0
            if not newest or newest <= seen or cache.get(_running_key(campaign_id)) is not None:
                continue
            if leaderboards_schedule(campaign_id=campaign_id, countdown=0, organization_id=organization_id):
                count += 1
    return count


def leaderboards_recompute_soon(*, campaign_id: int) -> None:
    """A manager asked for fresh leaderboards: queue a recompute now, past the debounce (sent when the
    surrounding transaction commits: the task base is transaction-aware)."""
    from .tasks import leaderboards_recompute_task

    leaderboards_recompute_task.delay(campaign_id, organization_id=_organization_of(campaign_id))


# --- Published boards ----------------------------------------------------------------------------------


def _board_slug() -> str:
    # 96 random bits: the address is the only secret an unpublished-but-bookmarked board relies on.
    return secrets.token_urlsafe(12)


@transaction.atomic
def board_publish(
    *, campaign: Campaign, actor: User | None, show_prompts: bool = False, via: str = "console"
) -> tuple[BoardPublication, bool]:
    """Publish the campaign's leaderboard at a new random address, or change the options of the
    existing publication (its address stays). Returns the publication and whether it is new. One
    audit row either way; ``actor`` is None for an API key (``via`` then names the key)."""
    # The campaign row lock settles two publishes racing: the second sees the first's row.
    Campaign.objects.select_for_update().filter(pk=campaign.pk).first()
    publication = BoardPublication.objects.filter(campaign=campaign).first()
    created = publication is None
    if publication is None:
        publication = BoardPublication.objects.create(
            organization_id=campaign.organization_id,
            campaign=campaign,
            slug=_board_slug(),
            published_by=actor,
            show_prompts=show_prompts,
        )
    elif publication.show_prompts != show_prompts:
        publication.show_prompts = show_prompts
        publication.save(update_fields=["show_prompts"])
    audit_record(
        organization=campaign.organization,
        actor=actor,
        action=AuditAction.BOARD_PUBLISHED,
        obj=campaign,
        data={"slug": publication.slug, "show_prompts": show_prompts, "new": created, "via": via},
    )
    return publication, created


@transaction.atomic
def board_unpublish(*, campaign: Campaign, actor: User | None, via: str = "console") -> bool:
    """Take the campaign's board off its public address (the address then answers 404 and is never
    reused). Returns whether there was a publication."""
    publication = BoardPublication.objects.select_for_update().filter(campaign=campaign).first()
    if publication is None:
        return False
    slug = publication.slug
    publication.delete()
    audit_record(
        organization=campaign.organization,
        actor=actor,
        action=AuditAction.BOARD_UNPUBLISHED,
        obj=campaign,
        data={"slug": slug, "via": via},
    )
    return True


# --- Judges: boards of a judge's verdicts, calibration against the humans, golden-run checks -----------


def judge_board_recompute(
    *, campaign_id: int, judge_id: int, kind: str = "battles", run_id: int | None = None
) -> JudgeBoard | None:
    """A new version of the judge's board: Bradley-Terry (the campaign's method, raw view) on the judge's
    counterbalanced verdicts only. Refusals are left out and counted; order disagreements are ties."""
    campaign = Campaign.objects.filter(pk=campaign_id).first()
    judge = Judge.objects.filter(pk=judge_id).select_related("rubric").first()
    if campaign is None or judge is None:
        return None
    found = selectors.judge_verdicts_for_board(campaign_id=campaign_id, judge_id=judge_id, kind=kind, run_id=run_id)
    competitors = list(
        Competitor.objects.filter(campaign=campaign, gold=False).select_related("endpoint").order_by("id")
    )
    competitor_ids = np.array([c.pk for c in competitors], dtype=np.int64)
    labels = {c.pk: f"{c.model_name} {c.version_label}" for c in competitors}
    method = method_for(campaign)
    board = board_compute(found.arrays, competitor_ids, labels, method, view="raw")
    with transaction.atomic():
        Judge.objects.select_for_update().filter(pk=judge.pk).first()  # orders concurrent recomputes
        version = (
            JudgeBoard.objects.filter(campaign=campaign, judge=judge, kind=kind).aggregate(v=Max("version"))["v"] or 0
        ) + 1
        return JudgeBoard.objects.create(
            organization_id=campaign.organization_id,
            campaign=campaign,
            judge=judge,
            rubric=judge.rubric,
            run_id=found.run_id,
            kind=kind,
            version=version,
            last_verdict_id=found.last_id,
            verdicts_total=found.total,
            verdicts_used=len(found.arrays),
            verdicts_refused=found.refused,
            verdicts_inconsistent=found.inconsistent,
            method={
                **method.as_dict(view="raw"),
                "source": f"judge {judge.name}: rubric {judge.rubric.name} v{judge.rubric.version} "
                f"({judge.rubric.content_hash[:12]}), counterbalanced verdicts only (no human vote)",
                "order_disagreement": "a pair whose two presentation orders disagree counts as a tie",
                "refusals": "left out (counted in verdicts_refused)",
            },
            rows=board.rows,
            pairwise=board.pairwise,
            extra=board.extra,
        )


@transaction.atomic
def judge_calibrate(*, campaign_id: int, judge_id: int, run_id: int | None = None) -> list[JudgeCalibration]:
    """The judge's agreement with the human votes on the battles both judged, overall and per category,
    with Cohen's kappa and the gate, written as one new calibration version attached to the judge's
    rubric version. Nothing is written when no battle has both."""
    campaign = Campaign.objects.filter(pk=campaign_id).first()
    judge = Judge.objects.filter(pk=judge_id).first()
    if campaign is None or judge is None:
        return []
    pairs, refused = selectors.judge_calibration_pairs(campaign_id=campaign_id, judge_id=judge_id)
    if not pairs and not refused:
        return []
    Judge.objects.select_for_update().filter(pk=judge.pk).first()
    version = (
        JudgeCalibration.objects.filter(campaign=campaign, judge=judge).aggregate(v=Max("version"))["v"] or 0
    ) + 1
    categories = [""] + sorted({category for category, _, _ in pairs} | set(refused))
    rows = []
    for category in categories:
        chosen = [(h, j) for c, h, j in pairs if category in ("", c)]
        human = np.array([h for h, _ in chosen], dtype=np.int64)
        verdict = np.array([j for _, j in chosen], dtype=np.int64)
        result = calibration_compute(human, verdict)
        rows.append(
            JudgeCalibration(
                organization_id=campaign.organization_id,
                campaign=campaign,
                judge=judge,
                rubric_id=judge.rubric_id,
                run_id=run_id,
                version=version,
                category=category,
                refused=sum(refused.values()) if category == "" else refused.get(category, 0),
                **result,
            )
        )
    return JudgeCalibration.objects.bulk_create(rows)


def judge_run_settle(*, run_id: int) -> JudgeBoard | None:
    """After a run: the judge's board of that kind, and (for a battles run) its calibration."""
    run = JudgeRun.objects.filter(pk=run_id).first()
    if run is None:
        return None
    board = judge_board_recompute(campaign_id=run.campaign_id, judge_id=run.judge_id, kind=run.kind, run_id=run.pk)
    if run.kind == JudgeRun.Kind.BATTLES:
        judge_calibrate(campaign_id=run.campaign_id, judge_id=run.judge_id, run_id=run.pk)
    return board


def golden_check(*, run: JudgeRun, candidate_id: int, baseline_id: int, confidence: float) -> dict[str, Any]:
    """Does ``candidate`` beat ``baseline`` on the golden run's head-to-head verdicts, at ``confidence``?"""
    if not 0.5 < confidence < 1.0:
        raise Invalid("The confidence must lie between 0.5 and 1 (e.g. 0.95).")
    wins = losses = ties = 0
    for left, right, choice in JudgeVerdict.objects.filter(run=run, refused=False).values_list(
        "left_id", "right_id", "choice"
    ):
        if {left, right} != {candidate_id, baseline_id}:
            continue
        if choice in ("tie", "both_bad"):
            ties += 1
        elif (choice == "left") == (left == candidate_id):
            wins += 1
        else:
            losses += 1
    return {
        "run_id": run.pk,
        "candidate_id": candidate_id,
        "baseline_id": baseline_id,
        **head_to_head_check(wins=wins, losses=losses, ties=ties, confidence=confidence),
    }


def golden_run_and_check(
    *, run_id: int, candidate_id: int | None = None, baseline_id: int | None = None, confidence: float = 0.95
) -> dict[str, Any]:
    """A golden run end to end (answers, verdicts, its board), then the candidate-against-baseline check
    when both are named. What the CI command and the Celery task run."""
    run = battle_services.judge_run_execute(run_id=run_id)
    if run is None:
        raise Invalid(f"No judge run {run_id}.")
    board = judge_board_recompute(campaign_id=run.campaign_id, judge_id=run.judge_id, kind=run.kind, run_id=run.pk)
    result: dict[str, Any] = {
        "run_id": run.pk,
        "status": run.status,
        "error": run.error,
        "stats": run.stats,
        "board_version": board.version if board is not None else None,
    }
    if candidate_id is not None and baseline_id is not None:
        result["check"] = golden_check(
            run=run, candidate_id=candidate_id, baseline_id=baseline_id, confidence=confidence
        )
    return result
