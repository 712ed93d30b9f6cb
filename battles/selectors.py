"""Reads for campaigns and battles. Each takes the user or organisation it is scoped to."""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import connection
from django.db.models import (
    Count,
    F,
    FloatField,
    IntegerField,
    Max,
    Min,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Sum,
    TextField,
)
from django.db.models.expressions import RawSQL
from django.db.models.functions import Coalesce
from django.utils import timezone

from raters.authentication import ApiKeyPrincipal
from raters.models import FLAG_IN_FORCE, RaterFlag, RaterPool
from raters.selectors import organizations_managed_by, organizations_viewable_by, organizations_writable_by
from raters.tenancy import scopes_disabled
from serving.models import Health
from serving.selectors import endpoint_outage_periods, periods_overlap_s

from . import exporting, hooks
from .exporting import VoteFilters
from .models import (
    Battle,
    BattleSource,
    Campaign,
    Choice,
    Competitor,
    Experiment,
    ExportJob,
    Exposure,
    Generation,
    GoldItem,
    Judge,
    JudgeRun,
    JudgeVerdict,
    Participant,
    Prompt,
    Qualification,
    RaterConsent,
    Study,
    Turn,
    Variant,
    Vote,
    consent_hash,
)
from .prompting import CATEGORIES
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
    return campaigns_for_rater(user).filter(pk=campaign_id).first()


def pool_for_rater(*, campaign: Campaign, user: User) -> RaterPool | None:
    """The pool the rater votes through in this campaign (the oldest, if several qualify)."""
    return campaign.rater_pools.filter(members=user).order_by("id").first()


def rater_in_campaign_pool(*, campaign: Campaign, user: User) -> bool:
    """Whether the rater is (still) in a pool the campaign names: what a vote checks."""
    return campaign.rater_pools.filter(members=user).exists()


def battle_for_rater(*, user: User, battle_id: UUID | str) -> Battle | None:
    """A rater sees only their own battles; anything else is indistinguishable from a missing one."""
    try:
        return Battle.objects.select_related("campaign", "prompt", "left__endpoint", "right__endpoint").get(
            pk=battle_id, rater=user
        )
    except (Battle.DoesNotExist, ValueError, TypeError, ValidationError):
        return None


def battle_pending_for_rater(*, campaign: Campaign, user: User) -> Battle | None:
    """A battle already assigned and not yet voted on is shown again rather than replaced, so reloading
    the page cannot be used to regenerate answers or to fish for a preferred pair."""
    return (
        Battle.objects.filter(campaign=campaign, rater=user, status__in=(Battle.Status.READY, Battle.Status.GENERATING))
        .order_by("created_at")
        .first()
    )


def battles_in_session(*, campaign: Campaign, user: User, session_key: str) -> int:
    return (
        Battle.objects.filter(campaign=campaign, rater=user, session_key=session_key)
        .exclude(status=Battle.Status.VOID)
        .count()
    )


def battle_position_in_session(battle: Battle) -> int:
    """The battle's number in the session it was handed out in (1 for the first), counted as the
    session cap counts: battles that were not voided."""
    return (
        Battle.objects.filter(
            campaign_id=battle.campaign_id,
            rater_id=battle.rater_id,
            session_key=battle.session_key,
            created_at__lte=battle.created_at,
        )
        .exclude(status=Battle.Status.VOID)
        .count()
    )


@dataclass(frozen=True)
class RaterProgress:
    """Where the rater stands against the campaign's caps, for the pages to say so before a refusal."""

    in_session: int
    session_cap: int
    votes: int
    vote_cap: int | None

    @property
    def session_full(self) -> bool:
        return self.in_session >= self.session_cap

    @property
    def campaign_full(self) -> bool:
        return self.vote_cap is not None and self.votes >= self.vote_cap

    @property
    def stopped(self) -> bool:
        """No new battle can be handed out (a pending one can still be finished)."""
        return self.session_full or self.campaign_full


def rater_progress(*, campaign: Campaign, user: User, session_key: str) -> RaterProgress:
    return RaterProgress(
        in_session=battles_in_session(campaign=campaign, user=user, session_key=session_key),
        session_cap=campaign.session_cap,
        votes=votes_by_rater(campaign=campaign, user=user),
        vote_cap=campaign.rater_vote_cap,
    )


def votes_by_rater(*, campaign: Campaign, user: User) -> int:
    return Vote.objects.filter(campaign=campaign, rater=user).count()


