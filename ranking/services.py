"""Writes for rankings: recompute every leaderboard of a campaign from its vote log, and schedule it."""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
from django.conf import settings
from django.contrib.auth.models import User
from django.core.cache import cache
from django.db import transaction
from django.db.models import Max
from django.utils import timezone
from kombu.exceptions import OperationalError as KombuOperationalError
from redis.exceptions import RedisError

from battles import services as battle_services
from battles.models import BattleSource, Campaign, Competitor, Judge, JudgeRun, JudgeVerdict, Rubric, Vote
from battles.selectors import gold_counts
from raters.errors import Conflict, Invalid
from raters.models import FLAG_IN_FORCE, AuditAction, Organization, RaterFlag, WebhookEvent
from raters.services import audit_record, rater_flag_raise, webhook_event_emit
from raters.tenancy import organization_scope, scopes_disabled
from serving.ratio_judging import TEMPLATE_HASH, RatioCall, ratio_judge_call

from . import selectors
from .compute import Method, board_compute, calibration_compute, elo_compute, head_to_head_check
from .estimators.pairwise import wilson_interval
from .estimators.rater_outliers import rater_outliers
from .estimators.ratio import RatioFit, fit_ratio
from .estimators.ratio_design import check_stop, propose_batch, score_rows
from .models import (
    AttributeBoard,
    AttributeEntity,
    AttributeJudgement,
    AttributeRun,
    AttributeScore,
    BoardPublication,
    JudgeBoard,
    JudgeCalibration,
    LeaderboardSnapshot,
)

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
        if campaign.outlier_alpha is not None or campaign.gold_min_accuracy is not None:
            from .tasks import rater_flags_check_task

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
    computation schedule the next one, and hold the running lease while computing. Then the per-rater
    figures are refreshed too (``_rater_figures_warm``): the log that grew the boards grew them."""
    cache.delete(_pending_key(campaign_id))
    logger.info("campaign %s: recompute started", campaign_id)
    with _running_lease(campaign_id):
        snapshots = leaderboards_recompute(campaign_id=campaign_id)
    _rater_figures_warm(campaign_id)
    return snapshots


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


# --- The per-rater figures (the managers' dashboard, its CSV, the rater-report API): stale-while-revalidate.
#
# Computing them sorts the whole log (about 23 s at a million votes), and any new vote changes them. A view
# that finds them cached for the log as it stands uses them; one that finds only older ones (the latest
# computed) serves those, labelled with their age, and queues one refresh; with nothing cached, or with
# no broker to queue on, the request computes them itself.

# A queued or running refresh holds this lock, so that many views queue one task; a refresh whose worker
# died frees it after this long (a view then queues another). Longer than a refresh at a million votes.
RATER_REFRESH_LOCK_S = 120


def _rater_refresh_key(campaign_id: int) -> str:
    return f"ranking:rater-figures-refresh:{campaign_id}"


def rater_figures_refresh_schedule(*, campaign_id: int, organization_id: int | None = None) -> bool:
    """Queue one refresh of the campaign's per-rater figures unless one is queued or running already (the
    lock, taken with ``cache.add``). Returns whether this call queued it. Raises if the broker refuses the
    task, after releasing the lock so that the next view tries again."""
    from .tasks import rater_figures_refresh_task

    if not cache.add(_rater_refresh_key(campaign_id), time.time(), timeout=RATER_REFRESH_LOCK_S):
        return False
    try:
        rater_figures_refresh_task.delay(campaign_id, organization_id=organization_id or _organization_of(campaign_id))
    except Exception:
        cache.delete(_rater_refresh_key(campaign_id))
        raise
    return True


def rater_figures_refresh(*, campaign_id: int) -> int | None:
    """What the refresh task runs: the campaign's per-rater figures for the log as it stands, stored under
    its state and as the latest (nothing to do when they are cached already); then the lock is released.
    Returns the votes they stand on, or None for a campaign that is gone."""
    try:
        campaign = Campaign.objects.filter(pk=campaign_id).first()
        if campaign is None:
            return None
        figures, mark = selectors.rater_figures_cached(campaign=campaign)
        if figures is None or figures.mark != mark:
            started = time.perf_counter()
            figures = selectors.rater_figures_compute(campaign=campaign)
            logger.info(
                "campaign %s: per-rater figures over %s votes in %.2f s",
                campaign_id,
                figures.votes,
                time.perf_counter() - started,
            )
        return figures.votes
    finally:
        cache.delete(_rater_refresh_key(campaign_id))


def _rater_figures_warm(campaign_id: int) -> None:
    """After a recompute: refresh the per-rater figures of a campaign whose figures someone looked at
    lately (a latest entry exists), so that the next view finds them current. Never fails the recompute."""
    try:
        if selectors.rater_figures_viewed(campaign_id=campaign_id):
            rater_figures_refresh_schedule(campaign_id=campaign_id)
    except Exception:
        logger.warning("campaign %s: the per-rater figures' refresh was not queued", campaign_id, exc_info=True)


def rater_reports_serve(*, campaign: Campaign, rater_ids: list[int] | None = None) -> selectors.RaterReports:
    """The rater reports for a view (the dashboard, the API): the figures from the log cached for its
    current state; else the latest ones computed (labelled: ``as_of``, ``votes_behind``, ``refreshing``)
    while one refresh is queued; else (nothing cached, or the broker down) computed in the request, as
    current. Gold accuracy, flags and names are always read afresh. (The CSV wants the log as it stands:
    ``selectors.rater_reports``.)"""
    figures, mark = selectors.rater_figures_cached(campaign=campaign)
    refreshing = False
    if figures is not None and figures.mark != mark:
        try:
            rater_figures_refresh_schedule(campaign_id=campaign.pk, organization_id=campaign.organization_id)
        except (KombuOperationalError, RedisError, OSError):
            logger.error(
                "campaign %s: the per-rater figures' refresh could not be queued (broker down): computed in "
                "the request",
                campaign.pk,
                exc_info=True,
            )
            figures = None
        else:
            # Where tasks run eagerly (no broker configured) the refresh has run already.
            current = selectors.rater_figures_at(campaign=campaign, mark=mark)
            figures, refreshing = (current, False) if current is not None else (figures, True)
    if figures is None:
        figures = selectors.rater_figures_compute(campaign=campaign)
        mark = figures.mark
    return selectors.rater_reports_of(
        campaign=campaign, figures=figures, log_votes=int(mark[0]), refreshing=refreshing, rater_ids=rater_ids
    )


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


def golden_check_validate(
    *,
    campaign_id: int,
    candidate_id: int,
    baseline_id: int,
    confidence: float,
    competitor_ids: Sequence[int] = (),
    judge: Judge | None = None,
) -> None:
    """The golden check's arguments, checked before any run exists or any model is called, so a typo is a
    usage error and never an hour of judging that ends in "does not beat": the confidence lies in
    (0.5, 1), and candidate and baseline are two different live competitors of the campaign that the run
    will have answer (among ``competitor_ids`` when those are named, else active) and ``judge`` may
    judge (not its own model, nor an excluded family)."""
    if not 0.5 < confidence < 1.0:
        raise Invalid(
            "The confidence must lie between 0.5 and 1 (e.g. 0.95).", field_errors={"confidence": "Not in (0.5, 1)."}
        )
    if candidate_id == baseline_id:
        raise Invalid("The candidate and the baseline must be two different competitors.")
    found = {
        c.pk: c
        for c in Competitor.objects.filter(campaign_id=campaign_id, pk__in=[candidate_id, baseline_id], gold=False)
    }
    for role, pk in (("candidate", candidate_id), ("baseline", baseline_id)):
        competitor = found.get(pk)
        if competitor is None or competitor.endpoint_id is None:
            raise Invalid(
                f"The {role} {pk} is not a served competitor of campaign {campaign_id}.",
                field_errors={role: "Not one of the campaign's served competitors."},
            )
        if competitor.retired:
            raise Invalid(f"The {role} {competitor} is retired.", field_errors={role: "Retired."})
        if competitor_ids and pk not in competitor_ids:
            raise Invalid(
                f"The {role} {pk} is not among the run's competitors.", field_errors={role: "Not in the run."}
            )
        if not competitor_ids and not competitor.active:
            raise Invalid(
                f"The {role} {competitor} is inactive: a golden run without named competitors uses the active ones.",
                field_errors={role: "Inactive."},
            )
        if judge is not None and not judge.may_judge(competitor):
            raise Invalid(
                f"The judge {judge.name} may not judge the {role} {competitor} (its own model, or a family it "
                "excludes): every pair with it would be skipped.",
                field_errors={role: "The judge's own model or an excluded family."},
            )


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
    when both are named (its arguments checked first: a bad one raises ``Invalid`` before any model is
    called). What the CI command and the Celery task run."""
    if candidate_id is not None and baseline_id is not None:
        queued = JudgeRun.objects.filter(pk=run_id).select_related("judge__endpoint").first()
        if queued is None:
            raise Invalid(f"No judge run {run_id}.")
        golden_check_validate(
            campaign_id=queued.campaign_id,
            candidate_id=candidate_id,
            baseline_id=baseline_id,
            confidence=confidence,
            competitor_ids=queued.competitor_ids,
            judge=queued.judge,
        )
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


