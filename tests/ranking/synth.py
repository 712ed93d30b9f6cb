"""Synthetic vote logs written straight to the database (battles and votes in bulk), for ranking tests.

Votes follow Bradley-Terry with known strengths, so the leaderboard's order is known in advance."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta

import numpy as np
from django.contrib.auth.models import User
from django.utils import timezone

from battles.models import Battle, Campaign, Competitor, Prompt, Vote
from raters.models import RaterPool
from tests.conftest import Tenant
from tests.factories import CompetitorFactory, ModelEndpointFactory

CHOICES = ("left", "right", "tie", "both_bad")


def votes_write(
    *,
    campaign: Campaign,
    pool: RaterPool,
    raters: Sequence,
    prompts: Sequence[Prompt],
    competitors: Sequence[Competitor],
    strengths: Sequence[float],
    n: int,
    seed: int = 0,
    tie_rate: float = 0.1,
    both_bad_rate: float = 0.0,
    decision_ms: int = 5000,
    categories: Sequence[str] | None = None,
    shared: bool = False,
    identity_every: int = 0,
) -> list[Vote]:
    """``identity_every``: every so many votes the prompt asks the model who it is (0: never).
    ``shared``: the battles are copies of shared items, as ``reviewers_per_item`` makes them: the
    j-th time a rater meets a (prompt, pair) it is that pair's j-th item, so items have several raters
    and no rater rates one twice (the same keys in every call: later calls join the same items)."""
    rng = np.random.default_rng(seed)
    met: dict[tuple[int, int, int, int], int] = {}
    k = len(competitors)
    a = rng.integers(0, k, n)
    b = (a + rng.integers(1, k, n)) % k
    s = np.log(np.asarray(strengths, dtype=float))
    p_left = 1 / (1 + np.exp(-(s[a] - s[b])))
    u = rng.random(n)
    outcome = np.where(
        u < tie_rate, 2, np.where(u < tie_rate + both_bad_rate, 3, np.where(rng.random(n) < p_left, 0, 1))
    )
    now = timezone.now()
    battles, votes = [], []
    for i in range(n):
        prompt = prompts[i % len(prompts)]
        rater = raters[i % len(raters)]
        left, right = competitors[a[i]], competitors[b[i]]
        battle = Battle(
            id=uuid.uuid4(),
            organization_id=campaign.organization_id,
            campaign=campaign,
            rater=rater,
            pool=pool,
            prompt=prompt,
            left=left,
            right=right,
            status=Battle.Status.VOTED,
            params={"temperature": 0.7, "top_p": 1.0, "max_tokens": 64, "system_prompt": "", "seed": i},
            ready_at=now,
            shown_at=now,
            voted_at=now,
        )
        if shared:
            lo, hi = sorted((left.pk, right.pk))
            j = met.get((prompt.pk, lo, hi, rater.pk), 0)
            met[(prompt.pk, lo, hi, rater.pk)] = j + 1
            battle.item_key = uuid.uuid5(uuid.NAMESPACE_URL, f"item:{campaign.pk}:{prompt.pk}:{lo}:{hi}:{j}")
        battles.append(battle)
        style = {"tokens": int(20 + 5 * (i % 7)), "headers": i % 2, "list_items": i % 3, "bold": 0, "code_blocks": 0}
        votes.append(
            Vote(
                organization_id=campaign.organization_id,
                campaign=campaign,
                battle=battle,
                created_at=now,
                rater=rater,
                pool=pool,
                prompt=prompt,
                prompt_hash=prompt.text_hash,
                category=categories[i % len(categories)] if categories else prompt.category,
                language="en",
                prompt_source="pool",
                left=left,
                right=right,
                left_model=left.endpoint.name,
                left_version=left.version_label,
                left_tokens=style["tokens"],
                left_finish_reason="stop",
                left_latency_s=0.5,
                right_model=right.endpoint.name,
                right_version=right.version_label,
                right_tokens=30,
                right_finish_reason="stop",
                right_latency_s=0.6,
                params=battle.params,
                choice=CHOICES[outcome[i]],
                decision_ms=decision_ms,
                left_style=style,
                right_style={"tokens": 30, "headers": 0, "list_items": 1, "bold": 0, "code_blocks": 0},
                prompt_asks_identity=bool(identity_every) and i % identity_every == 0,
                answer_names_model=False,
            )
        )
    Battle.objects.bulk_create(battles, batch_size=2000)
    return Vote.objects.bulk_create(votes, batch_size=2000)


def vote_at(
    tenant: Tenant,
    *,
    rater: User,
    left: Competitor,
    right: Competitor,
    at: datetime,
    choice: str = "left",
    decision_ms: int = 5000,
    prompt: Prompt | None = None,
    gold_expected: str = "",
    item_key: uuid.UUID | None = None,
) -> Vote:
    """One battle and its vote at a chosen time (a gold battle when ``gold_expected`` is given; a copy of
    a shared item when ``item_key`` is given)."""
    campaign = tenant.campaign
    prompt = prompt or Prompt.objects.filter(campaign=campaign).order_by("pk").first()
    assert prompt is not None
    source = "gold" if gold_expected else "pool"
    battle = Battle.objects.create(
        id=uuid.uuid4(),
        organization_id=campaign.organization_id,
        campaign=campaign,
        rater=rater,
        pool=tenant.pool,
        prompt=prompt,
        left=left,
        right=right,
        status=Battle.Status.VOTED,
        params={},
        ready_at=at,
        shown_at=at - timedelta(milliseconds=decision_ms),
        voted_at=at,
        source=source,
        gold_expected=gold_expected,
        item_key=item_key,
    )
    style = {"tokens": 20, "headers": 0, "list_items": 0, "bold": 0, "code_blocks": 0}
    return Vote.objects.create(
        organization_id=campaign.organization_id,
        campaign=campaign,
        battle=battle,
        created_at=at,
        rater=rater,
        pool=tenant.pool,
        prompt=prompt,
        prompt_hash=prompt.text_hash,
        category=prompt.category,
        language="en",
        prompt_source="pool",
        left=left,
        right=right,
        left_model="a",
        left_version="1",
        left_tokens=20,
        left_finish_reason="stop",
        left_latency_s=0.5,
        right_model="b",
        right_version="1",
        right_tokens=20,
        right_finish_reason="stop",
        right_latency_s=0.5,
        params={},
        choice=choice,
        decision_ms=decision_ms,
        left_style=style,
        right_style=style,
        prompt_asks_identity=False,
        answer_names_model=False,
        source=source,
    )


def third(acme: Tenant, name: str = "third", *, active: bool = True) -> Competitor:
    endpoint = ModelEndpointFactory.create(organization=acme.organization, name=name)
    return CompetitorFactory.create(campaign=acme.campaign, endpoint=endpoint, version_label="1", active=active)


def left_leads(acme: Tenant, rater: User, *, n: int, seed: int, min_votes: int) -> None:
    """``n`` votes by ``rater`` between Acme's two competitors, the left one twice as strong, and the campaign
    set to recompute them fast (sandwich intervals, few rounds, no decision-time floor)."""
    votes_write(
        campaign=acme.campaign,
        pool=acme.pool,
        raters=[rater],
        prompts=list(Prompt.objects.filter(campaign=acme.campaign)),
        competitors=[acme.left, acme.right],
        strengths=(2.0, 1.0),
        n=n,
        seed=seed,
    )
    Campaign.objects.filter(pk=acme.campaign.pk).update(
        ranking_min_votes=min_votes, ranking_bootstrap_rounds=10, ranking_interval="sandwich", min_decision_ms=0
    )
