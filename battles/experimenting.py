"""Sticky A/B assignment, pure Python (no Django): a unit's variant is a function of the experiment's
key and the unit's id only, so it needs no storage, is the same on every server and every call, and
changes for a unit only when the variants or their weights change.

sha256(key, unit id) → its first 8 bytes as an integer / 2**64, a position uniform in [0, 1) → the
variant whose slice of [0, 1) holds it, the slices laid out by cumulative weight in the variants'
stable order (their creation order).

A staged rollout (``rollout_index``) raises one variant's share without moving anyone out of it and
without moving anyone between the other variants: each other variant gives up the same tail fraction of
its own slice to the promoted one, so as the share grows (5% -> 25% -> 50% -> 100%) the promoted
variant's units are nested, and a unit's variant changes at most once, into the promoted one."""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Sequence
from itertools import accumulate

__all__ = ["rollout_index", "unit_position", "variant_index"]


def unit_position(key: str, unit_id: str) -> float:
    """Where the unit falls in [0, 1) for this experiment (a NUL separates the two, so ("ab", "c") and
    ("a", "bc") differ)."""
    digest = hashlib.sha256(f"{key}\x00{unit_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def variant_index(position: float, weights: Sequence[float]) -> int:
    """The index of the weight whose slice holds ``position``: slices of width weight / total, in the
    given order. ``weights`` must be positive and not empty."""
    if not weights or any(not w > 0 for w in weights):
        raise ValueError("weights must be positive and not empty")
    bounds = list(accumulate(weights))
    index = bisect.bisect_right(bounds, position * bounds[-1])
    return min(index, len(weights) - 1)  # position < 1, but floating sums may round the last bound down


def rollout_index(position: float, weights: Sequence[float], promoted: int, share: float) -> int:
    """The variant under a staged rollout of ``weights[promoted]`` to ``share`` of the units: the weights'
    assignment (``variant_index``), except that a unit of another variant whose place inside that variant's
    slice is in the slice's last ``1 - (1 - share) / (1 - base)`` goes to the promoted variant (``base``:
    its share by weight). A share at or below ``base`` leaves the weights' assignment as it is: a rollout
    never takes units from the variant it promotes."""
    if not 0 <= promoted < len(weights):
        raise ValueError("promoted must index weights")
    if not 0.0 < share <= 1.0:
        raise ValueError("share must be in (0, 1]")
    index = variant_index(position, weights)
    total = float(sum(weights))
    base = weights[promoted] / total
    if index == promoted or share <= base:
        return index
    keep = (1.0 - share) / (1.0 - base)
    start = float(sum(weights[:index]))
    within = (position * total - start) / weights[index]
    return promoted if within >= keep else index
