"""Writes for rankings: recompute every leaderboard of a campaign from its vote log, and schedule it."""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
from django.conf import settings
from django.contrib.auth.models import User
from django.core.cache import cache
from django.db import transaction
from django.db.models import Max

from battles.models import BattleSource, Campaign, Competitor, Vote
from battles.selectors import gold_counts
from raters.models import FLAG_IN_FORCE, AuditAction, RaterFlag, WebhookEvent
from raters.services import audit_record, rater_flag_raise, webhook_event_emit
from raters.tenancy import organization_scope, scopes_disabled

from . import selectors
from .compute import Method, board_compute, elo_compute
from .estimators.pairwise import wilson_interval
from .estimators.rater_outliers import rater_outliers
from .models import BoardPublication, LeaderboardSnapshot

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
