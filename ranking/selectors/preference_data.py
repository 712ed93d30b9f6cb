"""Preference pairs (reward-model / DPO training data) and their length audit."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from battles.exporting import VoteFilters
from battles.models import Campaign, Choice
from battles.selectors import vote_events, votes_filtered

from ..estimators.pairwise import wilson_interval
from ..models import LeaderboardSnapshot
from ..policy import STYLE_FEATURES, VoteArrays
from .arrays import exclusion_policy_for, vote_arrays
from .leaderboards import snapshot_latest

# One row per vote with a winner: ties and both_bad have none, and votes the campaign's exclusion
# policy leaves out of the leaderboards (too fast, identity leak, over a cap, flagged rater) are left
# out here too, by the same rules (``exclusion_policy_for``), so the training data is the data the
# published scores stand on.

# Length is measured as the style-controlled view measures it (style counts: tokens outside code
# blocks), so the share below and the view's length coefficient speak of one quantity.
_LENGTH = STYLE_FEATURES.index("tokens")


@dataclass(frozen=True)
class PairSelection:
    votes: VoteArrays
    selected: NDArray[np.bool_]  # the votes the filters select
    pairs: NDArray[np.bool_]  # selected, kept by the policy, with a winner
    excluded: dict[str, int]  # per policy rule, among the selected votes (``total``: each vote once)
    no_winner: dict[str, int]  # ties and both_bad among the selected votes the policy kept


def preference_pair_selection(*, campaign: Campaign, filters: VoteFilters | None = None) -> PairSelection:
    votes = vote_arrays(campaign_id=campaign.pk)
    if filters is not None and filters != VoteFilters():
        ids = np.fromiter(
            votes_filtered(campaign=campaign, filters=filters).values_list("id", flat=True), dtype=np.int64
        )
        selected = np.isin(votes.vote_id, ids)
    else:
        selected = np.ones(len(votes), dtype=bool)
    rules = exclusion_policy_for(campaign).rules(votes)
    out = np.zeros(len(votes), dtype=bool)
    for hits in rules.values():
        out |= hits
    excluded = {name: int((hits & selected).sum()) for name, hits in rules.items()}
    excluded["total"] = int((out & selected).sum())
    kept = selected & ~out
    ties, both_bad = kept & (votes.outcome == 2), kept & (votes.outcome == 3)
    return PairSelection(
        votes=votes,
        selected=selected,
        pairs=kept & (votes.outcome <= 1),
        excluded=excluded,
        no_winner={"tie": int(ties.sum()), "both_bad": int(both_bad.sum())},
    )


def _messages(conversation: list[dict[str, Any]], side: str) -> list[dict[str, str]]:
    messages: list[dict[str, str]] = []
    for turn in conversation:
        messages.append({"role": "user", "content": turn["prompt"]})
        messages.append({"role": "assistant", "content": turn[side]})
    return messages


def preference_pair_row(event: dict[str, Any]) -> dict[str, Any]:
    """A vote event with texts (``battles.selectors.vote_events``) as a preference pair."""
    chosen, rejected = ("left", "right") if event["vote"] == "left" else ("right", "left")
    conversation = event["conversation"]
    last = conversation[-1] if conversation else {"prompt": "", "left": "", "right": ""}
    return {
        "vote_id": event["vote_id"],
        "battle_id": event["battle_id"],
        "campaign_id": event["campaign_id"],
        "timestamp": event["timestamp"],
        "category": event["prompt"]["category"],
        "language": event["prompt"]["language"],
        "prompt_id": event["prompt"]["id"],
        "source": event["prompt"]["source"],
        "system_prompt": event["params"].get("system_prompt", ""),
        "prompt": conversation[0]["prompt"] if conversation else "",
        "chosen": last[chosen],
        "rejected": last[rejected],
        "chosen_model": event[chosen]["model"],
        "chosen_version": event[chosen]["version"],
        "chosen_competitor_id": event[chosen]["competitor_id"],
        "chosen_side": chosen,
        "rejected_model": event[rejected]["model"],
        "rejected_version": event[rejected]["version"],
        "rejected_competitor_id": event[rejected]["competitor_id"],
        "turns": len(conversation),
        "chosen_messages": _messages(conversation, chosen),
        "rejected_messages": _messages(conversation, rejected),
    }


def preference_pairs(*, campaign: Campaign, filters: VoteFilters | None = None) -> Iterator[dict[str, Any]]:
    """The rows, in log order, streamed (texts fetched per chunk); the policy's exclusions are computed
    first from the log's arrays (the caps need the whole log in order)."""
    selection = preference_pair_selection(campaign=campaign, filters=filters)
    winners = selection.selected & (selection.votes.outcome <= 1)
    excluded = set(selection.votes.vote_id[winners & ~selection.pairs].tolist())
    votes = votes_filtered(campaign=campaign, filters=filters).filter(choice__in=(Choice.LEFT, Choice.RIGHT))
    for event in vote_events(votes=votes, texts=True):
        if event["vote_id"] not in excluded:
            yield preference_pair_row(event)


