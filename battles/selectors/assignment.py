"""What a rater is served: their battles and progress against the caps, the prompt picks, the buffer,
the competitors new battles may use (and how long each was kept out) and the pair pick."""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import NamedTuple
from uuid import UUID

from django.contrib.auth.models import User
from django.db import DEFAULT_DB_ALIAS, connection
from django.db.models import (
    Count,
    DateTimeField,
    DurationField,
    Expression,
    ExpressionWrapper,
    Max,
    Min,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
)
from django.db.models.expressions import CombinedExpression
from django.db.models.functions import Coalesce
from django.utils import timezone

from core.nested import instances_from_json, rows_json
from core.prepared import Many, Prepared, PreparedAggregate
from raters.models import RaterPool
from serving.models import Health
from serving.selectors import endpoint_outage_periods, periods_overlap_s

from .. import hooks
from ..models import Battle, Campaign, Competitor, Generation, Prompt, Turn, Vote
from ..sampling import active_pair_weights
from .campaigns import campaign_for_rater, pools_of_rater_in, rows_counted

# The rater's cycle runs these on every request: compiled once (core.prepared), run with each call's values.
_battle_of_rater: Prepared[Battle] = Prepared(
    lambda battle_id, rater_id: (
        Battle.objects.select_related("campaign", "prompt", "left__endpoint", "right__endpoint")
        .filter(pk=battle_id, rater_id=rater_id)
        .order_by()
    ),
    battle_id=UUID,
    rater_id=int,
)
_battle_pending: Prepared[Battle] = Prepared(
    lambda campaign_id, rater_id: Battle.objects.filter(
        campaign_id=campaign_id, rater_id=rater_id, status__in=(Battle.Status.READY, Battle.Status.GENERATING)
    ).order_by("created_at")[:1],
    campaign_id=int,
    rater_id=int,
)
_turns_of_battle: Prepared[Turn] = Prepared(
    lambda battle_id: Turn.objects.filter(battle_id=battle_id).order_by("index"), battle_id=UUID
)
_generations_of_battle: Prepared[Generation] = Prepared(
    lambda battle_id: Generation.objects.filter(battle_id=battle_id), battle_id=UUID
)
# What the vote log takes of each answer (not its text), and what the battle page shows of each (its text and
# rendering, the reveal's figures): read with the battle, in its statement, on PostgreSQL (core.nested).
ANSWER_LOGGED_FIELDS = (
    "id",
    "battle_id",
    "side",
    "turn",
    "output_tokens",
    "finish_reason",
    "latency_s",
    "ttft_s",
    "model_mentions",
    "style",
)
ANSWER_SHOWN_FIELDS = (
    "id",
    "battle_id",
    "side",
    "turn",
    "competitor_id",
    "text",
    "text_html",
    "text_html_version",
    "output_tokens",
    "finish_reason",
    "latency_s",
)
_answers_logged: Prepared[Generation] = Prepared(
    lambda battle_id: (
        Generation.objects.filter(battle_id=battle_id).only(*ANSWER_LOGGED_FIELDS).order_by("turn", "side")
    ),
    battle_id=UUID,
)


def _answers_of_outer_battle(fields: tuple[str, ...]) -> Subquery:
    """The outer read's battle's answers (``fields`` of each, in turn and side order) as one JSON array."""
    return rows_json(Generation.objects.filter(battle_id=OuterRef("pk")), fields, order_by=("turn", "side"))


_battle_logged_of_rater: Prepared[Battle] = Prepared(
    lambda battle_id, rater_id: (
        Battle.objects.select_related("campaign", "prompt", "left__endpoint", "right__endpoint")
        .filter(pk=battle_id, rater_id=rater_id)
        .annotate(answers_json=_answers_of_outer_battle(ANSWER_LOGGED_FIELDS))
        .order_by()
    ),
    battle_id=UUID,
    rater_id=int,
)


