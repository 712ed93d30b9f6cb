"""Promotions as the API and the console read them: those a principal may see, one with its decisions."""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib.auth.models import User
from django.db.models import QuerySet

from battles.models import Variant
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


def promotion_offers(*, campaign_id: int, leader_id: int) -> list[dict[str, object]]:
    """Where the board's leader (``leader_id``, a competitor) could be promoted from the board: each A/B
    variant of the campaign's experiments that serves it, with the experiment's other variants that serve a
    competitor (the baseline to watch it against; the first by weight is offered) and the add form's query
    string. None where a promotion of that experiment is running already (one at a time)."""
    running = set(
        Promotion.objects.filter(campaign_id=campaign_id, status=Promotion.Status.RUNNING).values_list(
            "experiment_id", flat=True
        )
    )
    offers: list[dict[str, object]] = []
    variants = (
        Variant.objects.filter(experiment__campaign_id=campaign_id, competitor_id=leader_id)
        .exclude(experiment_id__in=running)
        .select_related("experiment")
        .order_by("experiment__key", "name")
    )
    for variant in variants:
        baseline = (
            Variant.objects.filter(experiment_id=variant.experiment_id, competitor__isnull=False)
            .exclude(pk=variant.pk)
            .order_by("-weight", "name")
            .first()
        )
        if baseline is None:
            continue
        query = urlencode(
            {
                "organization": variant.experiment.organization_id,
                "experiment": variant.experiment_id,
                "variant": variant.pk,
                "baseline": baseline.pk,
            }
        )
        offers.append({"experiment": variant.experiment, "variant": variant, "baseline": baseline, "query": query})
    return offers