def votes_on_prompt_hash(*, campaign: Campaign, text_hash: str) -> int:
    return Vote.objects.filter(campaign=campaign, prompt_hash=text_hash).count()


def servable_pool_prompts(campaign: Campaign) -> QuerySet[Prompt]:
    """The campaign's active pool prompts that may be served: under the "refuse" identity policy, not
    one that asks a model who it is (it stays in the pool, and is served again if the policy changes)."""
    prompts = Prompt.objects.filter(campaign=campaign, source=Prompt.Source.POOL, active=True)
    if campaign.identity_policy == Campaign.IdentityPolicy.REFUSE:
        prompts = prompts.filter(asks_identity=False)
    return prompts


def prompt_candidates(*, campaign: Campaign, user: User) -> QuerySet[Prompt]:
    """Pool prompts this rater has not rated yet and whose hash is under the campaign's cap."""
    # Seen means: in a battle of this rater that was not voided (a model outage must not use prompts
    # up), matched by normalised text, so a duplicate in the pool is not shown twice.
    seen = (
        Battle.objects.filter(campaign=campaign, rater=user)
        .exclude(status=Battle.Status.VOID)
        .values("prompt__text_hash")
    )
    prompts = servable_pool_prompts(campaign).exclude(text_hash__in=seen)
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


def hashes_rated_by(*, campaign: Campaign, user: User, hashes: set[str]) -> set[str]:
    """Of these prompt hashes, those the rater has had in a battle that was not voided."""
    same_text = Prompt.objects.filter(campaign=campaign, text_hash__in=hashes).values("pk")
    return set(
        Battle.objects.filter(campaign=campaign, rater=user, prompt__in=same_text)
        .exclude(status=Battle.Status.VOID)
        .values_list("prompt__text_hash", flat=True)
    )


def items_held_by(*, campaign: Campaign, user: User, item_keys: set[UUID]) -> set[UUID]:
    """Of these shared items, those of which the rater already has a copy (in any state: a copy they
    saw and did not vote on was still read)."""
    held = Battle.objects.filter(campaign=campaign, rater=user, item_key__in=item_keys).values_list(
        "item_key", flat=True
    )
    return {key for key in held if key is not None}


def hashes_at_cap(*, campaign: Campaign, hashes: set[str]) -> set[str]:
    """Of these prompt hashes, those with as many votes as the campaign's prompt-hash cap allows."""
    if campaign.prompt_hash_cap is None or not hashes:
        return set()
    counts = (
        Vote.objects.filter(campaign=campaign, prompt_hash__in=hashes)
        .values_list("prompt_hash")
        .annotate(n=Count("id"))
        .values_list("prompt_hash", "n")
    )
    return {text_hash for text_hash, n in counts if n >= campaign.prompt_hash_cap}


# How many random pool prompts a rater's pick draws before it falls back to listing every candidate.
PROMPT_PICK_DRAWS = 32


def prompt_pick(*, campaign: Campaign, user: User, rng: random.Random) -> Prompt | None:
    """A random pool prompt the rater may rate (not rated yet, by normalised text; under the hash cap).

    Draws random ids in the pool's id range and checks the rules for those few only, so a pick costs a
    handful of index reads whatever the size of the pool and the log; only when the draws find nothing
    (a rater who has rated most of the pool, a small or sparse pool) are all candidates listed."""
    pool = servable_pool_prompts(campaign)
    bounds = pool.aggregate(low=Min("id"), high=Max("id"))
    if bounds["low"] is None:
        return None
    ids = {rng.randint(bounds["low"], bounds["high"]) for _ in range(PROMPT_PICK_DRAWS)}
    drawn = list(pool.filter(pk__in=ids))
    hashes = {prompt.text_hash for prompt in drawn}
    excluded = hashes_rated_by(campaign=campaign, user=user, hashes=hashes) | hashes_at_cap(
        campaign=campaign, hashes=hashes
    )
    allowed = [prompt for prompt in drawn if prompt.text_hash not in excluded]
    if allowed:
        return rng.choice(sorted(allowed, key=lambda prompt: prompt.pk))
    ids_left = list(prompt_candidates(campaign=campaign, user=user).values_list("id", flat=True))
    if not ids_left:
        return None
    return Prompt.objects.get(pk=rng.choice(ids_left))