# --- Attribute boards (ratio judgements) ---------------------------------------------------------------


@dataclass(frozen=True)
class EntityInput:
    text: str
    label: str = ""


ENTITY_TEXT_MAX = 20_000
BOARD_ENTITIES_MAX = 20_000
# Judge calls run concurrently within a batch (each pair's two orders included); the writes stay here.
JUDGE_CONCURRENCY = 8


def _check_judge(judge: Judge, organization_id: int) -> None:
    if judge.organization_id != organization_id:
        raise Invalid("The judge must belong to the board's organisation.", field_errors={"judge": "Not yours."})
    if judge.rubric.kind != Rubric.Kind.RATIO:
        raise Invalid(
            "An attribute board needs a judge whose rubric is of kind ratio.",
            field_errors={"judge": "Its rubric is not a ratio rubric."},
        )
    if not judge.active:
        raise Invalid("This judge is not active.", field_errors={"judge": "Inactive."})


def _entities_add(board: AttributeBoard, entities: Sequence[EntityInput]) -> list[AttributeEntity]:
    errors = {
        f"entities.{k}.text": "Empty, or longer than 20,000 characters."
        for k, e in enumerate(entities)
        if not e.text.strip() or len(e.text) > ENTITY_TEXT_MAX
    }
    if errors:
        raise Invalid("Some entities are empty or too long.", field_errors=errors)
    # The board's row lock orders concurrent additions, so positions stay 0, 1, 2, ... with no gap.
    AttributeBoard.objects.select_for_update().filter(pk=board.pk).first()
    start = AttributeEntity.objects.filter(board=board).aggregate(m=Max("position"))["m"]
    start = -1 if start is None else start
    if start + 1 + len(entities) > BOARD_ENTITIES_MAX:
        raise Invalid(f"A board holds at most {BOARD_ENTITIES_MAX} entities.")
    return AttributeEntity.objects.bulk_create(
        [
            AttributeEntity(
                organization_id=board.organization_id, board=board, position=start + 1 + k, text=e.text, label=e.label
            )
            for k, e in enumerate(entities)
        ]
    )


