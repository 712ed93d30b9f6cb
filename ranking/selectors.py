"""Reads for rankings: the vote log straight into arrays, and the stored snapshots."""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from django.db import connection
from django.db.models import Max, QuerySet
from numpy.typing import NDArray

from battles.exporting import VoteFilters
from battles.models import Campaign, Choice, Vote
from battles.selectors import vote_events, votes_filtered
from raters.models import RaterFlag

from .estimators.pairwise import wilson_interval
from .models import LeaderboardSnapshot
from .policy import STYLE_FEATURES, ExclusionPolicy, VoteArrays

_OUTCOME_SQL = "CASE choice WHEN 'left' THEN 0 WHEN 'right' THEN 1 WHEN 'tie' THEN 2 ELSE 3 END"


def _vote_sql(vendor: str) -> str:
    if vendor == "postgresql":

        def style(side: str, key: str) -> str:
            return f"COALESCE(({side}_style->>'{key}')::int, 0)"
    else:

        def style(side: str, key: str) -> str:
            return f"COALESCE(json_extract({side}_style, '$.{key}'), 0)"

    styles = ", ".join(style(side, key) for side in ("left", "right") for key in STYLE_FEATURES)
    identity = "CASE WHEN prompt_asks_identity OR answer_names_model THEN 1 ELSE 0 END"
    return (
        f"SELECT id, left_id, right_id, {_OUTCOME_SQL}, decision_ms, rater_id, prompt_hash, category, "
        f"{identity}, {styles} FROM battles_vote WHERE campaign_id = %s ORDER BY id"
    )


_COLUMNS = ["id", "left", "right", "outcome", "decision_ms", "rater", "prompt_hash", "category", "identity"] + [
    f"{side}_{key}" for side in ("left", "right") for key in STYLE_FEATURES
]


def _frame(campaign_id: int) -> pd.DataFrame:
    sql = _vote_sql(connection.vendor)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # COPY streams the rows as CSV in large chunks; parsing that with pandas is several times
            # faster than building a Python tuple per row, which matters at millions of votes.
            buffer = io.BytesIO()
            raw = cursor.cursor
            literal = sql.replace("%s", str(int(campaign_id)))
            with raw.copy(f"COPY ({literal}) TO STDOUT WITH (FORMAT csv)") as copy:
                for chunk in copy:
                    buffer.write(chunk)
            buffer.seek(0)
            if buffer.getbuffer().nbytes == 0:
                return pd.DataFrame(columns=_COLUMNS)
            return pd.read_csv(
                buffer, header=None, names=_COLUMNS, dtype={"prompt_hash": str, "category": str}, keep_default_na=False
            )
        cursor.execute(sql, [campaign_id])
        return pd.DataFrame.from_records(cursor.fetchall(), columns=_COLUMNS)


def vote_arrays(*, campaign_id: int) -> VoteArrays:
    frame = _frame(campaign_id)
    prompt_codes, _ = pd.factorize(frame["prompt_hash"].astype(str), sort=False)
    category_codes, categories = pd.factorize(frame["category"].astype(str), sort=True)

    def ints(name: str) -> NDArray[np.int64]:
        values: NDArray[np.int64] = frame[name].to_numpy(dtype=np.int64)
        return values

    return VoteArrays(
        vote_id=ints("id"),
        left=ints("left"),
        right=ints("right"),
        outcome=ints("outcome"),
        decision_ms=ints("decision_ms"),
        rater=ints("rater"),
        prompt=prompt_codes.astype(np.int64),
        category=category_codes.astype(np.int64),
        categories=tuple(str(c) for c in categories),
        identity=frame["identity"].to_numpy(dtype=np.int64).astype(bool),
        style_left=frame[[f"left_{k}" for k in STYLE_FEATURES]].to_numpy(dtype=np.float64),
        style_right=frame[[f"right_{k}" for k in STYLE_FEATURES]].to_numpy(dtype=np.float64),
    )


def exclusion_policy_for(campaign: Campaign) -> ExclusionPolicy:
    flagged = RaterFlag.objects.filter(organization_id=campaign.organization_id).values_list("rater_id", flat=True)
    return ExclusionPolicy(
        min_decision_ms=campaign.min_decision_ms,
        exclude_identity_leaks=campaign.exclude_identity_leaks,
        prompt_hash_cap=campaign.prompt_hash_cap,
        rater_vote_cap=campaign.rater_vote_cap,
        flagged_raters=tuple(sorted(flagged)),
    )


def snapshot_latest(*, campaign: Campaign, category: str = "", view: str = "raw") -> LeaderboardSnapshot | None:
    return (
        LeaderboardSnapshot.objects.filter(campaign=campaign, category=category, view=view).order_by("-version").first()
    )


def snapshot_history(*, campaign: Campaign, category: str = "", view: str = "raw") -> QuerySet[LeaderboardSnapshot]:
    return LeaderboardSnapshot.objects.filter(campaign=campaign, category=category, view=view).order_by("-version")


def snapshot_categories(*, campaign: Campaign) -> list[str]:
    """Categories of the newest recompute (overall first)."""
    version = LeaderboardSnapshot.objects.filter(campaign=campaign).aggregate(v=Max("version"))["v"]
    if version is None:
        return []
    cats = LeaderboardSnapshot.objects.filter(campaign=campaign, version=version).values_list("category", flat=True)
    return sorted(set(cats), key=lambda c: (c != "", c))


def current_intervals(campaign_id: int) -> dict[int, tuple[float, float]]:
    """Score intervals of the competitors the newest overall raw leaderboard shows, in its largest
    connected group: intervals of groups that never met cannot be compared, so the others count as not
    placed yet (and get the boost that connects them). A competitor with an open interval side (a
    one-sided record: the votes bound it on one side only) is not placed yet either. Active
    sampling's source (``battles.hooks``)."""
    rows = (
        LeaderboardSnapshot.objects.filter(campaign_id=campaign_id, category="", view=LeaderboardSnapshot.View.RAW)
        .order_by("-version")
        .values_list("rows", flat=True)
        .first()
    )
    shown = [row for row in rows or [] if not row["hidden"] and row["lower"] is not None and row["upper"] is not None]
    if not shown:
        return {}
    sizes: dict[int, int] = {}
    for row in shown:
        sizes[row["component"]] = sizes.get(row["component"], 0) + 1
    main = max(sizes, key=lambda c: (sizes[c], -c))
    return {row["competitor_id"]: (row["lower"], row["upper"]) for row in shown if row["component"] == main}


def campaigns_voted_in(*, organization_id: int, rater_id: int) -> list[int]:
    """Ids of the organisation's campaigns in which the rater has votes."""
    return list(
        Vote.objects.filter(organization_id=organization_id, rater_id=rater_id)
        .values_list("campaign_id", flat=True)
        .distinct()
        .order_by("campaign_id")
    )


# --- Preference pairs (reward-model / DPO training data) and their length audit. ------------------
#
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