def buffer_prompt_pick(*, campaign: Campaign, exclude: set[int], rng: random.Random) -> Prompt | None:
    """A pool prompt for a battle generated ahead (no rater known yet): of a random handful of active
    pool prompts not in ``exclude`` and under the prompt-hash cap, the one with the fewest battles
    (ties by chance), so that coverage stays even without counting battles over the whole pool."""
    prompts = servable_pool_prompts(campaign).exclude(pk__in=exclude)
    handful = list(prompts.order_by("?")[:BUFFER_PROMPT_CHOICES])
    if campaign.prompt_hash_cap is not None and handful:
        counts = dict(
            Vote.objects.filter(campaign=campaign, prompt_hash__in=[p.text_hash for p in handful])
            .values_list("prompt_hash")
            .annotate(n=Count("id"))
            .values_list("prompt_hash", "n")
        )
        handful = [p for p in handful if counts.get(p.text_hash, 0) < campaign.prompt_hash_cap]
    if not handful:
        return None
    used = dict(
        Battle.objects.filter(prompt__in=handful)
        .exclude(status=Battle.Status.VOID)
        .values_list("prompt_id")
        .annotate(n=Count("id"))
        .values_list("prompt_id", "n")
    )
    rng.shuffle(handful)
    return min(handful, key=lambda p: used.get(p.pk, 0))


BUFFER_PROMPT_CHOICES = 16


def buffer_counts(*, campaign: Campaign) -> dict[str, int]:
    """What waits in the campaign's buffer: unassigned battles ready and being generated."""
    counts = dict(
        Battle.objects.filter(
            campaign=campaign, rater__isnull=True, status__in=(Battle.Status.GENERATING, Battle.Status.READY)
        )
        .values_list("status")
        .annotate(n=Count("id"))
        .values_list("status", "n")
    )
    return {"ready": counts.get(Battle.Status.READY, 0), "generating": counts.get(Battle.Status.GENERATING, 0)}


def competitors_available(*, campaign: Campaign) -> QuerySet[Competitor]:
    """The competitors new battles may use: active ones whose endpoint the health check has not found
    down (never checked counts as available). The one rule for everything that picks competitors for
    new battles (``pair_pick``, a pre-generating buffer); a queryset, so it can be a subquery.

    A battle already assigned to a rater when a competitor goes down stays valid: its answers exist, so
    it is shown and voted on as usual; one still generating voids if its model fails. External
    competitors (no endpoint, shadow battles only) are available while active."""
    return Competitor.objects.filter(campaign=campaign, active=True, gold=False).exclude(endpoint__health=Health.DOWN)


def competitors_generating(*, campaign: Campaign) -> QuerySet[Competitor]:
    """The available competitors a generated battle may draw: those with an endpoint (an external
    model's answers arrive only as shadow battles)."""
    return competitors_available(campaign=campaign).filter(endpoint__isnull=False)


def endpoints_watched() -> QuerySet[Competitor, int]:
    """The endpoint ids the health check watches (serving.hooks): those of open campaigns' active
    competitors, in the current scope."""
    return (
        Competitor.objects.filter(active=True, campaign__status=Campaign.Status.OPEN, endpoint__isnull=False)
        .values_list("endpoint_id", flat=True)
        .distinct()
    )


@dataclass(frozen=True)
class CompetitorExposure:
    """How long a competitor was kept out of new battles in its campaign because its endpoint was down:
    the outages' overlap with the campaign's open period (from the competitor's creation, if later),
    counted up to now for an outage still open."""

    outages: int  # outages that overlap the period
    unavailable_s: float
    down_since: datetime | None  # the open outage's start, if the endpoint is down now

    @property
    def unavailable_min(self) -> int:
        return round(self.unavailable_s / 60)


def campaign_open_period(campaign: Campaign, *, now: datetime) -> tuple[datetime, datetime] | None:
    """The campaign's (latest) open period: from ``opened_at`` to ``closed_at`` if it closed after that,
    else to now; None for a campaign never opened."""
    # An open campaign without an opening time was opened before the platform recorded it.
    opened_at = campaign.opened_at or (campaign.created_at if campaign.status == Campaign.Status.OPEN else None)
    if opened_at is None:
        return None
    if campaign.status != Campaign.Status.OPEN and campaign.closed_at is not None:
        return opened_at, max(opened_at, campaign.closed_at)
    return opened_at, max(opened_at, now)


