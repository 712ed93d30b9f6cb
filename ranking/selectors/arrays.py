"""The vote log as the estimators read it: a campaign's votes in one scan, into arrays (``vote_arrays``;
PostgreSQL's COPY at millions of votes), the item of each vote for the agreement statistics, and the
campaign's exclusion policy in force."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
from django.db import connection
from numpy.typing import NDArray

from battles.models import Campaign
from raters.models import FLAG_IN_FORCE, RaterFlag

from ..policy import STYLE_FEATURES, ExclusionPolicy, VoteArrays

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
        f"{identity}, {styles} FROM battles_vote WHERE campaign_id = %s AND source <> 'gold' ORDER BY id"
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


def vote_items(*, campaign_id: int, vote_id: NDArray[np.int64]) -> NDArray[np.int64]:
    """The item of each of these votes (``vote_arrays``' ids, in their order) as dense integer codes:
    a shared battle's copies have one ``item_key``, any other battle is its own item. Read by the
    agreement statistics only (the rankings' own read stays one table scan of the vote log)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT v.id, COALESCE(b.item_key, b.id) FROM battles_vote v JOIN battles_battle b ON b.id = v.battle_id "
            "WHERE v.campaign_id = %s AND v.source <> 'gold' ORDER BY v.id",
            [campaign_id],
        )
        rows = cursor.fetchall()
    if not rows:
        return np.zeros(0, dtype=np.int64)
    ids = np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows))
    codes, _ = pd.factorize(pd.Series([str(row[1]) for row in rows]), sort=False)
    by_id = dict(zip(ids.tolist(), codes.tolist(), strict=True))
    return np.asarray([by_id[int(v)] for v in vote_id.tolist()], dtype=np.int64)


def exclusion_policy_for(campaign: Campaign) -> ExclusionPolicy:
    in_force = list(
        RaterFlag.objects.filter(FLAG_IN_FORCE, organization_id=campaign.organization_id).values_list("pk", "rater_id")
    )
    return ExclusionPolicy(
        min_decision_ms=campaign.min_decision_ms,
        exclude_identity_leaks=campaign.exclude_identity_leaks,
        prompt_hash_cap=campaign.prompt_hash_cap,
        rater_vote_cap=campaign.rater_vote_cap,
        flagged_raters=tuple(sorted({rater_id for _, rater_id in in_force})),
        flag_ids=tuple(sorted(pk for pk, _ in in_force)),
    )