def _battle_key(user: User, battle_id: UUID | str) -> UUID | None:
    """The battle's key as a rater's read takes it; None for a malformed id or an anonymous visitor (no pk:
    nobody's battle is theirs)."""
    try:
        key = battle_id if isinstance(battle_id, UUID) else UUID(str(battle_id))
    except (ValueError, TypeError, AttributeError):
        return None
    return key if type(user.pk) is int else None


def battle_for_rater(*, user: User, battle_id: UUID | str) -> Battle | None:
    """A rater sees only their own battles; anything else is indistinguishable from a missing one."""
    key = _battle_key(user, battle_id)
    return None if key is None else _battle_of_rater.first(battle_id=key, rater_id=user.pk)


# Where a battle read with its answers keeps them, by the fields read: the page's, the log's.
_ANSWERS_KEPT = {ANSWER_SHOWN_FIELDS: "_answers_shown", ANSWER_LOGGED_FIELDS: "_answers_logged"}


def _battle_with_answers(
    user: User, battle_id: UUID | str, statement: Prepared[Battle], fields: tuple[str, ...], **slots: object
) -> Battle | None:
    """``battle_for_rater`` by ``statement``, which reads the answers' ``fields`` with the battle (its
    ``answers_json``), kept on the battle as instances. PostgreSQL only: elsewhere (SQLite, the demo: no
    ``jsonb_agg``, no interval arithmetic) the battle alone, and what goes with it is read apart when asked."""
    key = _battle_key(user, battle_id)
    if key is None:
        return None
    if connection.vendor != "postgresql":
        return _battle_of_rater.first(battle_id=key, rater_id=user.pk)
    battle = statement.first(battle_id=key, rater_id=user.pk, **slots)
    if battle is not None:
        setattr(
            battle, _ANSWERS_KEPT[fields], instances_from_json(Generation, fields, battle.__dict__.pop("answers_json"))
        )
    return battle


def battle_page_for_rater(*, user: User, battle_id: UUID | str, now: datetime | None = None) -> Battle | None:
    """``battle_for_rater`` for the battle page: the same battle, with the page's two counts
    (``battle_page_counts``, as of ``now``) and its answers (``battle_generations``: what the page shows of
    each) read in the same statement (on PostgreSQL; elsewhere apart)."""
    return _battle_with_answers(user, battle_id, _battle_page_of_rater, ANSWER_SHOWN_FIELDS, now=now or timezone.now())


def battle_with_answers_logged(*, user: User, battle_id: UUID | str) -> Battle | None:
    """``battle_for_rater`` for the vote: the same battle, with what the vote log takes of its answers
    (``battle_answers_logged``) read in the same statement (on PostgreSQL; elsewhere the answers apart)."""
    return _battle_with_answers(user, battle_id, _battle_logged_of_rater, ANSWER_LOGGED_FIELDS)


def battle_pending_for_rater(*, campaign: Campaign, user: User) -> Battle | None:
    """A battle already assigned and not yet voted on is shown again rather than replaced, so reloading
    the page cannot be used to regenerate answers or to fish for a preferred pair."""
    return _battle_pending.first(campaign_id=campaign.pk, rater_id=user.pk)


def battle_turns(battle: Battle) -> list[Turn]:
    """The battle's turns after its first (the rater's follow-up prompts), in order."""
    return _turns_of_battle.all(battle_id=battle.pk)


def battle_turns_given(battle: Battle, answered: Iterable[int]) -> list[Turn]:
    """``battle_turns``, read only where the battle may have any, given the turns its stored answers are of
    (``answered``): a ready or voted battle has both answers of every turn stored (a new turn makes it
    generating until they are), so answers to turn 0 alone mean no later turn; a generating or voided one may
    have a turn whose answers are not stored (yet), and is read."""
    if battle.status in (Battle.Status.READY, Battle.Status.VOTED) and max(answered, default=0) == 0:
        return []
    return battle_turns(battle)


def battle_generations(battle: Battle) -> list[Generation]:
    """Every answer of the battle, both sides of every turn: those ``battle_page_for_rater`` read with the
    battle (the fields the page shows; the others load on access), else read now."""
    shown: list[Generation] | None = getattr(battle, "_answers_shown", None)
    return shown if shown is not None else _generations_of_battle.all(battle_id=battle.pk)


