"""Stored rater flags from the quality checks: the outlier test against the consensus and the gold
accuracy minimum, run after a recompute; each newly caught rater gets a flag (audited)."""

from __future__ import annotations

import numpy as np
from celery import shared_task
from django.contrib.auth.models import User
from django.db.models import Max

from battles.models import BattleSource, Campaign, Vote
from battles.selectors import gold_counts
from raters.models import FLAG_IN_FORCE, RaterFlag
from raters.services import rater_flag_raise
from raters.tenancy import TenantTask

from .. import selectors
from ..estimators.pairwise import wilson_interval
from ..estimators.rater_outliers import rater_outliers


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


@shared_task(base=TenantTask, acks_late=True, name="ranking.tasks.rater_flags_check_task")
def rater_flags_check_task(campaign_id: int, *, organization_id: int) -> int:
    """After a recompute: the campaign's quality checks, stored as flags (each a new row)."""
    return len(rater_flags_check(campaign_id=campaign_id))


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
