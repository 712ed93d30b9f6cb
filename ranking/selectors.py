"""Reads for rankings: the vote log straight into arrays, and the stored snapshots."""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import pandas as pd
from django.db import connection
from django.db.models import Max, QuerySet
from numpy.typing import NDArray

from battles.models import Campaign, Vote
from raters.models import RaterFlag

from .models import LeaderboardSnapshot
from .policy import STYLE_FEATURES, ExclusionPolicy, VoteArrays
from .quality import quality_report

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


# Item-bootstrap rounds for the agreement intervals (seed 0: the same log gives the same intervals).
QUALITY_BOOTSTRAP_ROUNDS = 1000


def rater_quality(*, campaign: Campaign, alpha: float = 0.01, min_common: int = 10) -> dict[str, Any]:
    """Agreement on shared items (overall and per pool of the campaign) and the outlier test per rater,
    from every vote in the campaign's log (read-only; nothing is excluded, the flagged raters
    included: they are what this measures). Items are keyed by prompt hash and competitor pair with
    sides normalised, a stand-in until shared battles exist (``ranking.quality``). Computed on request."""
    votes = vote_arrays(campaign_id=campaign.pk)
    pools = [
        (pool.pk, pool.name, [member.pk for member in pool.members.all()])
        for pool in campaign.rater_pools.prefetch_related("members").order_by("name", "pk")
    ]
    report = quality_report(
        vote_id=votes.vote_id,
        rater=votes.rater,
        prompt=votes.prompt,
        left=votes.left,
        right=votes.right,
        outcome=votes.outcome,
        pools=pools,
        alpha=alpha,
        min_common=min_common,
        bootstrap=QUALITY_BOOTSTRAP_ROUNDS,
    )
    return {"campaign_id": campaign.pk, **report}
