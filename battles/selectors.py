"""Reads for campaigns and battles. Each takes the user or organisation it is scoped to."""

from __future__ import annotations

import random
from collections.abc import Iterator
from uuid import UUID

from django.contrib.auth.models import User
from django.db.models import Count, QuerySet

from raters.authentication import ApiKeyPrincipal
from raters.models import RaterPool
from raters.selectors import organizations_viewable_by

from .models import Battle, Campaign, Competitor, Prompt, Vote
from .sampling import active_pair_weights


def campaigns_for_rater(user: User) -> QuerySet[Campaign]:
    """Open campaigns that name a pool the user belongs to."""
    return (
        Campaign.objects.filter(status=Campaign.Status.OPEN, rater_pools__members=user)
        .select_related("organization")
        .distinct()
        .order_by("organization__name", "name")
    )


def campaigns_viewable_by(user: User | ApiKeyPrincipal) -> QuerySet[Campaign]:
    """Campaigns whose vote log and leaderboards the user (or API key) may read: owners, managers and
    viewers of the organisation. The one scope behind the export, the read API and the leaderboard page."""
    return Campaign.objects.filter(organization__in=organizations_viewable_by(user))


def campaign_viewable_by(*, user: User | ApiKeyPrincipal, campaign_id: int) -> Campaign | None:
    return campaigns_viewable_by(user).filter(pk=campaign_id).first()


def campaigns_with_results_for(user: User) -> QuerySet[Campaign]:
    """The leaderboards to list for the user: viewable campaigns that have left the draft stage."""
    return (campaigns_viewable_by(user).exclude(status=Campaign.Status.DRAFT).select_related("organization")
            .order_by("organization__name", "name"))


def campaign_for_rater(*, user: User, campaign_id: int) -> Campaign | None:
    return campaigns_for_rater(user).filter(pk=campaign_id).first()


def pool_for_rater(*, campaign: Campaign, user: User) -> RaterPool | None:
    """The pool the rater votes through in this campaign (the oldest, if several qualify)."""
    return campaign.rater_pools.filter(members=user).order_by("id").first()


def battle_for_rater(*, user: User, battle_id: UUID | str) -> Battle | None:
    """A rater sees only their own battles; anything else is indistinguishable from a missing one."""
    try:
        return (
            Battle.objects.select_related("campaign", "prompt", "left__endpoint", "right__endpoint")
            .filter(pk=battle_id, rater=user)
            .first()
        )
    except (ValueError, TypeError):
        return None


def battle_pending_for_rater(*, campaign: Campaign, user: User) -> Battle | None:
    """A battle already assigned and not yet voted on is shown again rather than replaced, so reloading
    the page cannot be used to regenerate answers or to fish for a preferred pair."""
    return (
        Battle.objects.filter(
            campaign=campaign, rater=user, status__in=(Battle.Status.READY, Battle.Status.GENERATING)
        )
        .order_by("created_at")
        .first()
    )


def battles_in_session(*, campaign: Campaign, user: User, session_key: str) -> int:
    return Battle.objects.filter(campaign=campaign, rater=user, session_key=session_key).exclude(
        status=Battle.Status.VOID
    ).count()


def votes_by_rater(*, campaign: Campaign, user: User) -> int:
    return Vote.objects.filter(campaign=campaign, rater=user).count()


def votes_on_prompt_hash(*, campaign: Campaign, text_hash: str) -> int:
    return Vote.objects.filter(campaign=campaign, prompt_hash=text_hash).count()


def prompt_candidates(*, campaign: Campaign, user: User) -> QuerySet[Prompt]:
    """Pool prompts this rater has not rated yet and whose hash is under the campaign's cap."""
    # Seen means: in a battle of this rater that was not voided (a model outage must not use prompts
    # up), matched by normalised text, so a duplicate in the pool is not shown twice.
    seen = Battle.objects.filter(campaign=campaign, rater=user).exclude(status=Battle.Status.VOID).values(
        "prompt__text_hash")
    prompts = Prompt.objects.filter(campaign=campaign, source=Prompt.Source.POOL, active=True).exclude(
        text_hash__in=seen
    )
    if campaign.prompt_hash_cap is not None:
        full = (
            Vote.objects.filter(campaign=campaign)
            .values("prompt_hash")
            .annotate(n=Count("id"))
            .filter(n__gte=campaign.prompt_hash_cap)
            .values("prompt_hash")
        )
        prompts = prompts.exclude(text_hash__in=full)
    return prompts


def prompt_pick(*, campaign: Campaign, user: User, rng: random.Random) -> Prompt | None:
    ids = list(prompt_candidates(campaign=campaign, user=user).values_list("id", flat=True))
    if not ids:
        return None
    return Prompt.objects.get(pk=rng.choice(ids))


def pair_pick(*, campaign: Campaign, rng: random.Random) -> tuple[Competitor, Competitor] | None:
    """A pair of active competitors under the campaign's sampling policy; which one is shown left is a
    coin flip either way."""
    competitors = list(Competitor.objects.filter(campaign=campaign, active=True).select_related("endpoint")
                       .order_by("id"))
    if len(competitors) < 2:
        return None
    if campaign.sampling == Campaign.Sampling.ACTIVE:
        pairs = [(a, b) for i, a in enumerate(competitors) for b in competitors[i + 1:]]
        weights = active_pair_weights([c.pk for c in competitors], _current_intervals(campaign))
        first, second = rng.choices(pairs, weights=weights, k=1)[0]
        return (first, second) if rng.random() < 0.5 else (second, first)
    first, second = rng.sample(competitors, 2)
    return first, second


def _current_intervals(campaign: Campaign) -> dict[int, tuple[float, float]]:
    """Score intervals of the competitors the newest overall raw leaderboard shows, in its largest
    connected group: intervals of groups that never met cannot be compared, so the others count as not
    placed yet (and get the boost that connects them). A competitor with an open interval side (a
    one-sided record: the votes bound it on one side only) is not placed yet either."""
    from ranking.models import LeaderboardSnapshot

    rows = (LeaderboardSnapshot.objects.filter(campaign=campaign, category="", view=LeaderboardSnapshot.View.RAW)
            .order_by("-version").values_list("rows", flat=True).first())
    shown = [row for row in rows or [] if not row["hidden"] and row["lower"] is not None and row["upper"] is not None]
    if not shown:
        return {}
    sizes: dict[int, int] = {}
    for row in shown:
        sizes[row["component"]] = sizes.get(row["component"], 0) + 1
    main = max(sizes, key=lambda c: (sizes[c], -c))
    return {row["competitor_id"]: (row["lower"], row["upper"]) for row in shown if row["component"] == main}


def votes_for_export(*, campaign: Campaign) -> Iterator[Vote]:
    return Vote.objects.filter(campaign=campaign).order_by("id").iterator(chunk_size=2000)