def competitor_exposure(*, campaign: Campaign, now: datetime | None = None) -> dict[int, CompetitorExposure]:
    """Per competitor id of the campaign, its exposure (``CompetitorExposure``); for the console, the
    leaderboard and the API."""
    now = now or timezone.now()
    competitors = list(Competitor.objects.filter(campaign=campaign).values_list("pk", "endpoint_id", "created_at"))
    period = campaign_open_period(campaign, now=now)
    if period is None:
        return {pk: CompetitorExposure(0, 0.0, None) for pk, _, _ in competitors}
    outages = endpoint_outage_periods(
        endpoint_ids={endpoint_id for _, endpoint_id, _ in competitors if endpoint_id is not None},
        since=period[0],
        until=period[1],
        now=now,
    )
    exposure = {}
    for pk, endpoint_id, created_at in competitors:
        window = (max(period[0], created_at), period[1])
        periods = [(start, end) for start, end, _ in outages.get(endpoint_id, [])]
        overlapping = [p for p in periods if periods_overlap_s([p], window) > 0]
        down_since = next((start for start, _, is_open in outages.get(endpoint_id, []) if is_open), None)
        exposure[pk] = CompetitorExposure(len(overlapping), periods_overlap_s(periods, window), down_since)
    return exposure


def competitors_unavailable(
    *, campaign: Campaign, now: datetime | None = None
) -> list[tuple[Competitor, CompetitorExposure]]:
    """The campaign's competitors that were kept out of new battles for a while (an outage overlapped
    the open period), with their exposure, by id: the leaderboard's note."""
    exposure = competitor_exposure(campaign=campaign, now=now)
    competitors = Competitor.objects.filter(pk__in=[pk for pk, e in exposure.items() if e.outages])
    return [(c, exposure[c.pk]) for c in competitors.select_related("endpoint").order_by("id")]


def pair_pick(*, campaign: Campaign, rng: random.Random) -> tuple[Competitor, Competitor] | None:
    """A pair of competitors that can generate (``competitors_generating``: active, endpoint not down) under the
    campaign's sampling policy; which one is shown left is a coin flip either way. None where fewer than
    two are available (the rater hears there is nothing to rate right now)."""
    competitors = list(competitors_generating(campaign=campaign).select_related("endpoint").order_by("id"))
    if len(competitors) < 2:
        return None
    if campaign.sampling == Campaign.Sampling.ACTIVE:
        pairs = [(a, b) for i, a in enumerate(competitors) for b in competitors[i + 1 :]]
        # The intervals are the ranking app's, which registers their source (battles.hooks).
        weights = active_pair_weights([c.pk for c in competitors], hooks.current_intervals(campaign.pk))
        first, second = rng.choices(pairs, weights=weights, k=1)[0]
        return (first, second) if rng.random() < 0.5 else (second, first)
    first, second = rng.sample(competitors, 2)
    return first, second


# --- Exports (vote log, preference pairs): filtered votes, streamed from a server-side cursor. ---


def votes_filtered(*, campaign: Campaign, filters: VoteFilters | None = None) -> QuerySet[Vote]:
    """The campaign's votes an export selects, in log (id) order."""
    votes = Vote.objects.filter(campaign=campaign)
    if filters is not None:
        if filters.since is not None:
            votes = votes.filter(created_at__gte=filters.since)
        if filters.until is not None:
            votes = votes.filter(created_at__lt=filters.until)
        if filters.category:
            votes = votes.filter(category=filters.category)
        if filters.competitor is not None:
            votes = votes.filter(Q(left_id=filters.competitor) | Q(right_id=filters.competitor))
        if filters.prompt_source:
            votes = votes.filter(prompt_source=filters.prompt_source)
    return votes.order_by("id")


def conversations_for(votes: list[Vote]) -> dict[UUID, list[dict[str, Any]]]:
    """Each vote's battle as turns of texts (``exporting.conversation``), for a chunk of votes in one
    query: the generations, each with its turn's text. The votes carry their prompt's text as
    ``prompt_text`` (``vote_events`` annotates it)."""
    turn_text = Turn.objects.filter(battle_id=OuterRef("battle_id"), index=OuterRef("turn")).values("text")[:1]
    rows = (
        Generation.objects.filter(battle_id__in=[v.battle_id for v in votes])
        .annotate(turn_text=Subquery(turn_text))
        .values_list("battle_id", "turn", "side", "text", "turn_text")
    )
    generations: dict[UUID, list[tuple[int, str, str]]] = {}
    turn_texts: dict[UUID, dict[int, str]] = {}
    for battle_id, turn, side, text, text_of_turn in rows:
        generations.setdefault(battle_id, []).append((turn, side, text))
        if text_of_turn is not None:
            turn_texts.setdefault(battle_id, {})[turn] = text_of_turn
    return {
        v.battle_id: exporting.conversation(
            prompt_text=getattr(v, "prompt_text", ""),
            generations=generations.get(v.battle_id, []),
            turn_texts=turn_texts.get(v.battle_id, {}),
        )
        for v in votes
    }