def battle_answers_logged(battle: Battle) -> list[Generation]:
    """What the vote log takes of each answer of the battle (``ANSWER_LOGGED_FIELDS``), in turn and side order:
    those ``battle_with_answers_logged`` read with the battle, else read now."""
    logged: list[Generation] | None = getattr(battle, "_answers_logged", None)
    return logged if logged is not None else _answers_logged.all(battle_id=battle.pk)


# When the rater got a battle: its claim (a battle from before claims were stamped: its creation).
_TAKEN_AT = Coalesce("claimed_at", "created_at")


def _hours_before(moment: datetime | Expression, hours: OuterRef) -> ExpressionWrapper[CombinedExpression]:
    """``moment`` less ``hours`` hours (a column of the outer read: a campaign's session window), as a date-time."""
    window = ExpressionWrapper(hours * timedelta(hours=1), output_field=DurationField())
    return ExpressionWrapper(moment - window, output_field=DateTimeField())


def _page_counts_of_outer_battle(now: datetime) -> dict[str, Coalesce]:
    """``battle_page_counts``' two counts as annotations of a read of the battle (its campaign joined): the rater's
    counted battles of the campaign taken in the session window before ``now``, and in the window before the
    battle was taken, up to it (its number). As ``_taken_between`` counts them: taken = claimed, else created."""
    window_h = OuterRef("campaign__session_window_h")
    taken_at = Coalesce(OuterRef("claimed_at"), OuterRef("created_at"))
    of_rater = rater_battles_counted(campaign_id=OuterRef("campaign_id"), rater_id=OuterRef("rater_id")).alias(
        taken=_TAKEN_AT
    )
    return {
        "page_in_session": rows_counted(of_rater.filter(taken__gt=_hours_before(now, window_h))),
        "page_position": rows_counted(
            of_rater.filter(taken__gt=_hours_before(taken_at, window_h), taken__lte=taken_at)
        ),
    }


_battle_page_of_rater: Prepared[Battle] = Prepared(
    lambda battle_id, rater_id, now: (
        Battle.objects.select_related("campaign", "prompt", "left__endpoint", "right__endpoint")
        .filter(pk=battle_id, rater_id=rater_id)
        .annotate(**_page_counts_of_outer_battle(now), answers_json=_answers_of_outer_battle(ANSWER_SHOWN_FIELDS))
        .order_by()
    ),
    battle_id=UUID,
    rater_id=int,
    now=datetime,
)


def _taken_between(since: datetime | Expression, until: datetime | None = None) -> Q:
    """Battles the rater got after `since` (and at or before `until`)."""
    claimed = Q(claimed_at__gt=since)
    created = Q(claimed_at__isnull=True, created_at__gt=since)
    if until is not None:
        claimed &= Q(claimed_at__lte=until)
        created &= Q(created_at__lte=until)
    return claimed | created


def rater_battles_counted(*, campaign_id: int | OuterRef, rater_id: int | OuterRef) -> QuerySet[Battle]:
    """The rater's battles of the campaign that count: those not voided (what the session cap counts, and the
    battles in which a prompt counts as had by the rater). ``OuterRef``s: those of an outer query's battle."""
    return Battle.objects.filter(campaign_id=campaign_id, rater_id=rater_id).exclude(status=Battle.Status.VOID)


