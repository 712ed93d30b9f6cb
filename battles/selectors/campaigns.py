"""Campaigns by who may see them (raters, viewers, writers, managers), the REST API's lists and counts,
and whether a rater still owes the campaign's consent step."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import User
from django.db.models import Count, IntegerField, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce

from core.prepared import Prepared
from raters.authentication import ApiKeyPrincipal
from raters.models import RaterPool
from raters.selectors import organizations_managed_by, organizations_viewable_by, organizations_writable_by

from ..models import Battle, Campaign, Competitor, Prompt, RaterConsent, Vote, consent_hash
from ..prompting import CATEGORIES
from .studies import participant_of_user


def campaigns_for_rater(user: User) -> QuerySet[Campaign]:
    """Open campaigns that name a pool the user belongs to."""
    return _campaigns_for_rater_id(user.pk)


def _campaigns_for_rater_id(user_id: int) -> QuerySet[Campaign]:
    return (
        Campaign.objects.filter(status=Campaign.Status.OPEN, rater_pools__members=user_id)
        .select_related("organization")
        .distinct()
        .order_by("organization__name", "name")
    )


# Read on each of a rater's requests: compiled once (core.prepared), run with each call's values.
_campaign_for_rater: Prepared[Campaign] = Prepared(
    lambda campaign_id, user_id: _campaigns_for_rater_id(user_id).filter(pk=campaign_id)[:1],
    campaign_id=int,
    user_id=int,
)
_pools_of_rater: Prepared[RaterPool] = Prepared(
    lambda campaign_id, user_id: pools_of_rater_in(campaign_id, user_id).order_by("id")[:1],
    campaign_id=int,
    user_id=int,
)


def pools_of_rater_in(campaign_id: int | OuterRef, user_id: int | OuterRef) -> QuerySet[RaterPool]:
    """The pools of the campaign that the rater belongs to, by ids (what a statement compiled once is built
    from: the vote's flip asks that there be one, ``pool_for_rater`` takes the oldest)."""
    return RaterPool.objects.filter(campaigns=campaign_id, members=user_id)


def campaigns_viewable_by(user: User | ApiKeyPrincipal) -> QuerySet[Campaign]:
    """Campaigns whose vote log and leaderboards the user (or API key) may read: owners, managers and
    viewers of the organisation. The one scope behind the export, the read API and the leaderboard page."""
    return Campaign.objects.filter(organization__in=organizations_viewable_by(user))


def campaign_viewable_by(*, user: User | ApiKeyPrincipal, campaign_id: int) -> Campaign | None:
    return campaigns_viewable_by(user).filter(pk=campaign_id).first()


def campaigns_writable_by(user: User | ApiKeyPrincipal) -> QuerySet[Campaign]:
    """Campaigns the principal may change through the API (import prompts, push shadow battles, publish):
    a read-write key's organisation, or the organisations a person owns or manages."""
    return Campaign.objects.filter(organization__in=organizations_writable_by(user))


def campaign_writable_by(*, user: User | ApiKeyPrincipal, campaign_id: int) -> Campaign | None:
    return campaigns_writable_by(user).filter(pk=campaign_id).first()


def campaigns_with_results_for(user: User) -> QuerySet[Campaign]:
    """The leaderboards to list for the user: viewable campaigns that have left the draft stage."""
    return (
        campaigns_viewable_by(user)
        .exclude(status=Campaign.Status.DRAFT)
        .select_related("organization")
        .order_by("organization__name", "name")
    )


def campaigns_managed_by(user: User) -> QuerySet[Campaign]:
    """Every campaign, in any state, of the organisations the user owns or manages: the manager's home."""
    return (
        Campaign.objects.filter(organization__in=organizations_managed_by(user))
        .select_related("organization")
        .order_by("organization__name", "name")
    )


def campaign_for_rater(*, user: User, campaign_id: int) -> Campaign | None:
    if type(campaign_id) is not int or type(user.pk) is not int:
        return campaigns_for_rater(user).filter(pk=campaign_id).first()
    return _campaign_for_rater.first(campaign_id=campaign_id, user_id=user.pk)


def pool_for_rater(*, campaign: Campaign, user: User) -> RaterPool | None:
    """The pool the rater votes through in this campaign (the oldest, if several qualify)."""
    return _pools_of_rater.first(campaign_id=campaign.pk, user_id=user.pk)


def rater_in_campaign_pool(*, campaign: Campaign, user: User) -> bool:
    """Whether the rater is (still) in a pool the campaign names: what a vote checks."""
    return pool_for_rater(campaign=campaign, user=user) is not None


# --- The REST API's reads: campaigns, competitors, categories, prompts --------------------------------


def rows_counted(queryset: QuerySet[Any]) -> Coalesce:
    """``COUNT(*)`` of ``queryset``'s rows as a scalar subquery, 0 where there are none, for an annotation or a
    filter (rows of one campaign: grouped by it)."""
    counted = queryset.order_by().values("campaign").annotate(n=Count("*")).values("n")
    return Coalesce(Subquery(counted, output_field=IntegerField()), 0)


def _count_of(queryset: QuerySet[Any]) -> Coalesce:
    """A correlated ``COUNT(*)`` of ``queryset``'s rows of the outer campaign (one subquery per count, so
    three counts do not multiply into a join of competitors × prompts × votes)."""
    return rows_counted(queryset.filter(campaign=OuterRef("pk")))


def campaigns_with_counts(user: User | ApiKeyPrincipal) -> QuerySet[Campaign]:
    """``campaigns_viewable_by`` with ``n_competitors`` (as ``competitors_of`` lists them: no gold
    pseudo-competitor), ``n_prompts``, ``n_votes`` (every vote in the log, gold ones too: ``vote_counts``) and
    ``n_gold_votes`` annotated."""
    return campaigns_viewable_by(user).annotate(
        n_competitors=_count_of(Competitor.objects.filter(gold=False)),
        n_prompts=_count_of(Prompt.objects.all()),
        n_votes=_count_of(Vote.objects.all()),
        n_gold_votes=_count_of(Vote.objects.filter(source=Battle.Source.GOLD)),
    )


@dataclass(frozen=True)
class VoteCounts:
    """The one definition of a campaign's "votes" that every page and the API show: every vote in the log
    (``total``), of which ``gold`` were cast on gold battles and are not ranked (the boards rank from the
    others, ``ranked_pool``, before their exclusion policy)."""

    total: int
    gold: int

    @property
    def ranked_pool(self) -> int:
        return self.total - self.gold


def vote_counts(*, campaign_id: int) -> VoteCounts:
    """The campaign's votes now (``VoteCounts``)."""
    found = Vote.objects.filter(campaign_id=campaign_id).aggregate(
        total=Count("id"), gold=Count("id", filter=Q(source=Battle.Source.GOLD))
    )
    return VoteCounts(total=int(found["total"]), gold=int(found["gold"]))


def competitors_of(campaign: Campaign) -> QuerySet[Competitor]:
    """The campaign's competitors as lists show them: not the gold pseudo-competitors (they present
    known answers, are never ranked and would only confuse a list of models)."""
    return Competitor.objects.filter(campaign=campaign, gold=False).select_related("endpoint")


def prompts_of(campaign: Campaign) -> QuerySet[Prompt]:
    return Prompt.objects.filter(campaign=campaign)


@dataclass(frozen=True)
class CategoryCounts:
    category: str
    prompts: int
    active_prompts: int
    votes: int


def category_counts(campaign: Campaign) -> list[CategoryCounts]:
    """Every category (``prompting.CATEGORIES``, in that order), with its prompts and the votes the log
    records for it (the vote's own category, as stored when it was cast)."""
    prompts: dict[str, tuple[int, int]] = {
        row["category"]: (row["n"], row["active"])
        for row in Prompt.objects.filter(campaign=campaign)
        .order_by()
        .values("category")
        .annotate(n=Count("*"), active=Count("pk", filter=Q(active=True)))
    }
    votes: dict[str, int] = dict(
        Vote.objects.filter(campaign=campaign)
        .order_by()
        .values("category")
        .annotate(n=Count("*"))
        .values_list("category", "n")
    )
    return [
        CategoryCounts(
            category=category,
            prompts=prompts.get(category, (0, 0))[0],
            active_prompts=prompts.get(category, (0, 0))[1],
            votes=votes.get(category, 0),
        )
        for category in CATEGORIES
    ]


# --- A campaign's own consent step ------------------------------------------------------------------------


def campaign_consent_due(*, campaign: Campaign, user: User) -> bool:
    """Whether the rater must agree to the campaign's consent text before a battle: the campaign has
    one and no row records this rater agreeing to this very text. A crowd participant who agreed to
    their study's own consent text has given it (the study's page is where they read it)."""
    if not campaign.consent_text:
        return False
    participant = participant_of_user(user)
    if (
        participant is not None
        and participant.study.campaign_id == campaign.pk
        and participant.study.consent_text
        and participant.consented_at is not None
    ):
        return False
    return not RaterConsent.objects.filter(
        campaign=campaign, rater=user, text_hash=consent_hash(campaign.consent_text)
    ).exists()


def campaign_organization_id(campaign_id: int) -> int:
    """The organisation a campaign belongs to: the tenant scope a task queued for it runs in."""
    return Campaign.objects.values_list("organization_id", flat=True).get(pk=campaign_id)
