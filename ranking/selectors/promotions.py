"""Promotions as the API and the console read them: those a principal may see, one with its decisions."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.db.models import QuerySet

from raters.authentication import ApiKeyPrincipal
from raters.selectors import organizations_viewable_by, organizations_writable_by

from ..models import Promotion, PromotionDecision


def promotions_viewable_by(user: User | ApiKeyPrincipal) -> QuerySet[Promotion]:
    return Promotion.objects.filter(organization__in=organizations_viewable_by(user)).select_related(
        "experiment", "variant", "baseline"
    )


def promotions_writable_by(user: User | ApiKeyPrincipal) -> QuerySet[Promotion]:
    """Promotions the principal may stop: a read-write key's organisation's, or an owner's or manager's."""
    return Promotion.objects.filter(organization__in=organizations_writable_by(user)).select_related(
        "experiment", "variant", "baseline"
    )


def promotions_of_campaign(*, campaign_id: int, limit: int = 20) -> list[Promotion]:
    """The campaign's promotions, newest first, each with its latest decision (``latest``) for the dashboard."""
    promotions = list(
        Promotion.objects.filter(campaign_id=campaign_id)
        .select_related("experiment", "variant", "baseline")
        .order_by("-id")[:limit]
    )
    latest: dict[int, PromotionDecision] = {}
    for decision in PromotionDecision.objects.filter(promotion__in=promotions).order_by("promotion_id", "-id"):
        latest.setdefault(decision.promotion_id, decision)
    for promotion in promotions:
        promotion.latest = latest.get(promotion.pk)  # type: ignore[attr-defined]
    return promotions