# The caps' counts, on every "next battle" and battle page: compiled once (core.prepared).
_in_session_window: PreparedAggregate = PreparedAggregate(
    lambda campaign_id, rater_id, since: (
        rater_battles_counted(campaign_id=campaign_id, rater_id=rater_id).filter(_taken_between(since)),
        {"n": Count("*")},
    ),
    campaign_id=int,
    rater_id=int,
    since=datetime,
)
_page_counts: PreparedAggregate = PreparedAggregate(
    lambda campaign_id, rater_id, since, session_since, position_since, taken_at: (
        rater_battles_counted(campaign_id=campaign_id, rater_id=rater_id).filter(_taken_between(since)),
        {
            "in_session": Count("pk", filter=_taken_between(session_since)),
            "position": Count("pk", filter=_taken_between(position_since, taken_at)),
        },
    ),
    campaign_id=int,
    rater_id=int,
    since=datetime,
    session_since=datetime,
    position_since=datetime,
    taken_at=datetime,
)
_votes_of_rater: PreparedAggregate = PreparedAggregate(
    lambda campaign_id, rater_id: (Vote.objects.filter(campaign_id=campaign_id, rater_id=rater_id), {"n": Count("*")}),
    campaign_id=int,
    rater_id=int,
)


_OPEN = (Battle.Status.READY, Battle.Status.GENERATING)


@dataclass(frozen=True)
class RaterStanding:
    """What "next battle" asks first, with the rater's pool (``pool_and_standing``): whether the rater holds an
    open battle (ready, or being prepared), and their battles in the session window
    (``battles_in_session_window``)."""

    open: int
    in_session: int


# "Next battle"'s first question after the campaign: the rater's pool (the oldest that qualifies), with their
# standing (``RaterStanding``'s two counts) as its annotations, in one statement.
_pool_and_standing: Prepared[RaterPool] = Prepared(
    lambda campaign_id, rater_id, since: (
        pools_of_rater_in(campaign_id, rater_id)
        .annotate(
            open_battles=rows_counted(
                Battle.objects.filter(campaign_id=campaign_id, rater_id=rater_id, status__in=_OPEN)
            ),
            battles_in_session=rows_counted(
                rater_battles_counted(campaign_id=campaign_id, rater_id=rater_id).filter(_taken_between(since))
            ),
        )
        .order_by("id")[:1]
    ),
    campaign_id=int,
    rater_id=int,
    since=datetime,
)


# "Next battle"'s campaign, with the rater's pool and standing (``_pool_and_standing``'s) as its annotations: the
# campaign and the pool-and-standing in one statement (``campaign_for_next``).
def _standing_of_outer_campaign(rater_id: int, now: datetime) -> dict[str, Subquery | Coalesce]:
    since = _hours_before(now, OuterRef("session_window_h"))
    return {
        "next_pool_id": Subquery(pools_of_rater_in(OuterRef("pk"), rater_id).order_by("id").values("id")[:1]),
        "open_battles": rows_counted(
            Battle.objects.filter(campaign_id=OuterRef("pk"), rater_id=rater_id, status__in=_OPEN)
        ),
        "battles_in_session": rows_counted(
            rater_battles_counted(campaign_id=OuterRef("pk"), rater_id=rater_id).filter(_taken_between(since))
        ),
    }


class _StandingRead(NamedTuple):
    """What ``campaign_for_next`` read with the campaign: for whom, as of when."""

    rater_id: int
    now: datetime
    pool: RaterPool
    standing: RaterStanding


_campaign_for_next: Prepared[Campaign] = Prepared(
    lambda campaign_id, rater_id, now: (
        Campaign.objects.filter(pk=campaign_id, status=Campaign.Status.OPEN)
        .select_related("organization")
        .annotate(**_standing_of_outer_campaign(rater_id, now))
        .order_by()
    ),
    campaign_id=int,
    rater_id=int,
    now=datetime,
)


