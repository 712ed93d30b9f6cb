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
from .elo import EloResult, online_elo
from .intervals import (
    Intervals,
    bootstrap_intervals,
    bt_covariance,
    cluster_bootstrap_intervals,
    sandwich_intervals,
)
from .pairwise import (
    PairwiseTable,
    battles_for_margin,
    battles_for_power,
    binomial_test,
    binomial_test_p,
    count_3cycles,
    cyclic_groups,
    has_cycle,
    majority_graph,
    pairwise_table,
    wilson_interval,
)
from .ranks import RankRanges, rank_ranges, shown_mask
from .style import (
    STYLE_FEATURES,
    StyleDesign,
    StyleFeatures,
    StyleIntervals,
    StyleResult,
    fit_style,
    style_bootstrap_intervals,
    style_covariance,
    style_design,
    style_differences,
    style_sandwich_intervals,
)

__all__ = [
    "BASE",
    "BOTH_BAD",
    "LEFT_WINS",
    "RIGHT_WINS",
    "SCALE",
    "STYLE_FEATURES",
    "TIE",
    "BTResult",
    "Battles",
    "Cells",
    "EloResult",
    "PairwiseTable",
    "Intervals",
    "RankRanges",
    "StyleDesign",
    "StyleFeatures",
    "StyleIntervals",
    "StyleResult",
    "aggregate_battles",
    "aggregate_cells",
    "bootstrap_intervals",
    "battles_for_margin",
    "battles_for_power",
    "binomial_test",
    "binomial_test_p",
    "bt_covariance",
    "cluster_bootstrap_intervals",
    "count_3cycles",
    "cyclic_groups",
    "fit_bradley_terry",
    "fit_style",
    "has_cycle",
    "majority_graph",
    "normalise",
    "online_elo",
    "pairwise_table",
    "rank_ranges",
    "sandwich_intervals",
    "shown_mask",
    "style_bootstrap_intervals",
    "style_covariance",
    "style_design",
    "style_differences",
    "style_sandwich_intervals",
    "validate_battles",
    "wilson_interval",
]