def _style_length_coefficient(*, campaign: Campaign, category: str) -> dict[str, Any]:
    snapshot = snapshot_latest(campaign=campaign, category=category, view=LeaderboardSnapshot.View.STYLE)
    if snapshot is None:
        reason = "no style-controlled leaderboard has been computed for this selection yet"
        return {"available": False, "reason": f"not available: {reason}"}
    base: dict[str, Any] = {"snapshot_version": snapshot.version, "interval": snapshot.method.get("interval")}
    withheld = snapshot.extra.get("style_withheld")
    if withheld:
        return {**base, "available": False, "reason": f"not available: {withheld}"}
    for row in snapshot.extra.get("style_coefficients") or []:
        if row.get("feature") == "tokens":
            return {
                **base,
                "available": True,
                "reason": None,
                "coef": row["coef"],
                "lower": row["lower"],
                "upper": row["upper"],
            }
    dropped = [d for d in (snapshot.extra.get("style_checks") or {}).get("dropped", []) if d.get("feature") == "tokens"]
    why = dropped[0]["reason"] if dropped else "the snapshot has no length coefficient"
    return {**base, "available": False, "reason": f"not available: {why}"}


def preference_pairs_audit(*, campaign: Campaign, filters: VoteFilters | None = None) -> dict[str, Any]:
    """How many pairs, what each rule left out, and whether the chosen answer tends to be the longer
    one: the share of pairs (of those whose lengths differ) where it is, with a 95% Wilson interval,
    next to the style-controlled view's length coefficient (logit per standard deviation of the
    normalised length gap, left minus right) from its latest snapshot."""
    selection = preference_pair_selection(campaign=campaign, filters=filters)
    votes, pairs = selection.votes, selection.pairs
    left_len = votes.style_left[pairs, _LENGTH]
    right_len = votes.style_right[pairs, _LENGTH]
    left_won = votes.outcome[pairs] == 0
    chosen = np.where(left_won, left_len, right_len)
    rejected = np.where(left_won, right_len, left_len)
    longer, shorter = int((chosen > rejected).sum()), int((chosen < rejected).sum())
    differ = longer + shorter
    lower, upper = wilson_interval(longer, differ, confidence=0.95)
    return {
        "votes": int(selection.selected.sum()),
        "pairs": int(pairs.sum()),
        "excluded": selection.excluded,
        "no_winner": selection.no_winner,
        "length": {
            "measure": "tokens outside code blocks (the style counts the style-controlled view uses)",
            "chosen_longer": longer,
            "chosen_shorter": shorter,
            "same_length": int(pairs.sum()) - differ,
            "share_chosen_longer": round(longer / differ, 6) if differ else None,
            "lower": round(float(lower), 6) if differ else None,
            "upper": round(float(upper), 6) if differ else None,
            "confidence": 0.95,
        },
        "style_length_coefficient": _style_length_coefficient(
            campaign=campaign, category=filters.category if filters is not None else ""
        ),
    }