@transaction.atomic
def attribute_board_create(
    *,
    organization: Organization,
    name: str,
    attribute: str,
    judge: Judge,
    entities: Sequence[EntityInput] = (),
    seed: int = 0,
    calls_per_entity: int = 8,
    top_k: int = 10,
    batch_size: int = 16,
    actor: User | None,
    via: str = "console",
) -> AttributeBoard:
    """A new board with its first entities. Audited; ``actor`` None for an API key (``via`` names it)."""
    _check_judge(judge, organization.pk)
    if not attribute.strip():
        raise Invalid("Name the attribute.", field_errors={"attribute": "Required."})
    if calls_per_entity < 2 or top_k < 1 or batch_size < 1:
        raise Invalid("calls_per_entity must be at least 2, top_k and batch_size at least 1.")
    if AttributeBoard.objects.filter(organization=organization, name=name).exists():
        raise Invalid("A board of this name exists.", field_errors={"name": "Already used."})
    board = AttributeBoard.objects.create(
        organization=organization,
        name=name,
        attribute=attribute,
        judge=judge,
        seed=seed,
        calls_per_entity=calls_per_entity,
        top_k=top_k,
        batch_size=batch_size,
    )
    added = _entities_add(board, entities)
    audit_record(
        organization=organization,
        actor=actor,
        action=AuditAction.ATTRIBUTE_BOARD_CREATED,
        obj=board,
        data={"name": name, "judge": judge.pk, "entities": len(added), "via": via},
    )
    return board


