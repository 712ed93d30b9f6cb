"""The vote log as the estimators read it: a campaign's votes in one scan, into arrays (``vote_arrays``;
PostgreSQL's COPY at millions of votes); the log as the recompute reads it (``vote_log``: the kept votes
counted by PostgreSQL's GROUP BY, and one by one only as many as the per-vote views need); the item of
each vote for the agreement statistics; and the campaign's exclusion policy in force."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
from django.db import connection
from numpy.typing import NDArray

from battles.models import Campaign
from raters.models import FLAG_IN_FORCE, RaterFlag

from ..policy import (
    PER_VOTE_MAX,
    STYLE_FEATURES,
    ExclusionPolicy,
    LogCounts,
    VoteArrays,
    VoteLog,
    log_counts,
    sample_rate,
    sample_threshold,
    vote_log_from_arrays,
)

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

    return _vote_arrays_from(
        frame,
        prompt=prompt_codes.astype(np.int64),
        category=category_codes.astype(np.int64),
        categories=tuple(str(c) for c in categories),
    )


def _ints(frame: pd.DataFrame, name: str) -> NDArray[np.int64]:
    values: NDArray[np.int64] = frame[name].to_numpy(dtype=np.int64)
    return values


def _vote_arrays_from(
    frame: pd.DataFrame, *, prompt: NDArray[np.int64], category: NDArray[np.int64], categories: tuple[str, ...]
) -> VoteArrays:
    """The votes of ``frame`` (columns ``_COLUMNS``) as arrays, with their prompt and category codes."""
    return VoteArrays(
        vote_id=_ints(frame, "id"),
        left=_ints(frame, "left"),
        right=_ints(frame, "right"),
        outcome=_ints(frame, "outcome"),
        decision_ms=_ints(frame, "decision_ms"),
        rater=_ints(frame, "rater"),
        prompt=prompt,
        category=category,
        categories=categories,
        identity=frame["identity"].to_numpy(dtype=np.int64).astype(bool),
        style_left=frame[[f"left_{k}" for k in STYLE_FEATURES]].to_numpy(dtype=np.float64),
        style_right=frame[[f"right_{k}" for k in STYLE_FEATURES]].to_numpy(dtype=np.float64),
    )


def _copy_frame(sql: str, columns: list[str], dtypes: dict[str, str]) -> pd.DataFrame:
    """The rows of ``sql`` (no parameters: literals only) through PostgreSQL's COPY, parsed by pandas into
    ``dtypes`` (int64 where not named; "category" for the category, a handful of distinct texts)."""
    buffer = io.BytesIO()
    with connection.cursor() as cursor, cursor.cursor.copy(f"COPY ({sql}) TO STDOUT WITH (FORMAT csv)") as copy:
        for chunk in copy:
            buffer.write(chunk)
    buffer.seek(0)
    types = {c: dtypes.get(c, "int64") for c in columns}
    if buffer.getbuffer().nbytes == 0:
        return pd.DataFrame({c: pd.Series(dtype="object" if t == "category" else t) for c, t in types.items()})
    return pd.read_csv(buffer, header=None, names=columns, dtype=types, keep_default_na=False, engine="c")


def _category_codes(column: pd.Series, categories: tuple[str, ...]) -> NDArray[np.int64]:
    index = {name: code for code, name in enumerate(categories)}
    if isinstance(column.dtype, pd.CategoricalDtype):
        lookup = np.asarray([index[str(c)] for c in column.cat.categories], dtype=np.int64)
        return lookup[column.cat.codes.to_numpy()] if len(column) else np.zeros(0, dtype=np.int64)
    return np.asarray([index[str(c)] for c in column], dtype=np.int64)


def _categories(column: pd.Series) -> tuple[str, ...]:
    """Sorted, as ``vote_arrays`` factorises them."""
    values = column.cat.categories if isinstance(column.dtype, pd.CategoricalDtype) else column.unique()
    return tuple(sorted(str(c) for c in values))


def _policy_sql(campaign_id: int, policy: ExclusionPolicy) -> tuple[str, str, str]:
    """The campaign's votes with each one's prompt code (``p``: by first appearance in the log, as
    ``vote_arrays`` factorises the hashes), the bitmask of the rules that exclude it (bit k: ``RULES[k]``),
    and the condition a kept vote meets. Literals only (integers): COPY takes no parameters."""
    c = int(campaign_id)
    log = f"campaign_id = {c} AND source <> 'gold'"
    prompts = (
        f"SELECT prompt_hash, row_number() OVER (ORDER BY min(id)) - 1 AS code FROM battles_vote WHERE {log} "
        "GROUP BY prompt_hash"
    )
    flagged = ",".join(str(int(r)) for r in policy.flagged_raters)
    identity = "(v.prompt_asks_identity OR v.answer_names_model)" if policy.exclude_identity_leaks else "false"
    checks = [
        f"v.decision_ms < {int(policy.min_decision_ms)}",
        identity,
        "false" if policy.prompt_hash_cap is None else f"rn_prompt > {int(policy.prompt_hash_cap)}",
        "false" if policy.rater_vote_cap is None else f"rn_rater > {int(policy.rater_vote_cap)}",
        f"v.rater_id IN ({flagged})" if flagged else "false",
    ]
    rules = " + ".join(f"(CASE WHEN {check} THEN {1 << k} ELSE 0 END)" for k, check in enumerate(checks))
    kept = " AND ".join(f"NOT ({check})" for check in checks if check != "false") or "true"
    windows = ""
    if policy.prompt_hash_cap is not None:
        windows += ", row_number() OVER (PARTITION BY prompt_hash ORDER BY id) AS rn_prompt"
    if policy.rater_vote_cap is not None:
        windows += ", row_number() OVER (PARTITION BY rater_id ORDER BY id) AS rn_rater"
    # The caps count each prompt's and each rater's votes in log order over the whole log (as
    # ``ExclusionPolicy.rules`` does): only they need a window, and only then is the log sorted for them.
    source = f"SELECT *{windows} FROM battles_vote WHERE {log}"
    votes = f"({source}) v JOIN ({prompts}) p ON p.prompt_hash = v.prompt_hash"
    return votes, rules, kept


def vote_log(
    *, campaign_id: int, policy: ExclusionPolicy, by_prompt: bool, per_vote_max: int = PER_VOTE_MAX
) -> VoteLog:
    """The campaign's log under ``policy`` as the recompute reads it (``policy.VoteLog``): on PostgreSQL
    the policy's rules are applied in SQL, every vote's few columns are grouped in numpy (``log_counts``)
    and only the sample of kept votes travels whole; elsewhere the log is read one by one and grouped
    in numpy (``vote_log_from_arrays``, which gives equal arrays). ``by_prompt``: group the counts by
    prompt too (the bootstrap by prompt, or "auto", needs them)."""
    if connection.vendor != "postgresql":
        return vote_log_from_arrays(
            vote_arrays(campaign_id=campaign_id), policy, by_prompt=by_prompt, per_vote_max=per_vote_max
        )
    votes, rules, kept = _policy_sql(campaign_id, policy)
    # Every vote's few columns, no GROUP BY: PostgreSQL's grouping of ten million votes spills to disk with the
    # default work_mem and took several times as long as the scan; numpy groups them in seconds.
    counts_sql = f"SELECT v.category, p.code, v.left_id, v.right_id, {_OUTCOME_SQL}, {rules}, v.id FROM {votes}"
    counts = _counts_read(counts_sql, by_prompt)
    rate = sample_rate(counts.kept, per_vote_max)
    return VoteLog(
        sample=_vote_sample(votes, kept, rate, counts.counted.categories),
        sample_rate=rate,
        categories=counts.counted.categories,
        by_prompt=by_prompt,
        **counts.__dict__,
    )


def _counts_read(sql: str, by_prompt: bool) -> LogCounts:
    """Every vote's few columns (``sql``), counted (``policy.log_counts``); the frame is gone on return."""
    columns = ["category", "prompt", "left", "right", "outcome", "rules", "id"]
    types = {"category": "category", "prompt": "int32", "outcome": "int8", "rules": "int8"}
    frame = _copy_frame(sql, columns, types)
    categories = _categories(frame["category"])

    return log_counts(
        category=_category_codes(frame["category"], categories),
        categories=categories,
        prompt=_ints(frame, "prompt"),
        left=_ints(frame, "left"),
        right=_ints(frame, "right"),
        outcome=_ints(frame, "outcome"),
        rules=_ints(frame, "rules"),
        vote_id=_ints(frame, "id"),
        by_prompt=by_prompt,
    )


def _vote_sample(votes: str, kept: str, rate: float, categories: tuple[str, ...]) -> VoteArrays:
    """The kept votes one by one, in log order: those of the deterministic sample of ``rate``
    (``policy.sample_mask``; all of them at rate 1)."""
    styles = ", ".join(
        f"COALESCE((v.{side}_style->>'{key}')::int, 0)" for side in ("left", "right") for key in STYLE_FEATURES
    )
    identity = "CASE WHEN v.prompt_asks_identity OR v.answer_names_model THEN 1 ELSE 0 END"
    sampled = "" if rate >= 1.0 else f" AND ((v.id & 4294967295) * 1640531527) & 4294967295 < {sample_threshold(rate)}"
    sql = (
        f"SELECT v.id, v.left_id, v.right_id, {_OUTCOME_SQL}, v.decision_ms, v.rater_id, p.code, v.category, "
        f"{identity}, {styles} FROM {votes} WHERE {kept}{sampled} ORDER BY v.id"
    )
    frame = _copy_frame(sql, _COLUMNS, {"category": "category"})

    return _vote_arrays_from(
        frame,
        prompt=_ints(frame, "prompt_hash"),
        category=_category_codes(frame["category"], categories),
        categories=categories,
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
