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
    RULES,
    STYLE_FEATURES,
    ExclusionPolicy,
    VoteArrays,
    VoteLog,
    grouped_votes,
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
    the counts come from one GROUP BY over the log (with GROUPING SETS, the counts per prompt as well) and
    only the sample of kept votes travels one by one; elsewhere the log is read one by one and grouped
    in numpy (``vote_log_from_arrays``, which gives equal arrays). ``by_prompt``: group the counts by
    prompt too (the bootstrap by prompt, or "auto", needs them)."""
    if connection.vendor != "postgresql":
        return vote_log_from_arrays(
            vote_arrays(campaign_id=campaign_id), policy, by_prompt=by_prompt, per_vote_max=per_vote_max
        )
    votes, rules, kept = _policy_sql(campaign_id, policy)
    prompt_key = "p.code, " if by_prompt else ""
    counts_sql = (
        f"SELECT v.category, COALESCE(p.code, -1), COALESCE(v.left_id, -1), COALESCE(v.right_id, -1), "
        f"COALESCE({_OUTCOME_SQL}, -1), {rules}, count(*), max(v.id), GROUPING(v.left_id) FROM {votes} "
        f"GROUP BY GROUPING SETS ((v.category, {prompt_key}v.left_id, v.right_id, {_OUTCOME_SQL}, {rules}), "
        f"(v.category, p.code, {rules}))"
    )
    columns = ["category", "prompt", "left", "right", "outcome", "rules", "n", "last", "by_prompt_only"]
    small = {"prompt": "int32", "left": "int64", "right": "int64", "outcome": "int8", "rules": "int8"}
    frame = _copy_frame(counts_sql, columns, {"category": "category", **small, "by_prompt_only": "int8"})
    pairs = frame[frame["by_prompt_only"].to_numpy() == 0]
    categories = _categories(frame["category"])
    category_codes = _category_codes(pairs["category"], categories)

    def ints(part: pd.DataFrame, name: str) -> NDArray[np.int64]:
        values: NDArray[np.int64] = part[name].to_numpy(dtype=np.int64)
        return values

    rule_bits, n = ints(pairs, "rules"), ints(pairs, "n")
    codes = category_codes.astype(np.int64)
    n_categories = len(categories)
    totals = np.bincount(codes, n, minlength=n_categories).astype(np.int64)

    def tally(within: NDArray[np.bool_]) -> dict[str, int]:
        out = {name: int(n[within & ((rule_bits >> k) & 1 == 1)].sum()) for k, name in enumerate(RULES)}
        out["total"] = int(n[within & (rule_bits != 0)].sum())
        return out

    excluded = tally(np.ones(codes.shape[0], dtype=bool))
    excluded_in = {name: tally(codes == code) for code, name in enumerate(categories)}
    keep = rule_bits == 0
    kept_rows = pairs[keep]
    counted = grouped_votes(
        codes[keep],
        ints(kept_rows, "prompt") if by_prompt else np.full(int(keep.sum()), -1, dtype=np.int64),
        ints(kept_rows, "left"),
        ints(kept_rows, "right"),
        ints(kept_rows, "outcome"),
        ints(kept_rows, "n"),
        ints(kept_rows, "last"),
        categories,
    )
    kept_total = counted.votes
    rate = sample_rate(kept_total, per_vote_max)
    sample = _vote_sample(votes, kept, rate, categories)
    return VoteLog(
        counted=counted,
        sample=sample,
        sample_rate=rate,
        total=int(n.sum()),
        totals=totals,
        kept=kept_total,
        excluded=excluded,
        excluded_in=excluded_in,
        last_vote_id=int(ints(pairs, "last").max()) if len(pairs) else 0,
        categories=categories,
        by_prompt=by_prompt,
        prompts=_prompt_counts(frame, categories),
    )


def _prompt_counts(frame: pd.DataFrame, categories: tuple[str, ...]) -> VoteArrays:
    """The kept votes counted per (category, prompt): the grouping set that the interval's choice reads."""
    part = frame[(frame["by_prompt_only"].to_numpy() == 1) & (frame["rules"].to_numpy() == 0)]
    none = np.full(len(part), -1, dtype=np.int64)
    return grouped_votes(
        _category_codes(part["category"], categories),
        part["prompt"].to_numpy(dtype=np.int64),
        none,
        none,
        none,
        part["n"].to_numpy(dtype=np.int64),
        part["last"].to_numpy(dtype=np.int64),
        categories,
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
        prompt=ints("prompt_hash"),
        category=_category_codes(frame["category"], categories),
        categories=categories,
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
