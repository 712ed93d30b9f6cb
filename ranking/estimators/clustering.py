"""Which interval a board gets when votes come in clusters: the campaign's "auto" setting.

Votes on one prompt are correlated: an easy prompt gives many ties, a coding prompt favours the coders,
and the k copies of a shared item (one answer pair judged by k raters) share their answers outright.
The plain bootstrap resamples votes as if they were independent and then covers 0.55-0.89 of the time
instead of 0.95; resampling prompts (``cluster_bootstrap_intervals``) covers 0.94-0.96
(``benchmarks/board_intervals.py``). A shared item's copies have one prompt, so clustering by prompt
covers both designs.

**The rule.** With ``m_c`` the votes on prompt ``c`` and ``N`` the board's votes, the size-weighted
mean cluster size ``D = sum(m_c^2) / N`` is 1 when no prompt repeats and k when every prompt has k
votes; the variance of a mean is inflated by ``1 + (D - 1) rho`` for a within-prompt correlation
``rho`` (Kish's design effect), so ``D`` bounds how much clustering can matter. "auto" picks the cluster
bootstrap when ``D >= AUTO_MIN_DESIGN_EFFECT`` and there are at least ``AUTO_MIN_CLUSTERS`` prompts
to resample; below that many prompts it keeps the plain interval and says loudly that it may be too
narrow. An explicit plain setting on clustered votes gets the same warning.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["AUTO_MIN_CLUSTERS", "AUTO_MIN_DESIGN_EFFECT", "IntervalChoice", "choose_interval", "design_effect"]

AUTO_MIN_DESIGN_EFFECT = 1.1
AUTO_MIN_CLUSTERS = 10
CLUSTERED = "cluster_bootstrap"


@dataclass(frozen=True)
class IntervalChoice:
    """The campaign's ``setting``, the interval ``chosen`` for this board, why, and the figures behind it;
    ``warning`` is set when the chosen interval treats clustered votes as independent."""

    setting: str
    chosen: str
    reason: str
    warning: str | None
    design_effect: float
    clusters: int
    votes: int

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "design_effect": round(self.design_effect, 4)}


def design_effect(cluster: NDArray[np.int64], count: NDArray[np.int64] | None = None) -> tuple[float, int]:
    """``D = sum(m_c^2) / N`` over the clusters (prompts) of the votes, and the number of clusters;
    ``(1.0, 0)`` without votes. ``count``: how many votes each entry stands for (grouped rows)."""
    cluster = np.asarray(cluster, dtype=np.int64)
    votes = None
    if count is not None:
        keep = np.asarray(count) > 0
        cluster, votes = cluster[keep], np.asarray(count, dtype=np.float64)[keep]
    if cluster.size == 0:
        return 1.0, 0
    low, high = int(cluster.min()), int(cluster.max())
    if low >= 0 and high < 4 * cluster.size + 1024:
        # Prompt ids of about the votes' number: counting them is linear, where np.unique sorts the votes.
        sizes = np.bincount(cluster, votes)
        sizes = sizes[sizes > 0]
    elif votes is None:
        _, sizes = np.unique(cluster, return_counts=True)
    else:
        _, inverse = np.unique(cluster, return_inverse=True)
        sizes = np.bincount(inverse, votes)
    sizes = sizes.astype(np.float64)
    return float((sizes * sizes).sum() / sizes.sum()), int(sizes.shape[0])


def choose_interval(
    setting: str, cluster: NDArray[np.int64], *, plain: str, count: NDArray[np.int64] | None = None
) -> IntervalChoice:
    """The interval for a board whose votes fall on the prompts ``cluster``: ``setting`` itself unless it is
    "auto", which becomes the cluster bootstrap when prompts repeat enough (the module's rule) and
    ``plain`` (the view's interval for independent votes) otherwise. ``count``: each entry's number of
    votes, when the votes come grouped."""
    d, clusters = design_effect(cluster, count)
    votes = int(np.asarray(cluster).size) if count is None else int(np.asarray(count).sum())
    figures = f"D = sum of squared votes per prompt / votes = {d:.2f} over {clusters} prompts"
    repeat = d >= AUTO_MIN_DESIGN_EFFECT
    enough = clusters >= AUTO_MIN_CLUSTERS
    too_narrow = (
        f"prompts repeat ({figures}) and votes on one prompt are correlated, so the {{interval}} interval, which "
        "treats votes as independent, may be too narrow"
    )
    if setting != "auto":
        warning = None
        if repeat and setting != CLUSTERED:
            warning = too_narrow.format(interval=setting) + (
                "; 'auto' or 'cluster_bootstrap' resamples prompts" if enough else ""
            )
        return IntervalChoice(setting, setting, "set by the campaign", warning, d, clusters, votes)
    if repeat and enough:
        reason = (
            f"auto: prompts repeat ({figures}, at least {AUTO_MIN_DESIGN_EFFECT:g} with at least "
            f"{AUTO_MIN_CLUSTERS} prompts), so prompts are resampled, not votes"
        )
        return IntervalChoice(setting, CLUSTERED, reason, None, d, clusters, votes)
    if repeat:
        reason = f"auto: prompts repeat but fewer than {AUTO_MIN_CLUSTERS} prompts are too few to resample"
        warning = too_narrow.format(interval=plain)
        return IntervalChoice(setting, plain, reason, warning, d, clusters, votes)
    reason = (
        f"auto: prompts barely repeat ({figures}, under {AUTO_MIN_DESIGN_EFFECT:g}), so votes are treated as "
        "independent"
    )
    return IntervalChoice(setting, plain, reason, None, d, clusters, votes)