def vote_events(*, votes: QuerySet[Vote], texts: bool = False) -> Iterator[dict[str, Any]]:
    """Each vote's event (``Vote.as_event()``), with its ``conversation`` when ``texts``: model rows from
    a server-side cursor, the texts fetched once per chunk. Memory stays flat at any log size."""
    if texts:
        votes = votes.annotate(prompt_text=F("prompt__text"))
    for chunk in exporting.chunked(votes.iterator(chunk_size=exporting.CHUNK_SIZE), exporting.CHUNK_SIZE):
        conversations = conversations_for(chunk) if texts else {}
        for vote in chunk:
            event = vote.as_event()
            if texts:
                event["conversation"] = conversations[vote.battle_id]
            yield event


def vote_event_jsonl(*, votes: QuerySet[Vote], texts: bool = False) -> Iterator[bytes]:
    """The votes' events as JSON lines, in pieces of about ``exporting.FLUSH_CHARS`` bytes.

    On PostgreSQL the database renders each line (``exporting.event_json_sql``, the texts included)
    and streams them with ``COPY ... TO STDOUT``: nothing is built per row in Python, which keeps a
    million-row export fast and this process's memory flat. (COPY's text format doubles every
    backslash; JSON text has no raw newline, tab or carriage return for it to escape, so undoing that
    is one replace.) Elsewhere the events are built in Python (``vote_events``). The same JSON values
    either way."""
    if connection.vendor != "postgresql":
        for chunk in exporting.jsonl_from_events(vote_events(votes=votes, texts=texts)):
            yield chunk.encode()
        return
    lines = votes.annotate(
        event_line=RawSQL(exporting.event_json_sql(texts=texts), (), output_field=TextField())
    ).values_list("event_line", flat=True)
    sql, params = lines.query.sql_with_params()
    with connection.cursor() as cursor, cursor.cursor.copy(f"COPY ({sql}) TO STDOUT", params) as copy:
        pending: list[memoryview] = []
        size = 0
        for row in copy:  # one message per row
            pending.append(row)
            size += len(row)
            if size >= exporting.FLUSH_CHARS:
                yield b"".join(pending).replace(b"\\\\", b"\\")
                pending, size = [], 0
        if pending:
            yield b"".join(pending).replace(b"\\\\", b"\\")


def export_jobs_for(*, campaign: Campaign) -> QuerySet[ExportJob]:
    return ExportJob.objects.filter(campaign=campaign).order_by("-created_at", "-pk")


def export_job_for(*, campaign: Campaign, job_id: UUID | str) -> ExportJob | None:
    try:
        return ExportJob.objects.filter(campaign=campaign, pk=job_id).first()
    except (ValueError, TypeError, ValidationError):
        return None


# --- The REST API's reads: campaigns, competitors, categories, prompts --------------------------------


def _count_of(queryset: QuerySet[Any]) -> Coalesce:
    """A correlated ``COUNT(*)`` of ``queryset``'s rows of the outer campaign (one subquery per count, so
    three counts do not multiply into a join of competitors × prompts × votes)."""
    counted = queryset.filter(campaign=OuterRef("pk")).order_by().values("campaign").annotate(n=Count("*")).values("n")
    return Coalesce(Subquery(counted, output_field=IntegerField()), 0)


def campaigns_with_counts(user: User | ApiKeyPrincipal) -> QuerySet[Campaign]:
    """``campaigns_viewable_by`` with ``n_competitors``, ``n_prompts`` and ``n_votes`` annotated."""
    return campaigns_viewable_by(user).annotate(
        n_competitors=_count_of(Competitor.objects.all()),
        n_prompts=_count_of(Prompt.objects.all()),
        n_votes=_count_of(Vote.objects.all()),
    )


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


# --- Shadow battles and A/B experiments (the API's reads) ----------------------------------------------


