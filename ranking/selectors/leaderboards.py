"""Leaderboard snapshots: the newest, one version, the history and the categories; their rows as the v1 API
and the pages show them (with the competitors' names, and the campaign's model families) and the pairwise
table counted from the log as a snapshot saw it; the intervals active sampling reads, and the campaigns a
rater voted in."""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from django.db.models import Max, QuerySet

from battles.models import Campaign, Competitor, Vote

from .. import estimators as est
from ..board_pairwise import PairwiseGrids, pairwise_expand
from ..models import JudgeBoard, LeaderboardSnapshot
from ..policy import ExclusionPolicy
from .arrays import vote_arrays


def snapshot_latest(*, campaign: Campaign, category: str = "", view: str = "raw") -> LeaderboardSnapshot | None:
    return (
        LeaderboardSnapshot.objects.filter(campaign=campaign, category=category, view=view).order_by("-version").first()
    )


def snapshot_latest_id(*, campaign: Campaign, category: str = "", view: str = "raw") -> int | None:
    """The newest snapshot's id only: the API serves the serialized snapshot from a cache keyed by it,
    so the common read never loads the (large) JSON columns."""
    snapshot_id: int | None = (
        LeaderboardSnapshot.objects.filter(campaign=campaign, category=category, view=view)
        .order_by("-version")
        .values_list("pk", flat=True)
        .first()
    )
    return snapshot_id


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


def competitor_names(*, campaign: Campaign) -> dict[int, dict[str, Any]]:
    """Every competitor of the campaign (retired ones too): model (the endpoint's name, or an external
    model's, whose answers arrive as shadow battles), version and whether it still gets battles."""
    rows = Competitor.objects.filter(campaign=campaign).values_list(
        "pk", "endpoint__name", "external_model", "version_label", "active"
    )
    return {
        pk: {"model": endpoint_name or external, "version": version, "active": active}
        for pk, endpoint_name, external, version, active in rows
    }


SELECTION_NOTE = "the best of several variants of one family is favoured by selection"


def family_disclosure(*, campaign: Campaign) -> dict[str, Any]:
    """How many variants of each model family the campaign tested (retired ones included; not the gold
    pseudo-competitors), shown next to every board: the top score of a family that entered several
    variants is the best of several draws, favoured by selection. A competitor with no family counts as
    its own model name. ``notice`` is the sentence the pages show ("" when every family has one variant)."""
    groups: dict[str, list[Competitor]] = {}
    for competitor in Competitor.objects.filter(campaign=campaign, gold=False).select_related("endpoint"):
        groups.setdefault(competitor.family_name, []).append(competitor)
    families: list[dict[str, Any]] = [
        {
            "family": name,
            "variants": len(members),
            "retired": sum(1 for m in members if not m.active),
            "competitors": [m.pk for m in members],
        }
        for name, members in sorted(groups.items(), key=lambda item: (-len(item[1]), item[0]))
    ]
    several = [f for f in families if f["variants"] > 1]
    parts = [
        f"{f['variants']} variants of {f['family']} were tested here"
        + (f" ({f['retired']} retired)" if f["retired"] else "")
        for f in several
    ]
    notice = ("; ".join(parts) + f"; {SELECTION_NOTE}.") if parts else ""
    return {"families": families, "notice": notice[:1].upper() + notice[1:]}


def snapshot_rows(
    *, snapshot: LeaderboardSnapshot | JudgeBoard, names: dict[int, dict[str, Any]]
) -> list[dict[str, Any]]:
    """The snapshot's rows in its order, each with the competitor's model, version and ``retired`` flag
    and its losses (votes less wins, ties and both-bad); competitors of the campaign the snapshot
    does not know (added after it) follow as hidden rows without votes. Scores and bounds of hidden
    rows are null; an open interval side is null with ``*_open`` true."""
    out = []
    seen = set()
    for row in snapshot.rows:
        cid = int(row["competitor_id"])
        seen.add(cid)
        name = names.get(cid, {"model": "", "version": "", "active": False})
        out.append(
            {
                "competitor_id": cid,
                "label": row.get("label", ""),
                "model": name["model"],
                "version": name["version"],
                "retired": not name["active"],
                "hidden": bool(row.get("hidden", True)),
                "component": int(row.get("component", -1)),
                "score": row.get("score"),
                "lower": row.get("lower"),
                "upper": row.get("upper"),
                "lower_open": bool(row.get("lower_open", False)),
                "upper_open": bool(row.get("upper_open", False)),
                "interval_method": row.get("interval_method"),
                "rank_best": row.get("rank_best"),
                "rank_worst": row.get("rank_worst"),
                "rank_simultaneous": row.get("rank_simultaneous"),
                "votes": int(row["votes"]),
                "counted": int(row.get("counted", row["votes"])),
                "wins": int(row["wins"]),
                "ties": int(row["ties"]),
                "both_bad": int(row["both_bad"]),
                "losses": int(row["votes"]) - int(row["wins"]) - int(row["ties"]) - int(row["both_bad"]),
                "win_rate": row.get("win_rate"),
                "tie_rate": row.get("tie_rate"),
                "both_bad_rate": row.get("both_bad_rate"),
            }
        )
    for cid, name in sorted(names.items()):
        if cid in seen:
            continue
        out.append(
            {
                "competitor_id": cid,
                "label": f"{name['model']} {name['version']}",
                "model": name["model"],
                "version": name["version"],
                "retired": not name["active"],
                "hidden": True,
                "component": -1,
                "score": None,
                "lower": None,
                "upper": None,
                "lower_open": False,
                "upper_open": False,
                "interval_method": None,
                "rank_best": None,
                "rank_worst": None,
                "rank_simultaneous": None,
                "votes": 0,
                "counted": 0,
                "wins": 0,
                "ties": 0,
                "both_bad": 0,
                "losses": 0,
                "win_rate": None,
                "tie_rate": None,
                "both_bad_rate": None,
            }
        )
    return out


