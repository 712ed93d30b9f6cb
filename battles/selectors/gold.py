"""Gold battles and attention checks: unseen items, attention failures and blocks, qualification,
gold counts per rater, and the raters named or flagged in the console's reports."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import User
from django.db.models import Count, F, Q, QuerySet

from raters.models import FLAG_IN_FORCE, RaterFlag

from ..models import Battle, BattleSource, Campaign, Choice, GoldItem, Qualification, Vote

# --- Gold battles and attention checks -----------------------------------------------------------------


def gold_items_unseen(*, campaign: Campaign, user: User) -> QuerySet[GoldItem]:
    """The campaign's active gold items this rater has never been served (in any battle, voted or not)."""
    seen = Battle.objects.filter(campaign=campaign, rater=user, gold_item__isnull=False).values("gold_item_id")
    return GoldItem.objects.filter(campaign=campaign, active=True).exclude(pk__in=seen)


def battles_served_to(*, campaign: Campaign, user: User) -> int:
    """How many battles the rater has been handed in the campaign (the position in their sequence that
    the gold draw is seeded by)."""
    return Battle.objects.filter(campaign=campaign, rater=user).count()


def _attention_failed() -> Q:
    """A vote on an attention check that picked the broken answer or called it a tie (``both_bad`` is
    not a failure: the good answer may really be bad)."""
    return Q(choice=Choice.TIE) | (
        Q(battle__gold_expected=Choice.LEFT, choice=Choice.RIGHT)
        | Q(battle__gold_expected=Choice.RIGHT, choice=Choice.LEFT)
    )


def attention_failures(*, campaign: Campaign, user: User) -> int:
    return (
        Vote.objects.filter(
            campaign=campaign, rater=user, source=BattleSource.GOLD, battle__gold_item__kind=GoldItem.Kind.ATTENTION
        )
        .filter(_attention_failed())
        .count()
    )


def rater_blocked(*, campaign: Campaign, user: User) -> bool:
    """Blocked from the campaign: at least ``attention_block_after`` failed attention checks here and a
    flag in force (a manager who removes the flag lets the rater back in)."""
    if campaign.attention_block_after is None:
        return False
    if not RaterFlag.objects.filter(
        FLAG_IN_FORCE, organization_id=campaign.organization_id, rater=user, kind=RaterFlag.Kind.ATTENTION
    ).exists():
        return False
    return attention_failures(campaign=campaign, user=user) >= campaign.attention_block_after


def qualification_of(*, campaign: Campaign, user: User) -> Qualification | None:
    return Qualification.objects.filter(campaign=campaign, rater=user).first()


def gold_votes_of(*, campaign: Campaign, user: User) -> tuple[int, int]:
    """The rater's gold votes in the campaign: (answered, correct)."""
    counts = Vote.objects.filter(campaign=campaign, rater=user, source=BattleSource.GOLD).aggregate(
        answered=Count("id"), correct=Count("id", filter=Q(choice=F("battle__gold_expected")))
    )
    return int(counts["answered"]), int(counts["correct"])


@dataclass(frozen=True)
class GoldCounts:
    rater_id: int
    gold_answered: int  # votes on gold items and attention checks
    gold_correct: int  # of those, the known answer
    attention_answered: int
    attention_failed: int


def gold_counts(*, campaign: Campaign) -> dict[int, GoldCounts]:
    """Per rater, their votes on the campaign's gold battles: answered and correct (the vote equals the
    item's verdict on the sides shown), and of the attention checks among them, answered and failed."""
    gold = Vote.objects.filter(campaign=campaign, source=BattleSource.GOLD)
    attention = Q(battle__gold_item__kind=GoldItem.Kind.ATTENTION)
    rows = gold.values("rater_id").annotate(
        answered=Count("id"),
        correct=Count("id", filter=Q(choice=F("battle__gold_expected"))),
        attention_answered=Count("id", filter=attention),
        attention_failed=Count("id", filter=attention & _attention_failed()),
    )
    return {
        row["rater_id"]: GoldCounts(
            rater_id=row["rater_id"],
            gold_answered=row["answered"],
            gold_correct=row["correct"],
            attention_answered=row["attention_answered"],
            attention_failed=row["attention_failed"],
        )
        for row in rows.order_by("rater_id")
    }


def gold_items_of(campaign: Campaign) -> QuerySet[GoldItem]:
    return GoldItem.objects.filter(campaign=campaign)


def raters_named(*, organization_id: int, user_ids: list[int]) -> dict[int, str]:
    """Members of the organisation among ``user_ids``, by email (for the console's reports)."""
    return dict(
        User.objects.filter(pk__in=user_ids, memberships__organization_id=organization_id).values_list("pk", "email")
    )


def raters_flagged(*, organization_id: int, user_ids: list[int]) -> set[int]:
    return set(
        RaterFlag.objects.filter(FLAG_IN_FORCE, organization_id=organization_id, rater_id__in=user_ids).values_list(
            "rater_id", flat=True
        )
    )
