"""The public index of published boards: every board an organisation published *and listed*, of any
organisation, with content hashes of its entities and attributes so that an outsider can tell a board did
not change silently. An unlisted publication (reachable only by its address) never appears, and neither
does an unpublished board: the index reads only rows whose publication exists and is listed."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Any

from django.core.cache import cache
from django.urls import reverse

from raters.tenancy import organization_scope, scopes_disabled

from ..models import AttributeBoard, BoardPublication
from .attribute_boards import attribute_board_latest_run
from .leaderboards import competitor_names, snapshot_categories, snapshot_history, snapshot_rows

# Newest publications first; past this many the index says it is truncated.
INDEX_MAX = 500

HASH_METHOD = (
    "sha256, hex, of the UTF-8 bytes of the canonical JSON of the value (keys sorted, no spaces: separators ',' "
    "and ':', non-ASCII characters kept as they are)"
)
LEADERBOARD_ENTITIES = (
    "the public board's rows (overall, raw) as [{competitor_id, model, version}], sorted by competitor_id"
)
# The method's fields the public board's JSON shows (its snapshot.method), so that an outsider can recompute.
METHOD_KEYS = (
    "estimator",
    "interval",
    "confidence",
    "confidence_pct",
    "rounds",
    "seed",
    "both_bad",
    "ties",
    "anchor",
    "min_votes",
)
LEADERBOARD_ATTRIBUTES = (
    "{campaign, categories, method}: the campaign's name, its categories (as the public board lists them) and the "
    f"overall raw board's method fields {', '.join(METHOD_KEYS)} (absent ones null)"
)
ATTRIBUTE_ENTITIES = "the board's entities as [{position, label, text}], sorted by position"
ATTRIBUTE_ATTRIBUTES = "{name, attribute, top_k}: the board's name, its attribute in words and its top k"


def canonical_json(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str).encode()


def content_hash(value: Any) -> str:
    """``HASH_METHOD`` of ``value``."""
    return hashlib.sha256(canonical_json(value)).hexdigest()


def leaderboard_hash_inputs(publication: BoardPublication) -> tuple[list[dict[str, Any]], dict[str, Any], int | None]:
    """What a published leaderboard's hashes are computed from (entities, attributes) and the version read.
    Call inside the publication's organisation's scope."""
    campaign = publication.campaign
    snapshot = snapshot_history(campaign=campaign).defer("pairwise", "pairwise_arrays").first()
    entities: list[dict[str, Any]] = []
    method: dict[str, Any] = {}
    if snapshot is not None:
        rows = snapshot_rows(snapshot=snapshot, names=competitor_names(campaign=campaign))
        entities = sorted(
            ({"competitor_id": int(r["competitor_id"]), "model": r["model"], "version": r["version"]} for r in rows),
            key=lambda e: e["competitor_id"],
        )
        method = {key: snapshot.method.get(key) for key in METHOD_KEYS}
    attributes = {"campaign": campaign.name, "categories": snapshot_categories(campaign=campaign), "method": method}
    return entities, attributes, None if snapshot is None else snapshot.version


def attribute_hash_inputs(board: AttributeBoard) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    entities = [
        {"position": e.position, "label": e.label, "text": e.text}
        for e in board.entities.order_by("position").only("position", "label", "text")
    ]
    return entities, {"name": board.name, "attribute": board.attribute, "top_k": board.top_k}


def _entry(
    *,
    kind: str,
    name: str,
    organization: str,
    published_at: datetime | None,
    url: str,
    api_url: str,
    version: int | None,
    entities: list[dict[str, Any]],
    attributes: dict[str, Any],
    recipe: tuple[str, str],
) -> dict[str, Any]:
    return {
        "kind": kind,
        "name": name,
        "organization": organization,
        "published_at": published_at,
        "url": url,
        "api_url": api_url,
        "version": version,
        "entities": len(entities),
        "entities_hash": content_hash(entities),
        "attributes_hash": content_hash(attributes),
        "hashed": {"entities": recipe[0], "attributes": recipe[1], "method": HASH_METHOD},
    }


def public_board_index() -> dict[str, Any]:
    """Every listed published board, newest first (up to ``INDEX_MAX`` of each kind). The one read across
    organisations is of the listed publications themselves; each board's content is read in its own scope."""
    with scopes_disabled():
        publications = list(
            BoardPublication.objects.filter(listed=True)
            .select_related("campaign", "organization")
            .order_by("-published_at", "-pk")[: INDEX_MAX + 1]
        )
        boards = list(
            AttributeBoard.objects.filter(public_slug__isnull=False, public_listed=True)
            .select_related("organization")
            .order_by("-published_at", "-pk")[: INDEX_MAX + 1]
        )
    out = []
    for publication in publications[:INDEX_MAX]:
        with organization_scope(publication.organization_id):
            entities, attributes, version = leaderboard_hash_inputs(publication)
        out.append(
            _entry(
                kind="leaderboard",
                name=publication.campaign.name,
                organization=publication.organization.name,
                published_at=publication.published_at,
                url=reverse("ranking:board-public", args=[publication.slug]),
                api_url=reverse("api-public-board", args=[publication.slug]),
                version=version,
                entities=entities,
                attributes=attributes,
                recipe=(LEADERBOARD_ENTITIES, LEADERBOARD_ATTRIBUTES),
            )
        )
    for board in boards[:INDEX_MAX]:
        assert board.public_slug is not None
        with organization_scope(board.organization_id):
            entities, attributes = attribute_hash_inputs(board)
            run = attribute_board_latest_run(board)
        out.append(
            _entry(
                kind="attribute",
                name=board.name,
                organization=board.organization.name,
                published_at=board.published_at,
                url=reverse("ranking:attribute-board-public", args=[board.public_slug]),
                api_url=reverse("api-public-attribute-board", args=[board.public_slug]),
                version=None if run is None else run.pk,
                entities=entities,
                attributes=attributes,
                recipe=(ATTRIBUTE_ENTITIES, ATTRIBUTE_ATTRIBUTES),
            )
        )
    out.sort(key=lambda e: (e["published_at"] is not None, e["published_at"]), reverse=True)
    return {
        "boards": out,
        "truncated": len(publications) > INDEX_MAX or len(boards) > INDEX_MAX,
        "hash_method": HASH_METHOD,
    }


# How old the index may be: each entry's version and hashes follow the board's recomputes within this long.
INDEX_CACHE_S = 30


def public_board_index_cached() -> dict[str, Any]:
    """``public_board_index``, read from the shared cache when the set of listed boards is the same as when it
    was built and it is at most ``INDEX_CACHE_S`` old: the index is public and unthrottled, and building it
    reads every listed board. Keyed by the listed boards' ids and addresses (two small queries), so a board
    listed, unlisted or withdrawn changes the key at once: nothing unlisted is ever served from the cache."""
    with scopes_disabled():
        listed = (
            list(BoardPublication.objects.filter(listed=True).order_by("pk").values_list("pk", "slug")),
            list(
                AttributeBoard.objects.filter(public_slug__isnull=False, public_listed=True)
                .order_by("pk")
                .values_list("pk", "public_slug")
            ),
        )
    key = "ranking:public-board-index:" + content_hash(listed)
    found = cache.get(key)
    if found is None:
        found = public_board_index()
        cache.set(key, found, INDEX_CACHE_S)
    return found  # type: ignore[no-any-return]
