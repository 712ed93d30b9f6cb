"""The vote log as the estimators read it: a campaign's votes in one scan, into arrays (``vote_arrays``;
PostgreSQL's COPY at millions of votes); the log as the recompute reads it (``vote_log``: from the log's
narrow copy that a trigger writes, every vote's few columns packed by PostgreSQL and counted in numpy, and
one by one only as many as the per-vote views need); the item of
each vote for the agreement statistics; and the campaign's exclusion policy in force."""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import pandas as pd
import psycopg
from django.db import connection, transaction
from numpy.typing import NDArray

from battles.models import Campaign
from raters.models import FLAG_IN_FORCE, RaterFlag

from ..policy import (
    PER_VOTE_MAX,
    STYLE_FEATURES,
    ExclusionPolicy,
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


_SEND = {
    ">i8": "int8send",
    ">i4": "int4send",
    ">i2": "int2send",
    "?": "boolsend",
    "|V16": "uuid_send",
    "timestamptz": "timestamptz_send",
}
# The arrays' types where the field's kind is not one: a timestamptz is its microseconds since 2000-01-01 UTC.
_DTYPE = {"timestamptz": ">i8"}


# Vote ids per packed row: a row of a few columns of a million votes is a message of about 25 MB. libpq keeps
# its input buffer as large as the largest message it has read, for as long as the connection lives: a row of
# 2**24 ids (the whole of a ten-million-vote log in one message) held 250 MB after the read.
_PACKED_ROW_BITS = 20


def _packed_columns(sql: str, fields: list[tuple[str, str]], *, hashed: bool = False) -> dict[str, NDArray[Any]]:
    """The rows of ``sql`` (literals only), one array per field, each field a NOT NULL integer, boolean or uuid
    of the type named (``>i8``, ``>i4``, ``>i2``, ``?``, ``|V16``; ``timestamptz``: int8 microseconds since
    2000-01-01 UTC), the first the vote id. PostgreSQL packs each column into one ``bytea`` of its binary values
    (``string_agg`` of ``int8send`` ...: every aggregate of a group sees its rows in the same order, so the
    columns stay aligned), a row per 2**20 vote ids (``_PACKED_ROW_BITS``), and numpy reads each as it lies: no
    per-row message, Python object or text parse for millions of rows (libpq hands COPY's output over one row
    at a time; that alone cost 2 minutes at 10 million). The packed rows are streamed, each appended to its
    columns as it comes and let go: the strings of the whole log, and libpq's copy of them, are never held.
    ``hashed``: group by hashing, not by sorting the rows first (the planner's choice at a million rows, and
    the larger half of the read's time: there are only a few groups), for this read only."""
    names = [f"c{k}" for k in range(len(fields))]
    packed = ", ".join(
        f"string_agg({_SEND[kind]}(x.{name}), ''::bytea)" for name, (_, kind) in zip(names, fields, strict=True)
    )
    query = f"SELECT {packed} FROM (SELECT * FROM ({sql}) s({', '.join(names)})) x GROUP BY x.c0 >> {_PACKED_ROW_BITS}"
    kinds = [np.dtype(_DTYPE.get(field, field)) for _, field in fields]
    # Each column's bytes appended to one growing buffer (a large block, grown in place), turned around in place
    # into native byte order and read by numpy as it lies: the column is never held twice, nor in pieces.
    buffers = [bytearray() for _ in fields]
    connection.ensure_connection()
    # A plain psycopg cursor: Django's binds parameters client-side, which gives no binary results.
    with transaction.atomic(), psycopg.Cursor(connection.connection) as cursor:
        if hashed:
            cursor.execute("SET LOCAL enable_sort = off")
        for row in cursor.stream(query, binary=True):
            for k, buffer in enumerate(buffers):
                buffer += row[k]
            del row
        if hashed:  # (on an error the transaction, or its savepoint, is rolled back, and the setting with it)
            cursor.execute("SET LOCAL enable_sort TO DEFAULT")
    out = {}
    for k, ((name, _), kind) in enumerate(zip(fields, kinds, strict=True)):
        column = np.frombuffer(buffers[k], dtype=kind)
        buffers[k] = bytearray()
        if not kind.isnative:
            column.byteswap(inplace=True)
            column = column.view(kind.newbyteorder("="))
        out[name] = column
    return out


def _copy_keys(campaign_id: int) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64], tuple[str, ...]]:
    """The campaign's ``LogPrompt`` keys: their ids (sorted), and per key its prompt hash (a dense code, in
    no particular order yet) and category (codes into the sorted categories)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT id, prompt_hash, category FROM ranking_logprompt WHERE campaign_id = %s ORDER BY id", [campaign_id]
        )
        keys = cursor.fetchall()
    ids = np.fromiter((k[0] for k in keys), dtype=np.int64, count=len(keys))
    hashes, _ = pd.factorize(pd.Series([k[1] for k in keys], dtype=object))
    names, codes = np.unique(np.asarray([k[2] for k in keys], dtype=object).astype(str), return_inverse=True)
    return ids, hashes.astype(np.int64), codes.astype(np.int64), tuple(str(c) for c in names)


def _rules_sql(policy: ExclusionPolicy) -> tuple[str, str]:
    """The bitmask of the rules that exclude a vote of ``ranking_logvote l`` (bit k: ``RULES[k]``), and the
    windows the caps need: they count each prompt's and each rater's votes in log order over the whole log
    (as ``ExclusionPolicy.rules`` does), so only they sort the log, and only when set. Literals only."""
    flagged = ",".join(str(int(r)) for r in policy.flagged_raters)
    checks = [
        f"l.decision_ms < {int(policy.min_decision_ms)}",
        "l.identity" if policy.exclude_identity_leaks else "false",
        "false" if policy.prompt_hash_cap is None else f"rn_prompt > {int(policy.prompt_hash_cap)}",
        "false" if policy.rater_vote_cap is None else f"rn_rater > {int(policy.rater_vote_cap)}",
        f"l.rater_id IN ({flagged})" if flagged else "false",
    ]
    rules = " + ".join(f"(CASE WHEN {check} THEN {1 << k} ELSE 0 END)" for k, check in enumerate(checks))
    windows = ""
    if policy.prompt_hash_cap is not None:
        windows += ", row_number() OVER (PARTITION BY p.prompt_hash ORDER BY l.vote_id) AS rn_prompt"
    if policy.rater_vote_cap is not None:
        windows += ", row_number() OVER (PARTITION BY l.rater_id ORDER BY l.vote_id) AS rn_rater"
    return rules, windows


def _narrow(values: NDArray[np.int64]) -> NDArray[Any]:
    """``values`` (non-negative, or none) in the smallest signed integer type that holds them."""
    top = int(values.max()) if values.size else 0
    for kind in (np.int8, np.int16, np.int32):
        if top <= np.iinfo(kind).max:
            return values.astype(kind)
    return values


# Up to this many possible ids between a campaign's smallest and largest key, a vote's key is found through a
# table indexed by the id (one gather a vote); above it by binary search.
_KEY_TABLE_SPAN = 1 << 24


def _positions(ids: NDArray[np.int64], values: NDArray[Any]) -> NDArray[Any]:
    """The position of each of ``values`` in ``ids`` (sorted, unique), as int32 where that holds them; a value
    that is not there raises (a vote naming a key of another campaign would be a broken copy)."""
    n = int(ids.shape[0])
    if values.size == 0:
        return np.zeros(0, dtype=np.int32)
    missing = LookupError("a vote of the log's copy names a prompt key the campaign does not have")
    if n == 0:
        raise missing
    first, span = int(ids[0]), int(ids[-1]) - int(ids[0]) + 1
    dtype = np.int32 if n <= np.iinfo(np.int32).max else np.int64
    if span <= max(_KEY_TABLE_SPAN, 4 * n) and int(values.min()) >= first and int(values.max()) < first + span:
        table = np.full(span, -1, dtype=dtype)
        table[ids - first] = np.arange(n, dtype=dtype)
        out: NDArray[Any] = table[values - np.asarray(first, dtype=values.dtype)]
        if int(out.min()) < 0:
            raise missing
        return out
    out = np.searchsorted(ids, values)
    if int(out.max()) >= n or not bool(np.all(ids[out] == values)):
        raise missing
    return out.astype(dtype)


def vote_log(
    *, campaign_id: int, policy: ExclusionPolicy, by_prompt: bool, per_vote_max: int = PER_VOTE_MAX
) -> VoteLog:
    """The campaign's log under ``policy`` as the recompute reads it (``policy.VoteLog``). On PostgreSQL it is
    read from the log's narrow copy (``ranking_logvote``, integers only, written by a trigger as votes are
    appended): every vote's few columns with the policy's rules applied in SQL, packed by PostgreSQL
    (``_packed_columns``), counted in numpy (``log_counts``); then only the sample of kept votes with their
    style counts. Elsewhere the log is read one by one and grouped in numpy (``vote_log_from_arrays``, which
    gives equal arrays). ``by_prompt``: group the counts by prompt too (the bootstrap by prompt, or "auto",
    needs them)."""
    if connection.vendor != "postgresql":
        return vote_log_from_arrays(
            vote_arrays(campaign_id=campaign_id), policy, by_prompt=by_prompt, per_vote_max=per_vote_max
        )
    c = int(campaign_id)
    key_ids, key_hash, key_category, categories = _copy_keys(c)
    rules, windows = _rules_sql(policy)
    join = " JOIN ranking_logprompt p ON p.id = l.prompt_key" if policy.prompt_hash_cap is not None else ""
    source = f"SELECT l.*{windows} FROM ranking_logvote l{join} WHERE l.campaign_id = {c}"
    counts_sql = (
        f"SELECT l.vote_id, l.prompt_key::int4, l.left_id::int4, l.right_id::int4, l.outcome, ({rules})::int2 "
        f"FROM ({source}) l"
    )
    # Keys, competitors and raters are rows of small tables: int4 halves what travels (a key past 2**31 fails
    # the cast loudly). Vote ids stay int8.
    columns = _packed_columns(
        counts_sql,
        [("id", ">i8"), ("key", ">i4"), ("left", ">i4"), ("right", ">i4"), ("outcome", ">i2"), ("rules", ">i2")],
    )
    # The votes' keys as positions among the campaign's keys, and through them category and prompt code
    # (small integers: a million votes take 7 MB of them, not the 24 MB of three int64 columns).
    key = _positions(key_ids, columns.pop("key"))
    # Prompt codes by first appearance in the log (the smallest vote id of each hash), as ``vote_arrays``
    # factorises the hashes in log order: the first vote of each key, then of each hash over its keys.
    never = np.iinfo(np.int64).max
    first_of_key = np.full(key_ids.shape[0], never, dtype=np.int64)
    np.minimum.at(first_of_key, key, columns["id"])
    first = np.full(int(key_hash.max()) + 1 if key_hash.size else 0, never, dtype=np.int64)
    np.minimum.at(first, key_hash, first_of_key)
    prompt_code = np.argsort(np.argsort(first, kind="stable"), kind="stable").astype(np.int64)
    key_prompt = prompt_code[key_hash]
    counts = log_counts(
        category=_narrow(key_category)[key],
        categories=categories,
        prompt=_narrow(key_prompt)[key],
        left=columns["left"],
        right=columns["right"],
        outcome=columns["outcome"],
        rules=columns["rules"],
        vote_id=columns["id"],
        by_prompt=by_prompt,
    )
    del key
    rate = sample_rate(counts.kept, per_vote_max)
    kept_ids = columns["id"][columns["rules"] == 0]
    del columns
    if kept_ids.size and not bool(np.all(kept_ids[1:] > kept_ids[:-1])):
        kept_ids.sort()
    sample = _vote_sample(c, kept_ids, rate, key_ids, key_prompt, key_category, categories)
    return VoteLog(sample=sample, sample_rate=rate, categories=categories, by_prompt=by_prompt, **counts.__dict__)


def _vote_sample(
    campaign_id: int,
    kept_ids: NDArray[np.int64],
    rate: float,
    key_ids: NDArray[np.int64],
    key_prompt: NDArray[np.int64],
    key_category: NDArray[np.int64],
    categories: tuple[str, ...],
) -> VoteArrays:
    """The kept votes (``kept_ids``, sorted) one by one, in log order: those of the deterministic sample of
    ``rate`` (``policy.sample_mask``; all of them at rate 1). PostgreSQL picks the sample's votes by the hash
    of their id, excluded ones too (the policy was applied to the counts already); numpy keeps the kept."""
    sampled = (
        "" if rate >= 1.0 else f" AND ((vote_id & 4294967295) * 1640531527) & 4294967295 < {sample_threshold(rate)}"
    )
    style = [f"{side}_{key}" for side in ("left", "right") for key in STYLE_FEATURES]
    fields = [("id", ">i8"), ("left", ">i4"), ("right", ">i4"), ("outcome", ">i2"), ("decision_ms", ">i4")]
    fields += [("rater", ">i4"), ("key", ">i4"), ("identity", "?")] + [(name, ">i4") for name in style]
    sql = (
        "SELECT vote_id, left_id::int4, right_id::int4, outcome, decision_ms, rater_id::int4, prompt_key::int4, "
        f"identity, {', '.join(style)} FROM ranking_logvote WHERE campaign_id = {int(campaign_id)}{sampled}"
    )
    rows = _packed_columns(sql, fields)
    position = np.searchsorted(kept_ids, rows["id"])
    if kept_ids.size:
        keep = (position < kept_ids.shape[0]) & (kept_ids[np.minimum(position, kept_ids.shape[0] - 1)] == rows["id"])
    else:  # every vote excluded (or none at all)
        keep = np.zeros(rows["id"].shape[0], dtype=bool)
    order = np.argsort(rows["id"][keep], kind="stable")

    def take(name: str) -> NDArray[np.int64]:
        out: NDArray[np.int64] = rows[name][keep][order].astype(np.int64)
        return out

    key = np.searchsorted(key_ids, take("key"))
    return VoteArrays(
        vote_id=take("id"),
        left=take("left"),
        right=take("right"),
        outcome=take("outcome"),
        decision_ms=take("decision_ms"),
        rater=take("rater"),
        prompt=key_prompt[key],
        category=key_category[key],
        categories=categories,
        identity=rows["identity"][keep][order].astype(bool),
        style_left=np.column_stack([take(f"left_{k}") for k in STYLE_FEATURES]).astype(np.float64),
        style_right=np.column_stack([take(f"right_{k}") for k in STYLE_FEATURES]).astype(np.float64),
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