@transaction.atomic
def attribute_entities_add(
    *, board: AttributeBoard, entities: Sequence[EntityInput], actor: User | None, via: str = "console"
) -> list[AttributeEntity]:
    """Append entities (runs started later see them; earlier runs keep the entities they saw)."""
    added = _entities_add(board, entities)
    audit_record(
        organization=board.organization,
        actor=actor,
        action=AuditAction.ATTRIBUTE_ENTITIES_ADDED,
        obj=board,
        data={"entities": len(added), "via": via},
    )
    return added


@transaction.atomic
def attribute_run_start(
    *,
    board: AttributeBoard,
    actor: User | None,
    judge: Judge | None = None,
    seed: int | None = None,
    via: str = "console",
) -> AttributeRun:
    """Queue a run of the board (by default with its own judge and seed; another judge or seed is a
    replication). The run is executed by a worker (``attribute_run_task``), sent when this commits."""
    from .tasks import attribute_run_task

    judge = judge or board.judge
    _check_judge(judge, board.organization_id)
    n = AttributeEntity.objects.filter(board=board).count()
    if n < 3:
        raise Invalid("A board needs at least 3 entities to run.")
    if board.top_k >= n:
        raise Invalid(f"top_k ({board.top_k}) must be below the number of entities ({n}).")
    budget = board.calls_per_entity * n
    run = AttributeRun.objects.create(
        organization_id=board.organization_id,
        board=board,
        judge=judge,
        attribute=board.attribute,
        rubric_hash=judge.rubric.content_hash,
        template_hash=TEMPLATE_HASH,
        model_name=judge.endpoint.model_name,
        seed=board.seed if seed is None else seed,
        top_k=board.top_k,
        batch_size=board.batch_size,
        entities=n,
        budget_calls=budget - budget % 2,  # a pair costs two calls
        requested_by=actor,
    )
    audit_record(
        organization=board.organization,
        actor=actor,
        action=AuditAction.ATTRIBUTE_RUN_STARTED,
        obj=board,
        data={"run": run.pk, "judge": judge.pk, "seed": run.seed, "budget_calls": run.budget_calls, "via": via},
    )
    attribute_run_task.delay(run.pk, organization_id=board.organization_id)
    return run


def _judge_pair_orders(
    run: AttributeRun, judge: Judge, pairs: list[tuple[AttributeEntity, AttributeEntity]]
) -> list[RatioCall]:
    """Both orders of every pair, concurrently: [p0 (a, b), p0 (b, a), p1 (a, b), ...]."""
    spec = judge.endpoint.spec()
    rubric = run.judge.rubric
    attribute = run.attribute
    jobs = [(x, y) for a, b in pairs for x, y in ((a, b), (b, a))]

    def call(job: tuple[AttributeEntity, AttributeEntity]) -> RatioCall:
        first, second = job
        return ratio_judge_call(
            spec,
            attribute=attribute,
            question=rubric.question,
            instructions=rubric.instructions,
            first=first.text,
            second=second.text,
            max_tokens=judge.max_tokens,
            seed=run.seed,
            temperature=judge.temperature,
        )

    with ThreadPoolExecutor(max_workers=JUDGE_CONCURRENCY) as pool:
        return list(pool.map(call, jobs))


# The run's counter for each outcome of a call.
_COUNTER_OF = {"accepted": "accepted", "refused": "refused", "malformed": "malformed", "error": "call_errors"}


def _dominant_error(run_id: int) -> str:
    counts = Counter(
        (status, reason if status == AttributeJudgement.Status.ERROR else "")
        for status, reason in AttributeJudgement.objects.filter(run_id=run_id)
        .exclude(status=AttributeJudgement.Status.ACCEPTED)
        .values_list("status", "reason")
    )
    total = AttributeJudgement.objects.filter(run_id=run_id).count()
    if not counts:
        return "no judge call was made"
    (status, reason), count = counts.most_common(1)[0]
    what = {"error": f"call error: {reason}", "refused": "the judge refused", "malformed": "malformed replies"}[status]
    return f"No judgement was accepted ({total} calls); the dominant failure: {what} ({count} of {total} calls)."


