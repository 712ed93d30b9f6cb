"""Shared items: a battle that becomes ready in a campaign with ``reviewers_per_item = k > 1`` is
copied k - 1 times into the buffer, so k different raters judge the same answer pair."""

from __future__ import annotations

import random

from django.db import transaction

from ..models import Battle, Campaign, Generation, Prompt, Side

_rng = random.SystemRandom()


def _shareable(battle: Battle, campaign: Campaign) -> bool:
    """Whether a battle that just became ready is an item to copy for k raters: generated ahead for a
    pool prompt, or pushed as a shadow battle. Not a rater's typed prompt (theirs alone), not gold (a
    per-rater check), not a live battle, not a multi-turn campaign's (each rater continues their own
    conversation, so the copies would stop being one item), not a copy already."""
    return (
        campaign.reviewers_per_item > 1
        and campaign.max_turns <= 1
        and battle.item_key is None
        and not battle.live
        and battle.status == Battle.Status.READY
        and (
            battle.source == Battle.Source.SHADOW
            or (battle.source == Battle.Source.GENERATED and battle.prompt.source == Prompt.Source.POOL)
        )
    )


@transaction.atomic
def battle_items_share(*, battles: list[Battle]) -> list[Battle]:
    """Shared battles: for each battle of a campaign with ``reviewers_per_item = k > 1`` that just became
    ready, ``k - 1`` copies in the campaign's buffer, so that k different raters judge the same answer
    pair. A copy is a battle of its own (one vote per battle is a database constraint): the same prompt,
    parameters, source and answers (its Generation rows copied), its sides drawn afresh (a coin flip per
    copy, so no rater's side order is shared with another's; agreement maps the sides back through the
    competitor ids). All k carry ``item_key`` (the first battle's id). The copies keep the first one's
    creation time, so the buffer's age limit ages the item, not each copy; a battle handed to a rater
    directly (nothing was buffered) is the item's first copy, the others wait in the buffer. The claim
    never gives one rater two copies (same prompt: "never the same prompt twice", and a unique
    constraint on (item_key, rater))."""
    made: list[Battle] = []
    by_campaign: dict[int, Campaign] = {}
    for battle in battles:
        campaign = by_campaign.setdefault(battle.campaign_id, battle.campaign)
        if not _shareable(battle, campaign):
            continue
        generations = list(Generation.objects.filter(battle=battle, turn=0))
        if {g.side for g in generations} != {Side.LEFT, Side.RIGHT}:
            continue
        Battle.objects.filter(pk=battle.pk).update(item_key=battle.pk)
        battle.item_key = battle.pk
        copies: list[Battle] = []
        rows: list[Generation] = []
        for _ in range(campaign.reviewers_per_item - 1):
            swap = _rng.random() < 0.5
            copy = Battle(
                organization_id=battle.organization_id,
                campaign_id=battle.campaign_id,
                prompt_id=battle.prompt_id,
                left_id=battle.right_id if swap else battle.left_id,
                right_id=battle.left_id if swap else battle.right_id,
                status=Battle.Status.READY,
                source=battle.source,
                params=battle.params,
                ready_at=battle.ready_at,
                requested_at=battle.requested_at,
                generation_started_at=battle.generation_started_at,
                experiment_id=battle.experiment_id,
                item_key=battle.pk,
            )
            copies.append(copy)
            for generation in generations:
                side = generation.side
                if swap:
                    side = Side.RIGHT if side == Side.LEFT else Side.LEFT
                rows.append(
                    Generation(
                        battle=copy,
                        side=side,
                        turn=0,
                        competitor_id=generation.competitor_id,
                        text=generation.text,
                        text_html=generation.text_html,
                        text_html_version=generation.text_html_version,
                        output_tokens=generation.output_tokens,
                        finish_reason=generation.finish_reason,
                        latency_s=generation.latency_s,
                        ttft_s=generation.ttft_s,
                        tokens_per_s=generation.tokens_per_s,
                        error=generation.error,
                        style=generation.style,
                        model_mentions=generation.model_mentions,
                    )
                )
        Battle.objects.bulk_create(copies)
        Generation.objects.bulk_create(rows)
        # auto_now_add stamped them now; the item is as old as its answers.
        Battle.objects.filter(pk__in=[c.pk for c in copies]).update(created_at=battle.created_at)
        made.extend(copies)
    return made
