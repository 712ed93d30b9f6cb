"""Promotions: a board's winning variant rolled out through a sticky A/B experiment in stages (5% -> 25% ->
50% -> 100% of units), each stage advancing only when the campaign's board still supports it, rolled back
when the board turns against it. Beat checks every running promotion (``promotions_check_task``).

The board watched is the newest overall raw snapshot of the experiment's campaign. At each check, in order:

1. the promoted variant's competitor is significantly worse than the baseline's (the board's difference
   interval, promoted minus baseline, lies wholly below 0) -> **rollback**: the rollout is cleared and the
   experiment assigns by its weights again, as before the promotion;
2. either competitor is not shown on the board (hidden, or no board yet) -> **hold**;
3. fewer than ``min_votes`` new votes on the promoted competitor since the stage began -> **hold**;
4. the promoted competitor's score is below the baseline's (trailing, not significantly) -> **hold**;
5. otherwise -> **advance** to the next stage's share (``complete`` after the last).

Every decision is a ``PromotionDecision`` row (a hold only when its reason changes); start, stop, advance,
rollback and completion also write an ``experiment.changed`` audit row."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from celery import shared_task
from django.contrib.auth.models import AnonymousUser, User
from django.db import IntegrityError, transaction
from django.utils import timezone

from battles.models import Experiment, Variant
from core.errors import Conflict, Invalid
from core.tasks import TransactionAwareTask
from raters.models import AuditAction
from raters.services import audit_record
from raters.tenancy import organization_scope, scopes_disabled

from ..models import LeaderboardSnapshot, Promotion, PromotionDecision

logger = logging.getLogger(__name__)

Action = PromotionDecision.Action

__all__ = [
    "promotion_check",
    "promotion_validate",
    "promotion_start",
    "promotion_stop",
    "promotions_check",
    "promotions_check_task",
]


def _stages(stages: Sequence[Any]) -> list[float]:
    try:
        values = [float(s) for s in stages]
    except (TypeError, ValueError):
        raise Invalid("stages: numbers, e.g. [0.05, 0.25, 0.5, 1].", field_errors={"stages": "Numbers."}) from None
    if not values or len(values) > 20:
        raise Invalid("stages: 1 to 20 shares.", field_errors={"stages": "1 to 20 shares."})
    if any(not 0.0 < s <= 1.0 for s in values) or any(b <= a for a, b in zip(values, values[1:], strict=False)):
        raise Invalid(
            "stages: shares in (0, 1], strictly increasing.", field_errors={"stages": "Strictly increasing, (0, 1]."}
        )
    return values


def _board(promotion: Promotion) -> LeaderboardSnapshot | None:
    return (
        LeaderboardSnapshot.objects.filter(
            campaign_id=promotion.campaign_id, category="", view=LeaderboardSnapshot.View.RAW
        )
        .order_by("-version")
        .first()
    )


def _row(snapshot: LeaderboardSnapshot | None, competitor_id: int | None) -> dict[str, Any] | None:
    if snapshot is None or competitor_id is None:
        return None
    return next((row for row in snapshot.rows if row.get("competitor_id") == competitor_id), None)


def _difference(
    snapshot: LeaderboardSnapshot, a: int, b: int, rows: tuple[dict[str, Any], dict[str, Any]]
) -> dict[str, Any]:
    """Promoted minus baseline on the board: its estimate and per-pair interval (the pairwise section's; where
    the board has none, the two competitors' own intervals: significantly worse when they do not overlap)."""
    estimate = float(rows[0]["score"]) - float(rows[1]["score"])
    pairwise = snapshot.pairwise or {}
    ids = pairwise.get("competitor_ids") or []
    diff = pairwise.get("difference") or {}
    if a in ids and b in ids and "lower" in diff:
        i, j = ids.index(a), ids.index(b)
        return {
            "estimate": round(estimate, 2),
            "lower": diff["lower"][i][j],
            "upper": diff["upper"][i][j],
            "interval": "the board's difference interval (this pair alone)",
        }
    upper = None
    if rows[0].get("upper") is not None and rows[1].get("lower") is not None:
        upper = float(rows[0]["upper"]) - float(rows[1]["lower"])
    lower = None
    if rows[0].get("lower") is not None and rows[1].get("upper") is not None:
        lower = float(rows[0]["lower"]) - float(rows[1]["upper"])
    return {
        "estimate": round(estimate, 2),
        "lower": lower,
        "upper": upper,
        "interval": "the two competitors' own intervals (the board has no difference intervals)",
    }


def _votes(snapshot: LeaderboardSnapshot | None, competitor_id: int | None) -> int:
    row = _row(snapshot, competitor_id)
    return int(row["votes"]) if row is not None else 0


def _decide(
    promotion: Promotion,
    *,
    action: str,
    reason: str,
    reason_code: str = "",
    snapshot: LeaderboardSnapshot | None = None,
    figures: dict[str, Any] | None = None,
    actor: User | AnonymousUser | None = None,
    share: float | None = None,
) -> PromotionDecision:
    return PromotionDecision.objects.create(
        organization_id=promotion.organization_id,
        promotion=promotion,
        action=action,
        reason=reason,
        reason_code=reason_code or action,
        stage=promotion.stage,
        share=promotion.share if share is None else share,
        board_version=snapshot.version if snapshot is not None else None,
        figures=figures or {},
        actor=actor if actor is not None and actor.is_authenticated else None,
    )


def _audit(promotion: Promotion, actor: User | AnonymousUser | None, data: dict[str, Any]) -> None:
    audit_record(
        organization=promotion.experiment.organization,
        actor=actor,
        action=AuditAction.EXPERIMENT_CHANGED,
        obj=promotion.experiment,
        data={"promotion": promotion.pk, "variant": promotion.variant.name, **data},
    )


def promotion_validate(
    *, experiment: Experiment, variant: Variant, baseline: Variant, stages: Sequence[Any], min_votes: int
) -> list[float]:
    """The checks of ``promotion_start`` that need no lock (the console's form runs them too); the stages as
    floats."""
    shares = _stages(stages)
    if experiment.campaign_id is None:
        raise Invalid("The experiment has no campaign: there is no board to watch.")
    if variant.experiment_id != experiment.pk or baseline.experiment_id != experiment.pk:
        raise Invalid("Both variants must be the experiment's.")
    if variant.pk == baseline.pk:
        raise Invalid("The baseline must be another variant.", field_errors={"baseline": "Another variant."})
    for name, v in (("variant", variant), ("baseline", baseline)):
        if v.competitor_id is None:
            raise Invalid(
                f"The {name} names no competitor: the board cannot say how it fares.",
                field_errors={name: "It must name a competitor of the experiment's campaign."},
            )
    if not 1 <= min_votes <= 10_000_000:
        raise Invalid("min_votes: 1 to 10,000,000.", field_errors={"min_votes": "1 to 10,000,000."})
    if not experiment.active:
        raise Conflict(f"Experiment {experiment.key} is not active.")
    if Promotion.objects.filter(experiment=experiment, status=Promotion.Status.RUNNING).exists():
        # Checked here for the console's form; the partial unique constraint settles a race.
        raise Conflict(f"Experiment {experiment.key} already has a running promotion.")
    return shares


@transaction.atomic
def promotion_start(
    *,
    experiment: Experiment,
    variant: Variant,
    baseline: Variant,
    stages: Sequence[Any] = (0.05, 0.25, 0.5, 1.0),
    min_votes: int = 200,
    actor: User | AnonymousUser | None,
) -> Promotion:
    """Start rolling ``variant`` out in ``experiment`` at ``stages[0]``, watched against ``baseline`` on the
    board of the experiment's campaign (both variants must name competitors of it). A unit already assigned
    keeps its variant unless the stage moves it into the promoted one (``battles.experimenting.rollout_index``)."""
    shares = promotion_validate(
        experiment=experiment, variant=variant, baseline=baseline, stages=stages, min_votes=min_votes
    )
    campaign_id = experiment.campaign_id
    assert campaign_id is not None  # promotion_validate refused an experiment without a campaign
    snapshot = (
        LeaderboardSnapshot.objects.filter(campaign_id=campaign_id, category="", view=LeaderboardSnapshot.View.RAW)
        .order_by("-version")
        .first()
    )
    try:
        with transaction.atomic():
            promotion = Promotion.objects.create(
                organization_id=experiment.organization_id,
                campaign_id=campaign_id,
                experiment=experiment,
                variant=variant,
                baseline=baseline,
                stages=shares,
                min_votes=min_votes,
                stage_votes_at_start=_votes(snapshot, variant.competitor_id),
                created_by=actor if actor is not None and actor.is_authenticated else None,
            )
    except IntegrityError:
        raise Conflict(f"Experiment {experiment.key} already has a running promotion.") from None
    Experiment.objects.filter(pk=experiment.pk).update(rollout_variant=variant, rollout_share=shares[0])
    _decide(
        promotion,
        action=Action.START,
        reason=f"started at {shares[0]:.0%} of units",
        snapshot=snapshot,
        actor=actor,
        figures={"stages": shares, "min_votes": min_votes, "votes_at_start": promotion.stage_votes_at_start},
    )
    _audit(promotion, actor, {"started": True, "stages": shares, "share": shares[0]})
    return promotion


def _end(promotion: Promotion, status: str, *, rollback: bool) -> None:
    promotion.status = status
    promotion.ended_at = timezone.now()
    promotion.save(update_fields=["status", "ended_at"])
    if rollback:
        Experiment.objects.filter(pk=promotion.experiment_id, rollout_variant=promotion.variant_id).update(
            rollout_variant=None, rollout_share=None
        )


@transaction.atomic
def promotion_stop(*, promotion: Promotion, actor: User | AnonymousUser | None, reason: str = "") -> Promotion:
    """A manager stops a running promotion: the rollout is cleared (the experiment assigns by its weights, as
    before the promotion)."""
    promotion = (
        Promotion.objects.select_for_update().select_related("experiment__organization", "variant").get(pk=promotion.pk)
    )
    if promotion.status != Promotion.Status.RUNNING:
        raise Conflict(f"The promotion is {promotion.get_status_display().lower()}, not running.")
    _end(promotion, Promotion.Status.STOPPED, rollback=True)
    _decide(promotion, action=Action.STOP, reason=reason or "stopped by a manager", actor=actor, share=0.0)
    _audit(promotion, actor, {"stopped": True})
    return promotion


@transaction.atomic
def promotion_check(*, promotion: Promotion) -> PromotionDecision | None:
    """Watch the board once for a running promotion and act (see the module's rules). Returns the decision
    recorded, or None (not running, or a hold whose reason has not changed)."""
    locked = (
        Promotion.objects.select_for_update()
        .select_related("experiment__organization", "variant", "baseline")
        .filter(pk=promotion.pk)
        .first()
    )
    if locked is None or locked.status != Promotion.Status.RUNNING:
        return None
    promotion = locked
    snapshot = _board(promotion)
    a, b = promotion.variant.competitor_id, promotion.baseline.competitor_id
    rows = (_row(snapshot, a), _row(snapshot, b))
    new_votes = _votes(snapshot, a) - promotion.stage_votes_at_start
    figures: dict[str, Any] = {"new_votes": new_votes, "min_votes": promotion.min_votes}

    def hold(code: str, reason: str) -> PromotionDecision | None:
        last = promotion.decisions.order_by("-id").first()
        if last is not None and (last.action, last.stage, last.reason_code) == (Action.HOLD, promotion.stage, code):
            return None
        return _decide(
            promotion, action=Action.HOLD, reason=reason, reason_code=code, snapshot=snapshot, figures=figures
        )

    if snapshot is None or rows[0] is None or rows[1] is None or rows[0].get("hidden") or rows[1].get("hidden"):
        return hold("not_on_board", "the board does not show both competitors yet")
    assert snapshot is not None and rows[0] is not None and rows[1] is not None
    difference = _difference(snapshot, int(a), int(b), (rows[0], rows[1]))  # type: ignore[arg-type]
    figures["difference"] = difference
    if difference["upper"] is not None and float(difference["upper"]) < 0:
        _end(promotion, Promotion.Status.ROLLED_BACK, rollback=True)
        decision = _decide(
            promotion,
            action=Action.ROLLBACK,
            reason=f"significantly worse than {promotion.baseline.name}: difference {difference['estimate']} "
            f"({difference['lower']} to {difference['upper']})",
            snapshot=snapshot,
            figures=figures,
            share=0.0,
        )
        _audit(promotion, None, {"rolled_back": True, "board_version": snapshot.version})
        return decision
    if new_votes < promotion.min_votes:
        return hold("insufficient_votes", f"{new_votes} of {promotion.min_votes} new votes in this stage")
    if difference["estimate"] < 0:
        return hold(
            "trailing", f"trails {promotion.baseline.name} by {-difference['estimate']} points (not significantly)"
        )
    if promotion.stage + 1 >= len(promotion.stages):
        _end(promotion, Promotion.Status.COMPLETED, rollback=False)
        decision = _decide(
            promotion,
            action=Action.COMPLETE,
            reason="the last stage held up on the board",
            snapshot=snapshot,
            figures=figures,
        )
        _audit(promotion, None, {"completed": True, "share": promotion.share})
        return decision
    promotion.stage += 1
    promotion.stage_started_at = timezone.now()
    promotion.stage_votes_at_start = _votes(snapshot, a)
    promotion.save(update_fields=["stage", "stage_started_at", "stage_votes_at_start"])
    Experiment.objects.filter(pk=promotion.experiment_id).update(rollout_share=promotion.share)
    decision = _decide(
        promotion,
        action=Action.ADVANCE,
        reason=f"advanced to {promotion.share:.0%} of units: {new_votes} new votes, "
        f"{difference['estimate']} points over {promotion.baseline.name}",
        snapshot=snapshot,
        figures=figures,
    )
    _audit(promotion, None, {"advanced": True, "stage": promotion.stage, "share": promotion.share})
    return decision


def promotions_check() -> int:
    """Check every running promotion of every organisation (beat); returns how many decisions were recorded."""
    with scopes_disabled():
        running = list(Promotion.objects.filter(status=Promotion.Status.RUNNING).values_list("pk", "organization_id"))
    recorded = 0
    for pk, organization_id in running:
        with organization_scope(organization_id):
            promotion = Promotion.objects.filter(pk=pk).first()
            if promotion is not None and promotion_check(promotion=promotion) is not None:
                recorded += 1
    return recorded


@shared_task(base=TransactionAwareTask, name="ranking.tasks.promotions_check_task")
def promotions_check_task() -> int:
    """Beat's watch over the running promotions, across organisations: the service opens each one's scope."""
    return promotions_check()