def attribute_run_execute(*, run_id: int) -> AttributeRun:
    """Run a queued run to its end (the worker's body; the module section's design, issue 12):

    batches from the adaptive design (``propose_batch``), each pair judged in both orders, the
    judgements appended to the ledger (one transaction per batch), the fit refreshed, and the
    stopping rule looked at before each batch: the run stops early only when the critical top-k pair
    separates under inflated bounds on two consecutive looks of a non-degraded solve, otherwise it
    spends its budget (or runs out of unjudged pairs: "exhausted"). A pair with any refusal,
    malformed reply or failed call is never proposed again, and neither of its orders reaches the
    estimator. A run that accepted nothing ends failed, naming the dominant failure; it writes no
    scores (a flat board would read as a tie of everything). Exactly one worker executes a run: the
    claim is a conditional update."""
    claimed = AttributeRun.objects.filter(pk=run_id, status=AttributeRun.Status.QUEUED).update(
        status=AttributeRun.Status.RUNNING, started_at=timezone.now()
    )
    run = AttributeRun.objects.select_related("board", "judge__rubric", "judge__endpoint").get(pk=run_id)
    if claimed != 1:
        return run
    try:
        return _attribute_run_body(run)
    except Exception as exc:
        logger.exception("attribute run %s failed", run_id)
        AttributeRun.objects.filter(pk=run_id).update(
            status=AttributeRun.Status.FAILED,
            failure_reason=f"The run stopped on an internal error ({type(exc).__name__}).",
            finished_at=timezone.now(),
        )
        run.refresh_from_db()
        return run