def shadow_battle_in_campaign(*, campaign: Campaign, battle_id: UUID | str) -> Battle | None:
    """A shadow battle of the campaign (any other id, or a generated battle's, is not found)."""
    try:
        return (
            Battle.objects.filter(campaign=campaign, pk=battle_id, source=Battle.Source.SHADOW)
            .select_related("left__endpoint", "right__endpoint", "experiment")
            .first()
        )
    except (ValueError, TypeError, ValidationError):
        return None


def vote_of_battle(battle: Battle) -> Vote | None:
    return Vote.objects.filter(battle=battle).first()


def experiments_viewable_by(user: User | ApiKeyPrincipal) -> QuerySet[Experiment]:
    return Experiment.objects.filter(organization__in=organizations_viewable_by(user)).select_related(
        "organization", "campaign"
    )


def experiments_writable_by(user: User | ApiKeyPrincipal) -> QuerySet[Experiment]:
    """Experiments the principal may assign units in: a read-write key's organisation's, or those of the
    organisations a person owns or manages (``organizations_writable_by``, as for campaigns)."""
    return Experiment.objects.filter(organization__in=organizations_writable_by(user)).select_related(
        "organization", "campaign"
    )


class ExperimentAmbiguous(Exception):
    """The key names experiments of several of the principal's organisations."""


def experiment_by_key(
    experiments: QuerySet[Experiment], *, key: str, organization: str | None = None
) -> Experiment | None:
    """The experiment of that key among ``experiments``; ``organization`` (a slug) picks one where the
    principal belongs to several organisations that use the key (``ExperimentAmbiguous`` otherwise)."""
    found = experiments.filter(key=key)
    if organization:
        found = found.filter(organization__slug=organization)
    matches = list(found[:2])
    if len(matches) > 1:
        raise ExperimentAmbiguous(key)
    return matches[0] if matches else None


@dataclass(frozen=True)
class VariantExposure:
    variant: Variant
    units: int
    exposures: int


def experiment_exposures(experiment: Experiment) -> list[VariantExposure]:
    """Per variant (in the assignment's order): distinct units exposed and exposures counted."""
    counts: dict[int, tuple[int, int]] = {
        variant_id: (units, exposures or 0)
        for variant_id, units, exposures in Exposure.objects.filter(experiment=experiment)
        .values("variant_id")
        .annotate(units=Count("id"), exposures=Sum("count"))
        .values_list("variant_id", "units", "exposures")
    }
    return [
        VariantExposure(variant, *counts.get(variant.pk, (0, 0)))
        for variant in Variant.objects.filter(experiment=experiment)
        .select_related("competitor__endpoint")
        .order_by("id")
    ]


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


def study_by_slug(slug: str) -> Study | None:
    """The study behind a public link. The slug is the credential (like an invitation token), so the
    lookup is across organisations by design; the caller then works in the study's organisation."""
    with scopes_disabled():
        return Study.objects.select_related("campaign", "pool", "organization").filter(slug=slug).first()


def participant_of_user(user: User) -> Participant | None:
    """The study participation behind a participant's account (an account made for one study), or None
    for everyone else."""
    if not user.is_authenticated:
        return None
    return Participant.objects.select_related("study__campaign", "user").filter(user=user).first()


def participant_in_study(*, study: Study, user: User) -> Participant | None:
    participant = participant_of_user(user)
    return participant if participant is not None and participant.study_id == study.pk else None


# --- Judges -------------------------------------------------------------------------------------------


def judges_viewable_by(user: User | ApiKeyPrincipal) -> QuerySet[Judge]:
    """Judges of the organisations whose results the principal may read (as campaigns_viewable_by)."""
    return Judge.objects.filter(organization__in=organizations_viewable_by(user)).select_related("rubric", "endpoint")


def judge_viewable_by(*, user: User | ApiKeyPrincipal, judge_id: int) -> Judge | None:
    return judges_viewable_by(user).filter(pk=judge_id).first()


def judge_runs_for(*, campaign: Campaign) -> QuerySet[JudgeRun]:
    return JudgeRun.objects.filter(campaign=campaign).select_related("judge", "rubric")


def judge_run_for(*, campaign: Campaign, run_id: int) -> JudgeRun | None:
    return judge_runs_for(campaign=campaign).filter(pk=run_id).first()


def judge_verdicts_of(run: JudgeRun) -> QuerySet[JudgeVerdict]:
    """The run's verdicts (the judge votes' log), in the order they were appended."""
    return JudgeVerdict.objects.filter(run=run, campaign_id=run.campaign_id)


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