def snapshot_pairwise_grids(*, snapshot: LeaderboardSnapshot) -> PairwiseGrids | None:
    """The snapshot's per-pair grids over its shown competitors (the order of ``pairwise.competitor_ids``):
    from the compact column, or from the JSON of a snapshot stored before it; None when it has none."""
    if snapshot.pairwise_arrays:
        return PairwiseGrids.decode(bytes(snapshot.pairwise_arrays))
    return PairwiseGrids.from_json(snapshot.pairwise or {})


def snapshot_pairwise_stored(*, snapshot: LeaderboardSnapshot) -> dict[str, Any]:
    """The snapshot's pairwise section in the JSON shape of the download and of the API's
    ``include=pairwise``: the grids as k x k lists and the anytime-valid ``cells``, however it is stored."""
    return pairwise_expand(snapshot.pairwise or {}, bytes(snapshot.pairwise_arrays))


def _none_if_nan(value: float, digits: int = 4) -> float | None:
    return None if not np.isfinite(value) else round(float(value), digits)


def snapshot_pairwise(*, snapshot: LeaderboardSnapshot) -> dict[str, Any]:
    """Every pair that met in the votes the snapshot was computed from: battles, wins, ties, both-bad,
    losses, win rate with its Wilson interval and the exact binomial p (unadjusted; Holm-adjusted
    where the snapshot shows both competitors).

    The snapshot stores rates for its shown competitors only, not the counts, so the counts are
    recomputed from the vote log *as the snapshot saw it*: votes up to its ``last_vote_id``, under
    the exclusion policy it recorded (not today's), in its category. So the numbers match the
    snapshot even after new votes or a newly flagged rater."""
    votes = vote_arrays(campaign_id=snapshot.campaign_id)
    votes = votes.subset(votes.vote_id <= snapshot.last_vote_id)
    policy_data = dict(snapshot.policy)
    policy_data["flagged_raters"] = tuple(policy_data.get("flagged_raters", ()))
    policy_data["flag_ids"] = tuple(policy_data.get("flag_ids", ()))
    policy = ExclusionPolicy(**policy_data)
    keep, _ = policy.apply(votes)
    kept = votes.subset(keep)
    if snapshot.category:
        code = kept.categories.index(snapshot.category) if snapshot.category in kept.categories else -1
        kept = kept.subset(kept.category == code)
    competitor_ids = np.array(
        sorted(Competitor.objects.filter(campaign_id=snapshot.campaign_id, gold=False).values_list("pk", flat=True)),
        dtype=np.int64,
    )
    method = snapshot.method
    both_bad: Literal["tie", "drop"] = "drop" if method.get("both_bad") == "drop" else "tie"
    confidence = float(method.get("confidence", 0.95))
    stored = snapshot.pairwise or {}
    holm_ids = stored.get("competitor_ids", [])
    holm_at = {cid: k for k, cid in enumerate(holm_ids)}
    grids = snapshot_pairwise_grids(snapshot=snapshot)
    holm = grids.p_holm if grids is not None else None
    pairs: list[dict[str, Any]] = []
    if len(kept) and competitor_ids.shape[0] >= 2:
        a = np.searchsorted(competitor_ids, kept.left)
        b = np.searchsorted(competitor_ids, kept.right)
        cells = est.aggregate_cells(a, b, kept.outcome, n_competitors=int(competitor_ids.shape[0]))
        table = est.pairwise_table(cells, both_bad=both_bad, confidence=confidence)
        rows, cols = np.nonzero(table.battles > 0)
        for i, j in zip(rows.tolist(), cols.tolist(), strict=True):
            if i == j:
                continue
            ci, cj = int(competitor_ids[i]), int(competitor_ids[j])
            p_holm = None
            if holm is not None and ci in holm_at and cj in holm_at:
                p_holm = _none_if_nan(holm[holm_at[ci], holm_at[cj]])
            pairs.append(
                {
                    "competitor_id": ci,
                    "opponent_id": cj,
                    "battles": int(table.battles[i, j]),
                    "wins": int(table.wins[i, j]),
                    "ties": int(table.ties[i, j]),
                    "both_bad": int(table.both_bad[i, j]),
                    "losses": int(table.wins[j, i]),
                    "win_rate": _none_if_nan(table.win_rate[i, j]),
                    "wilson_lower": _none_if_nan(table.wilson_lower[i, j]),
                    "wilson_upper": _none_if_nan(table.wilson_upper[i, j]),
                    "p_value": _none_if_nan(table.p_value[i, j], 6),
                    "p_holm": p_holm,
                }
            )
    return {
        "confidence": confidence,
        "both_bad": both_bad,
        "votes_used": len(kept),
        "pairs": pairs,
        "intransitive_triads": stored.get("intransitive_triads"),
        "correction": stored.get("correction", ""),
    }