def campaign_for_next(*, user: User, campaign_id: int, now: datetime) -> Campaign | None:
    """``campaign_for_rater`` for "next battle": the same campaign, with the rater's pool and standing
    (``pool_and_standing`` as of ``now``) read in the same statement (on PostgreSQL; elsewhere the campaign
    alone, and ``pool_and_standing`` reads them apart)."""
    if connection.vendor != "postgresql" or type(campaign_id) is not int or type(user.pk) is not int:
        return campaign_for_rater(user=user, campaign_id=campaign_id)
    campaign = _campaign_for_next.first(campaign_id=campaign_id, rater_id=user.pk, now=now)
    if campaign is None or campaign.next_pool_id is None:  # type: ignore[attr-defined]
        # Closed, missing, or the rater in none of its pools: campaign_for_rater's own answer (the rare path).
        return None if campaign is None else campaign_for_rater(user=user, campaign_id=campaign_id)
    annotations = campaign.__dict__
    pool = RaterPool.from_db(DEFAULT_DB_ALIAS, ["id"], [annotations.pop("next_pool_id")])  # its id, the rest deferred
    standing = RaterStanding(
        open=int(annotations.pop("open_battles")), in_session=int(annotations.pop("battles_in_session"))
    )
    campaign._standing_read = _StandingRead(user.pk, now, pool, standing)  # type: ignore[attr-defined]
    return campaign


def pool_and_standing(
    *, campaign: Campaign, user: User, now: datetime | None = None
) -> tuple[RaterPool | None, RaterStanding]:
    """``pool_for_rater`` and the rater's standing in one statement: the pool the rater votes through in this
    campaign (None: they are in none of its pools; the standing is then zero) and their standing (those
    ``campaign_for_next`` read with the campaign as of the same ``now``: no statement)."""
    read: _StandingRead | None = getattr(campaign, "_standing_read", None)
    if read is not None and read.rater_id == user.pk and read.now == now:
        return read.pool, read.standing
    since = (now or timezone.now()) - timedelta(hours=campaign.session_window_h)
    pool = _pool_and_standing.first(campaign_id=campaign.pk, rater_id=user.pk, since=since)
    if pool is None:
        return None, RaterStanding(open=0, in_session=0)
    counts = RaterStanding(open=int(pool.open_battles), in_session=int(pool.battles_in_session))  # type: ignore[attr-defined]
    return pool, counts


def battles_in_session_window(*, campaign: Campaign, user: User, now: datetime | None = None) -> int:
    """The rater's battles of the last `campaign.session_window_h` hours, over every login: what the
    session cap counts."""
    since = (now or timezone.now()) - timedelta(hours=campaign.session_window_h)
    return int(_in_session_window.run(campaign_id=campaign.pk, rater_id=user.pk, since=since)["n"])


def session_window_frees_at(*, campaign: Campaign, user: User, now: datetime | None = None) -> datetime | None:
    """When the oldest battle of the rater's session window leaves it (one more battle may then be
    taken); None when the window holds none."""
    window = timedelta(hours=campaign.session_window_h)
    oldest = (
        rater_battles_counted(campaign_id=campaign.pk, rater_id=user.pk)
        .filter(_taken_between((now or timezone.now()) - window))
        .aggregate(oldest=Min(_TAKEN_AT))["oldest"]
    )
    return oldest + window if oldest is not None else None


def battle_position_in_session(battle: Battle) -> int:
    """The battle's number in its rater's session window as it was when they got it (1 for the first),
    counted as the session cap counts: battles not voided, of the window's hours before it, any login."""
    taken_at = battle.claimed_at or battle.created_at
    window = timedelta(hours=battle.campaign.session_window_h)
    if battle.rater_id is None:
        return 0
    return (
        rater_battles_counted(campaign_id=battle.campaign_id, rater_id=battle.rater_id)
        .filter(_taken_between(taken_at - window, taken_at))
        .count()
    )


def battle_page_counts(*, battle: Battle, user: User, now: datetime | None = None) -> tuple[int, RaterProgress]:
    """For the battle page: the battle's number in its session window (``battle_position_in_session``) and
    the rater's progress against the caps (``rater_progress``), the two battle counts in one statement (none
    for a battle read by ``battle_page_for_rater``, which counted them as it read it)."""
    campaign = battle.campaign
    if battle.rater_id != user.pk:  # not the rater's own battle (or not yet anyone's): counted apart
        return battle_position_in_session(battle), rater_progress(campaign=campaign, user=user)
    if hasattr(battle, "page_position") and now is None:  # read by battle_page_for_rater, which counted them
        position, in_session = battle.page_position, battle.page_in_session  # type: ignore[attr-defined]
        return int(position), rater_progress(campaign=campaign, user=user, in_session=int(in_session))
    window = timedelta(hours=campaign.session_window_h)
    taken_at = battle.claimed_at or battle.created_at
    session_since, position_since = (now or timezone.now()) - window, taken_at - window
    counts = _page_counts.run(
        campaign_id=campaign.pk,
        rater_id=user.pk,
        since=min(session_since, position_since),
        session_since=session_since,
        position_since=position_since,
        taken_at=taken_at,
    )
    return counts["position"], rater_progress(campaign=campaign, user=user, in_session=counts["in_session"])


