"""Crowd studies: a study by its public link, a participant by account, and over the API a campaign's
studies and their participants' progress."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.db.models import Count, F, FloatField, IntegerField, OuterRef, QuerySet, Subquery
from django.db.models.functions import Coalesce

from core.cached import cached_fact
from raters.tenancy import scopes_disabled

from ..models import Battle, BattleSource, Campaign, Participant, Qualification, Study, Vote


def study_by_slug(slug: str) -> Study | None:
    """The study behind a public link. The slug is the credential (like an invitation token), so the
    lookup is across organisations by design; the caller then works in the study's organisation."""
    with scopes_disabled():
        return Study.objects.select_related("campaign", "pool", "organization").filter(slug=slug).first()


def participant_key(user_id: int) -> str:
    """The cache key of "this account has a study participation" (core.cached; dropped by battles.receivers)."""
    return f"arena:fact:participant:{user_id}"


def participant_of_user(user: User) -> Participant | None:
    """The study participation behind a participant's account (an account made for one study), or None
    for everyone else. Asked on every request of a rater's cycle (the study gate), and nearly always None:
    whether the account has one at all comes from the shared cache."""
    if not user.is_authenticated:
        return None

    def has_one() -> bool:
        with scopes_disabled():  # in any organisation: the answer must not depend on the caller's scope
            return Participant.objects.filter(user=user).exists()

    if not cached_fact(participant_key(user.pk), has_one):
        return None
    return Participant.objects.select_related("study__campaign", "user").filter(user=user).first()


def participant_in_study(*, study: Study, user: User) -> Participant | None:
    participant = participant_of_user(user)
    return participant if participant is not None and participant.study_id == study.pk else None


# --- Crowd studies over the API: a campaign's studies and their participants' progress -------------


def studies_of(campaign: Campaign) -> QuerySet[Study]:
    return Study.objects.filter(campaign=campaign).select_related("campaign", "pool")


def study_of(*, campaign: Campaign, study_id: int) -> Study | None:
    return studies_of(campaign).filter(pk=study_id).first()


def participants_progress(study: Study) -> QuerySet[Participant]:
    """The study's participants, each annotated with ``votes`` (cast in the study's campaign) and
    ``voided`` (their battles there that were voided: timed out, left, a model failure, a refused
    answer). Counted in the database, one subquery each, whatever the page size."""
    votes = (
        Vote.objects.filter(campaign_id=study.campaign_id, rater_id=OuterRef("user_id"))
        .order_by()
        .values("rater_id")
        .annotate(n=Count("id"))
        .values("n")
    )
    voided = (
        Battle.objects.filter(campaign_id=study.campaign_id, rater_id=OuterRef("user_id"), status=Battle.Status.VOID)
        .order_by()
        .values("rater_id")
        .annotate(n=Count("id"))
        .values("n")
    )
    # The qualification (when the campaign asks for one): the decided row's outcome and counts, else
    # the gold votes so far (all of a qualifying rater's battles are its gold battles).
    decided = Qualification.objects.filter(campaign_id=study.campaign_id, rater_id=OuterRef("user_id"))
    gold = Vote.objects.filter(
        campaign_id=study.campaign_id, rater_id=OuterRef("user_id"), source=BattleSource.GOLD
    ).order_by()
    gold_answered = gold.values("rater_id").annotate(n=Count("id")).values("n")
    gold_correct = gold.filter(choice=F("battle__gold_expected")).values("rater_id").annotate(n=Count("id")).values("n")
    return (
        Participant.objects.filter(study=study)
        .select_related("study__campaign")
        .annotate(
            votes=Coalesce(Subquery(votes, output_field=IntegerField()), 0),
            voided=Coalesce(Subquery(voided, output_field=IntegerField()), 0),
            qualification_status=Subquery(decided.values("status")[:1]),
            qualification_answered=Subquery(decided.values("answered")[:1], output_field=IntegerField()),
            qualification_correct=Subquery(decided.values("correct")[:1], output_field=IntegerField()),
            qualification_threshold=Subquery(decided.values("threshold")[:1], output_field=FloatField()),
            gold_answered=Coalesce(Subquery(gold_answered, output_field=IntegerField()), 0),
            gold_correct=Coalesce(Subquery(gold_correct, output_field=IntegerField()), 0),
        )
    )


def study_progress(study: Study) -> dict[str, int]:
    """The study's participants by status, their votes in the campaign and their voided battles."""
    by_status = dict(Participant.objects.filter(study=study).order_by().values_list("status").annotate(n=Count("id")))
    mine = {"campaign_id": study.campaign_id, "rater__participant__study": study}
    return {
        "participants": sum(by_status.values()),
        **{status: by_status.get(status, 0) for status in Participant.Status.values},
        "votes": Vote.objects.filter(**mine).count(),
        "voided_battles": Battle.objects.filter(**mine, status=Battle.Status.VOID).count(),
    }