def _attribute_run_body(run: AttributeRun) -> AttributeRun:
    entities = list(AttributeEntity.objects.filter(board=run.board, position__lt=run.entities).order_by("position"))
    n = len(entities)
    index = {e.pk: k for k, e in enumerate(entities)}
    top_k = min(run.top_k, n - 1)
    ii: list[int] = []
    jj: list[int] = []
    rr: list[float] = []
    cc: list[float] = []
    banned: set[tuple[int, int]] = set()
    consecutive = 0
    fit = fit_ratio(n, ii, jj, rr, seed=run.seed)
    stop_reason = ""
    batch = 0
    while True:
        run.checks += 1
        look = check_stop(fit, top_k=top_k, spent=run.calls, budget=run.budget_calls, consecutive=consecutive)
        if look.stop:
            stop_reason = look.reason
            break
        consecutive = look.consecutive
        size = min(run.batch_size, max((run.budget_calls - run.calls) // 2, 1))
        proposal = propose_batch(fit, top_k=top_k, batch_size=size, refused=banned, seed=run.seed + run.checks)
        if proposal.pairs.shape[0] == 0:
            stop_reason = "exhausted"
            break
        batch += 1
        pairs = [(entities[a], entities[b]) for a, b in proposal.pairs.tolist()]
        calls = _judge_pair_orders(run, run.judge, pairs)
        rows: list[AttributeJudgement] = []
        for p, (a, b) in enumerate(pairs):
            both = calls[2 * p : 2 * p + 2]
            used = all(c.verdict.accepted for c in both)
            if not used:
                banned.add((min(index[a.pk], index[b.pk]), max(index[a.pk], index[b.pk])))
                run.pairs_refused += 1
            run.pairs += 1
            for order, (first, second), c in ((1, (a, b), both[0]), (2, (b, a), both[1])):
                v = c.verdict
                rows.append(
                    AttributeJudgement(
                        organization_id=run.organization_id,
                        run=run,
                        first=first,
                        second=second,
                        order=order,
                        batch=batch,
                        status=v.status,
                        raw_reply=c.reply,
                        more=v.more,
                        ratio=v.ratio,
                        log_ratio=v.log_ratio,
                        confidence=v.confidence,
                        used=used,
                        reason=v.reason,
                        output_tokens=c.output_tokens,
                        latency_s=c.latency_s,
                    )
                )
                run.calls += 1
                run.output_tokens += c.output_tokens
                run.call_seconds += c.latency_s
                counter = _COUNTER_OF[v.status]
                setattr(run, counter, getattr(run, counter) + 1)
                if used:
                    assert v.log_ratio is not None
                    ii.append(index[first.pk])
                    jj.append(index[second.pk])
                    rr.append(v.log_ratio)
                    cc.append(np.nan if v.confidence is None else v.confidence)
        with transaction.atomic():
            AttributeJudgement.objects.bulk_create(rows)
            run.save(update_fields=_RUN_COUNTERS)
        if run.accepted == 0 and run.call_errors == run.calls:
            # The judge answers nothing at all (down, not served, refusing the address): spending the
            # rest of the budget on it would only repeat the same error.
            stop_reason = "failed"
            break
        fit = fit_ratio(n, ii, jj, rr, cc, seed=run.seed)
    return _attribute_run_finish(run, fit, entities, top_k=top_k, stop_reason=stop_reason)


_RUN_COUNTERS = [
    "calls",
    "accepted",
    "refused",
    "malformed",
    "call_errors",
    "pairs",
    "pairs_refused",
    "checks",
    "output_tokens",
    "call_seconds",
]


def _finite(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


@transaction.atomic
def _attribute_run_finish(
    run: AttributeRun, fit: RatioFit, entities: list[AttributeEntity], *, top_k: int, stop_reason: str
) -> AttributeRun:
    run.finished_at = timezone.now()
    run.degraded = fit.degraded
    run.solve = {
        "hash": selectors.attribute_fit_hash(fit),
        "observations": int(fit.edges.n_obs.sum()) if fit.edges.n_obs.size else 0,
        "edges": int(fit.edges.lo.size),
        "components": int(fit.n_components),
        "dispersion": _finite(fit.dispersion),
        "scale": _finite(fit.scale),
        "cyclic_share": _finite(fit.cyclic_share),
        "overridden": int(fit.overridden.sum()),
        "iterations": int(fit.iterations),
        "converged": bool(fit.converged),
        "degraded_reasons": list(fit.degraded_reasons),
        "std_method": fit.std_method,
        "method": {k: v for k, v in fit.method.items() if isinstance(v, (str, int, float, bool))},
    }
    if fit.edges.lo.size == 0:
        run.status = AttributeRun.Status.FAILED
        run.stop_reason = "failed"
        run.failure_reason = _dominant_error(run.pk)
        run.save(
            update_fields=[
                *_RUN_COUNTERS,
                "status",
                "stop_reason",
                "failure_reason",
                "finished_at",
                "degraded",
                "solve",
            ]
        )
        return run
    run.status = AttributeRun.Status.DONE
    run.stop_reason = stop_reason
    AttributeScore.objects.bulk_create(
        [
            AttributeScore(
                organization_id=run.organization_id,
                run=run,
                entity=entities[row.entity],
                rank=row.rank,
                score=row.score,
                std=_finite(row.std),
                z_score=_finite(row.z_score),
                percentile=row.percentile,
                lower=_finite(row.lower),
                upper=_finite(row.upper),
                in_top_k=row.in_top_k,
                comparisons=int(fit.n_comparisons[row.entity]),
                stop_reason=stop_reason,
            )
            for row in score_rows(fit, top_k=top_k, stop_reason=stop_reason)
        ]
    )
    run.save(
        update_fields=[*_RUN_COUNTERS, "status", "stop_reason", "failure_reason", "finished_at", "degraded", "solve"]
    )
    return run


@transaction.atomic
def attribute_board_publish(*, board: AttributeBoard, actor: User | None, via: str = "console") -> tuple[str, bool]:
    """Publish the board (its newest finished run, its ledger) at a random public address; publishing a
    published board keeps its address. Returns the slug and whether it is new. Audited."""
    locked = AttributeBoard.objects.select_for_update().get(pk=board.pk)
    created = locked.public_slug is None
    if created:
        locked.public_slug = _board_slug()
        locked.published_at = timezone.now()
        locked.save(update_fields=["public_slug", "published_at"])
    board.public_slug, board.published_at = locked.public_slug, locked.published_at
    audit_record(
        organization=board.organization,
        actor=actor,
        action=AuditAction.ATTRIBUTE_BOARD_PUBLISHED,
        obj=board,
        data={"slug": locked.public_slug, "new": created, "via": via},
    )
    assert locked.public_slug is not None
    return locked.public_slug, created


@transaction.atomic
def attribute_board_unpublish(*, board: AttributeBoard, actor: User | None, via: str = "console") -> bool:
    """Take the board off its public address (which then answers 404 and is never reused)."""
    locked = AttributeBoard.objects.select_for_update().get(pk=board.pk)
    if locked.public_slug is None:
        return False
    slug = locked.public_slug
    locked.public_slug, locked.published_at = None, None
    locked.save(update_fields=["public_slug", "published_at"])
    board.public_slug, board.published_at = None, None
    audit_record(
        organization=board.organization,
        actor=actor,
        action=AuditAction.ATTRIBUTE_BOARD_UNPUBLISHED,
        obj=board,
        data={"slug": slug, "via": via},
    )
    return True


BOARD_SETTINGS = ("name", "attribute", "seed", "calls_per_entity", "top_k", "batch_size")


@transaction.atomic
def attribute_board_change(
    *, board: AttributeBoard, actor: User | None, changed: Sequence[str], via: str = "console"
) -> AttributeBoard:
    """Save a board's settings (its judge and organisation are fixed: another judge is a replication
    run). Runs already made keep what they recorded (attribute, seed, budget). Audited."""
    stored = AttributeBoard.objects.select_for_update().get(pk=board.pk)
    if (stored.judge_id, stored.organization_id) != (board.judge_id, board.organization_id):
        raise Invalid("A board's judge and organisation are fixed; start a run with another judge instead.")
    if not board.attribute.strip():
        raise Invalid("Name the attribute.", field_errors={"attribute": "Required."})
    if board.calls_per_entity < 2 or board.top_k < 1 or board.batch_size < 1:
        raise Invalid("calls_per_entity must be at least 2, top_k and batch_size at least 1.")
    if AttributeBoard.objects.filter(organization_id=board.organization_id, name=board.name).exclude(pk=board.pk):
        raise Invalid("A board of this name exists.", field_errors={"name": "Already used."})
    fields = [f for f in changed if f in BOARD_SETTINGS]
    board.save(update_fields=fields or None)
    audit_record(
        organization=board.organization,
        actor=actor,
        action=AuditAction.ATTRIBUTE_BOARD_CHANGED,
        obj=board,
        data={"changed": fields, "via": via},
    )
    return board


class AttributeBoardHasRuns(Conflict):
    pass


@transaction.atomic
def attribute_board_delete(*, board: AttributeBoard, actor: User | None, via: str = "console") -> None:
    """Delete a board that never ran (a run's ledger is kept for good: it may be public)."""
    if AttributeRun.objects.filter(board=board).exists():
        raise AttributeBoardHasRuns("This board has runs: their judgement ledger is kept, so it cannot be deleted.")
    audit_record(
        organization=board.organization,
        actor=actor,
        action=AuditAction.ATTRIBUTE_BOARD_DELETED,
        obj=board,
        data={"name": board.name, "via": via},
    )
    board.delete()


# --- Stored rater flags from the quality checks ----------------------------------------------------


def _windows(campaign: Campaign, kind: str) -> dict[int, int]:
    """Per rater with a cleared flag of this kind, the last vote id of the campaign when it was last
    cleared: their test starts again after it (a manager's review closes the old window; the votes
    before it were judged)."""
    cleared = (
        RaterFlag.objects.filter(organization_id=campaign.organization_id, kind=kind, cleared_at__isnull=False)
        .values("rater_id")
        .annotate(at=Max("cleared_at"))
    )
    windows: dict[int, int] = {}
    for row in cleared:
        last = Vote.objects.filter(campaign=campaign, created_at__lte=row["at"]).aggregate(m=Max("id"))["m"]
        windows[row["rater_id"]] = int(last or 0)
    return windows


def _in_force(campaign: Campaign, kind: str) -> set[int]:
    return set(
        RaterFlag.objects.filter(FLAG_IN_FORCE, organization_id=campaign.organization_id, kind=kind).values_list(
            "rater_id", flat=True
        )
    )


def rater_flags_check(*, campaign_id: int) -> list[RaterFlag]:
    """Run the campaign's quality checks over its vote log and store a flag (a new ``RaterFlag`` row,
    audited; the raters' votes leave the next snapshot, which records the flag ids) for every rater
    newly caught:

    - ``outlier_alpha``: the sequential e-value test against the consensus (``rater_outliers``) reached
      ``1/alpha`` within the rater's window (their whole history, or since a manager last cleared
      their outlier flag; each window is a test of its own);
    - ``gold_min_accuracy``: the upper end of the rater's 95% Wilson interval of gold accuracy (in the
      same window, for gold-accuracy flags) is below the minimum, so the shortfall is not chance.

    A rater with a flag of that kind in force is skipped (one in force per kind). Returns the new flags."""
    campaign = Campaign.objects.filter(pk=campaign_id).first()
    if campaign is None:
        return []
    raised: list[RaterFlag] = []
    users = {u.pk: u for u in User.objects.filter(memberships__organization_id=campaign.organization_id)}
    if campaign.outlier_alpha is not None:
        raised += _outliers_flag(campaign, campaign.outlier_alpha, users)
    if campaign.gold_min_accuracy is not None:
        raised += _gold_accuracy_flag(campaign, campaign.gold_min_accuracy, users)
    return raised


def _outliers_flag(campaign: Campaign, alpha: float, users: dict[int, User]) -> list[RaterFlag]:
    votes = selectors.vote_arrays(campaign_id=campaign.pk)
    if len(votes) == 0:
        return []
    skip = _in_force(campaign, RaterFlag.Kind.OUTLIER)
    windows = _windows(campaign, RaterFlag.Kind.OUTLIER)
    found: dict[int, dict[str, object]] = {}

    def run(mask: np.ndarray, only: int | None) -> None:
        result = rater_outliers(
            votes.rater[mask], votes.left[mask], votes.right[mask], votes.outcome[mask], alpha=alpha
        )
        ids = votes.vote_id[mask]
        for j, rater_id in enumerate(result.raters.tolist()):
            if (only is not None and rater_id != only) or (only is None and rater_id in windows):
                continue
            if rater_id in skip or not result.flagged[j]:
                continue
            found[rater_id] = {
                "alpha": alpha,
                "threshold": result.threshold,
                "e_value_max": float(np.exp(min(result.log_e_max[j], 700.0))),
                "votes": int(result.n_votes[j]),
                "votes_to_flag": int(result.votes_to_flag[j]),
                "flag_vote_id": int(ids[int(result.flag_row[j])]),
                "window_after_vote_id": windows.get(rater_id, 0),
                "method": result.method,
            }

    run(np.ones(len(votes), dtype=bool), None)
    for rater_id, after in windows.items():
        # The rater's own votes from the window only; everyone else's all count as the consensus.
        run((votes.rater != rater_id) | (votes.vote_id > after), rater_id)
    made = []
    for rater_id, evidence in sorted(found.items()):
        user = users.get(rater_id)
        if user is None:  # no longer a member: nothing to flag in this organisation
            continue
        flag = rater_flag_raise(
            organization=campaign.organization,
            rater=user,
            kind=RaterFlag.Kind.OUTLIER,
            campaign_id=campaign.pk,
            reason=f"Votes against the consensus in campaign {campaign.name!r} (#{campaign.pk}): sequential "
            f"test reached {evidence['e_value_max']:.3g} >= 1/alpha = {evidence['threshold']:.3g} at vote "
            f"#{evidence['flag_vote_id']} ({evidence['votes_to_flag']} votes).",
            evidence=evidence,
        )
        if flag is not None:
            made.append(flag)
    return made


def _gold_accuracy_flag(campaign: Campaign, minimum: float, users: dict[int, User]) -> list[RaterFlag]:
    skip = _in_force(campaign, RaterFlag.Kind.GOLD_ACCURACY)
    windows = _windows(campaign, RaterFlag.Kind.GOLD_ACCURACY)
    counts = {rater_id: (c.gold_answered, c.gold_correct) for rater_id, c in gold_counts(campaign=campaign).items()}
    for rater_id, after in windows.items():
        gold = Vote.objects.filter(campaign=campaign, rater_id=rater_id, source=BattleSource.GOLD, id__gt=after)
        answered = gold.count()
        correct = sum(
            1 for choice, expected in gold.values_list("choice", "battle__gold_expected") if choice == expected
        )
        counts[rater_id] = (answered, correct)
    made = []
    for rater_id, (answered, correct) in sorted(counts.items()):
        if rater_id in skip or answered == 0 or rater_id not in users:
            continue
        lower, upper = wilson_interval(np.array([correct]), np.array([answered]))
        if not float(upper[0]) < minimum:
            continue
        flag = rater_flag_raise(
            organization=campaign.organization,
            rater=users[rater_id],
            kind=RaterFlag.Kind.GOLD_ACCURACY,
            campaign_id=campaign.pk,
            reason=f"Gold accuracy {correct}/{answered} in campaign {campaign.name!r} (#{campaign.pk}): the 95% "
            f"interval's upper end {float(upper[0]):.2f} is below the minimum {minimum:.2f}.",
            evidence={
                "answered": answered,
                "correct": correct,
                "lower": float(lower[0]),
                "upper": float(upper[0]),
                "minimum": minimum,
                "window_after_vote_id": windows.get(rater_id, 0),
            },
        )
        if flag is not None:
            made.append(flag)
    return made