def battle_taken_in_earlier_session(battle: Battle, now: datetime | None = None) -> datetime | None:
    """When the rater got the battle, if that was before their current session window began (a battle
    carried over from an earlier login, still pending, or opened again): its number belongs to that earlier
    window, not to "the last N hours". None for a battle of the current window."""
    taken_at = battle.claimed_at or battle.created_at
    window = timedelta(hours=battle.campaign.session_window_h)
    return taken_at if taken_at <= (now or timezone.now()) - window else None


@dataclass(frozen=True)
class RaterProgress:
    """Where the rater stands against the campaign's caps, for the pages to say so before a refusal."""

    in_session: int  # battles in the session window (the last `window_h` hours, any login)
    session_cap: int
    votes: int | None  # the rater's votes in the campaign; None where no cap asks for them (not counted)
    vote_cap: int | None
    window_h: int = 12

    @property
    def session_full(self) -> bool:
        return self.in_session >= self.session_cap

    @property
    def campaign_full(self) -> bool:
        return self.vote_cap is not None and self.votes is not None and self.votes >= self.vote_cap

    @property
    def stopped(self) -> bool:
        """No new battle can be handed out (a pending one can still be finished)."""
        return self.session_full or self.campaign_full


def rater_progress(*, campaign: Campaign, user: User, in_session: int | None = None) -> RaterProgress:
    """``in_session``: the rater's battles in the session window, where the caller has counted them already."""
    return RaterProgress(
        in_session=battles_in_session_window(campaign=campaign, user=user) if in_session is None else in_session,
        session_cap=campaign.session_cap,
        # Counted only for a cap: the pages show no count of votes (every battle page asked for it).
        votes=votes_by_rater(campaign=campaign, user=user) if campaign.rater_vote_cap is not None else None,
        vote_cap=campaign.rater_vote_cap,
        window_h=campaign.session_window_h,
    )


def votes_by_rater(*, campaign: Campaign, user: User) -> int:
    return int(_votes_of_rater.run(campaign_id=campaign.pk, rater_id=user.pk)["n"])


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


# Every claim asks it of its few candidates: compiled once for each number of hashes (core.prepared).
_hashes_rated: Prepared[str] = Prepared(
    lambda campaign_id, rater_id, hashes: (
        Battle.objects.filter(
            campaign_id=campaign_id,
            rater_id=rater_id,
            prompt__in=Prompt.objects.filter(campaign_id=campaign_id, text_hash__in=hashes).values("pk"),
        )
        .exclude(status=Battle.Status.VOID)
        .values_list("prompt__text_hash", flat=True)
    ),
    campaign_id=int,
    rater_id=int,
    hashes=Many(str),
)


def hashes_rated_by(*, campaign: Campaign, user: User, hashes: set[str]) -> set[str]:
    """Of these prompt hashes, those the rater has had in a battle that was not voided."""
    if not hashes:
        return set()
    return set(_hashes_rated.all(campaign_id=campaign.pk, rater_id=user.pk, hashes=tuple(sorted(hashes))))


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
    return competitors_available_in(campaign.pk)


def competitors_available_in(campaign_id: int) -> QuerySet[Competitor]:
    """``competitors_available`` by the campaign's id (what a statement compiled once is built from)."""
    return Competitor.objects.filter(campaign_id=campaign_id, active=True, gold=False).exclude(
        endpoint__health=Health.DOWN
    )


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
