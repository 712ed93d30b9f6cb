"""Pure numpy/scipy estimators behind the Arena leaderboard (no Django imports here).

See DESIGN.md section 5. Battles come in as arrays ``(a, b, outcome, weight, ...)`` with the
outcome codes below; ``aggregate_cells`` reduces them once and every Bradley-Terry estimator works
on the cells.
"""

from .aggregate import (
    BOTH_BAD,
    LEFT_WINS,
    RIGHT_WINS,
    TIE,
    Battles,
    Cells,
    aggregate_battles,
    aggregate_cells,
    validate_battles,
)
from .bradley_terry import BASE, SCALE, BTResult, fit_bradley_terry, normalise
from .intervals import (
    Intervals,
    bootstrap_intervals,
    bt_covariance,
    cluster_bootstrap_intervals,
    sandwich_intervals,
)
from .ranks import RankRanges, rank_ranges, shown_mask

__all__ = [
    "BASE",
    "BOTH_BAD",
    "LEFT_WINS",
    "RIGHT_WINS",
    "SCALE",
    "TIE",
    "BTResult",
    "Battles",
    "Cells",
    "Intervals",
    "RankRanges",
    "aggregate_battles",
    "aggregate_cells",
    "bootstrap_intervals",
    "bt_covariance",
    "cluster_bootstrap_intervals",
    "fit_bradley_terry",
    "normalise",
    "rank_ranges",
    "sandwich_intervals",
    "shown_mask",
    "validate_battles",
]
