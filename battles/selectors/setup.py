"""A campaign's set-up checklist: what a new manager still has to do before raters can vote, read from the
database on every load of the campaign's console page (``campaign_checklist``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from django.db.models import F
from django.utils import timezone

from raters.models import Invitation, RaterPool
from serving.models import Health, ModelEndpoint
from serving.selectors import endpoint_health_line

from ..models import Campaign, Competitor, Prompt, Vote
from ..prompting import CATEGORIES


@dataclass(frozen=True)
class ChecklistStep:
    """One step: ``key`` names it for the page (the console links each key to where it is done), ``state``
    is the live one-line state, ``items`` its details (an endpoint and its health, an invitation link's
    path, a category and its prompts)."""

    key: str
    title: str
    done: bool
    state: str
    items: tuple[str, ...] = ()


@dataclass(frozen=True)
class CampaignChecklist:
    steps: tuple[ChecklistStep, ...]
    # For the console's links: the organisation's pools (a pool to invite into), the first pool the campaign names.
    pools_in_organization: int = 0
    first_pool_id: int | None = None
    invitation_paths: tuple[str, ...] = field(default=())

    @property
    def remaining(self) -> int:
        return sum(1 for step in self.steps if not step.done)

    def step(self, key: str) -> ChecklistStep:
        return next(step for step in self.steps if step.key == key)


def _plural(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else (many or one + 's')}"


def _endpoints_step(campaign: Campaign, competitors: list[Competitor]) -> ChecklistStep:
    # The endpoints the campaign's competitors use; before it has any, the organisation's (the ones to choose from).
    used = {c.endpoint_id: c.endpoint for c in competitors if c.endpoint is not None}
    endpoints: list[ModelEndpoint] = (
        sorted(used.values(), key=lambda e: e.name)
        if used
        else list(ModelEndpoint.objects.filter(organization_id=campaign.organization_id).order_by("name"))
    )
    if not endpoints:
        return ChecklistStep(
            "endpoints",
            "Model endpoints ready",
            False,
            "No model endpoint yet: add one per model to compare (a Triton server's address and the model's "
            "name); each is checked when it is saved.",
        )
    ready = sum(1 for e in endpoints if e.health == Health.READY)
    whose = "the competitors' endpoints" if used else "the organisation's endpoints"
    return ChecklistStep(
        "endpoints",
        "Model endpoints ready",
        ready == len(endpoints),
        f"{ready} of {len(endpoints)} ready ({whose}).",
        tuple(f"{e.name}: {endpoint_health_line(e)}" for e in endpoints),
    )


def _prompts_step(campaign: Campaign) -> ChecklistStep:
    counts: dict[str, int] = {}
    for category in Prompt.objects.filter(campaign=campaign, active=True, source=Prompt.Source.POOL).values_list(
        "category", flat=True
    ):
        counts[category] = counts.get(category, 0) + 1
    total = sum(counts.values())
    state = (
        f"{_plural(total, 'active prompt')} in the pool."
        if total
        else "The pool is empty: paste prompts below (one per line) or import a file."
    )
    # Categories are not configured: they are the fixed list, set per prompt (or by the classifier); each
    # category with votes gets its own leaderboard.
    by_category = tuple(f"{category}: {counts[category]}" for category in CATEGORIES if counts.get(category))
    note = (
        "Categories come from the prompts (fixed list: " + ", ".join(CATEGORIES) + "; chosen per prompt or by the "
        "classifier); each category gets its own leaderboard."
    )
    return ChecklistStep("prompts", "Prompts in the pool", total > 0, state, (*by_category, note))


def _raters_step(campaign: Campaign, pools: list[RaterPool], now: datetime) -> tuple[ChecklistStep, tuple[str, ...]]:
    members = (
        RaterPool.members.through.objects.filter(raterpool_id__in=[p.pk for p in pools])
        .values("user_id")
        .distinct()
        .count()
    )
    open_links = tuple(
        Invitation.objects.filter(pool__in=pools, uses__lt=F("max_uses"), expires_at__gt=now)
        .order_by("created_at")
        .values_list("token", flat=True)
    )
    paths = tuple(Invitation(token=token).path for token in open_links)
    if not pools:
        state = "Name a rater pool first."
    else:
        state = f"{_plural(members, 'rater')} in the campaign's pools; {_plural(len(paths), 'invitation link')} open."
    return ChecklistStep("raters", "Raters invited", members > 0, state), paths


def campaign_checklist(*, campaign: Campaign) -> CampaignChecklist:
    """The set-up steps of ``campaign`` in the order a manager does them, each with its live state:
    endpoints ready, at least two competitors, prompts in the pool, a rater pool named, raters in it,
    opened, and the first votes. Computed from the database on every call (nothing cached)."""
    now = timezone.now()
    competitors = list(
        Competitor.objects.filter(campaign=campaign, gold=False, active=True).select_related("endpoint").order_by("id")
    )
    pools = list(campaign.rater_pools.order_by("name")) if campaign.pk else []
    raters, paths = _raters_step(campaign, pools, now)
    votes = Vote.objects.filter(campaign=campaign).count()
    if campaign.status == Campaign.Status.OPEN:
        opened = f"Open since {campaign.opened_at:%Y-%m-%d %H:%M} UTC." if campaign.opened_at else "Open."
    elif campaign.status == Campaign.Status.CLOSED:
        opened = "Closed: raters get no battles (open it again to resume)."
    else:
        opened = "Draft: raters see nothing until it is opened (needs two competitors and a rater pool)."
    steps = (
        _endpoints_step(campaign, competitors),
        ChecklistStep(
            "competitors",
            "At least two competitors",
            len(competitors) >= 2,
            f"{_plural(len(competitors), 'active competitor')}"
            + ("." if len(competitors) >= 2 else ": add them below, each an endpoint and a version label."),
            tuple(str(c) for c in competitors),
        ),
        _prompts_step(campaign),
        ChecklistStep(
            "pool",
            "A rater pool named",
            bool(pools),
            f"{_plural(len(pools), 'pool')} may vote." if pools else "No rater pool may vote yet: tick one below.",
            tuple(p.name for p in pools),
        ),
        raters,
        ChecklistStep("open", "Opened for voting", campaign.status == Campaign.Status.OPEN, opened),
        ChecklistStep(
            "votes",
            "First votes",
            votes > 0,
            f"{_plural(votes, 'vote')} in the log; the leaderboard is recomputed shortly after new votes."
            if votes
            else "No vote yet.",
        ),
    )
    return CampaignChecklist(
        steps=steps,
        pools_in_organization=RaterPool.objects.filter(organization_id=campaign.organization_id).count(),
        first_pool_id=pools[0].pk if pools else None,
        invitation_paths=paths,
    )
