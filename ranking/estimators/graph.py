"""Graph routines shared by every fit: the weighted Laplacian, connected components, and the
boundedness analysis of the *win digraph* that tells which score sides the data can bound.

Why the win digraph. Draw an edge ``u -> v`` when ``u`` took a positive share of a win against
``v`` (a win, or a tie, which counts half each way). The Bradley-Terry likelihood (prior-free) has a
finite maximum exactly when this digraph is strongly connected (Zermelo, Ford 1957). Otherwise the
likelihood keeps rising along any direction ``d`` that is constant on each strongly connected
component (SCC) and never lower on the winner's side of an edge: such a score side is *not bounded
by the data*, and an interval that reports a finite number there is made up.

For a published level ``theta_i - mean_{centre}(theta)`` the upper side is unbounded exactly when
some competitor of the centre does not (transitively) beat ``i``; the lower side when ``i`` does not
(transitively) beat every centre member. The centre is the largest SCC of the component when it holds
a strict majority of it (then one newcomer that lost every vote cannot unbound the established
competitors' scores through the centring), else the whole component.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray
from scipy.sparse.csgraph import breadth_first_order, connected_components


def laplacian(n: int, lo: NDArray[np.int64], hi: NDArray[np.int64], w: NDArray[np.float64]) -> NDArray[np.float64]:
    """Dense weighted graph Laplacian of the edges ``(lo, hi)`` with weights ``w`` (one per edge;
    pairs are unique). The negative Hessian of every Bradley-Terry likelihood here has this form."""
    lap = np.zeros((n, n))
    lap[lo, hi] = -w
    lap[hi, lo] = -w
    lap[np.diag_indices(n)] = np.bincount(lo, w, minlength=n) + np.bincount(hi, w, minlength=n)
    return lap


def components(
    n: int, lo: NDArray[np.int64], hi: NDArray[np.int64], edge_weight: NDArray[np.float64]
) -> tuple[int, NDArray[np.int64]]:
    """Connected components of the comparison graph (edges with positive weight)."""
    keep = edge_weight > 0
    graph = sp.csr_matrix((np.ones(int(keep.sum())), (lo[keep], hi[keep])), shape=(n, n))
    k, labels = connected_components(graph, directed=False)
    return int(k), labels.astype(np.int64)


@dataclass(frozen=True)
class Boundedness:
    """Which score sides the votes bound (see the module docstring).

    ``centre`` marks the competitors whose mean defines 1000 in each component (or the reference);
    ``open_upper``/``open_lower``: the data cannot bound that side of the published level;
    ``scc`` the strongly connected component of each competitor in the win digraph;
    ``reach`` (only for small boards) ``reach[u, v]``: ``u`` beats ``v`` transitively (reflexive).
    ``one_class``: every vote of the competitor had the same outcome from its side (all won, all
    lost or all tied): no resampling can move its record, so bootstrap and sandwich are blind to it.
    ``thin``: fewer than ``THIN_BELOW`` wins or losses (ties half).
    """

    centre: NDArray[np.bool_]
    open_upper: NDArray[np.bool_]
    open_lower: NDArray[np.bool_]
    scc: NDArray[np.int64]
    one_class: NDArray[np.bool_]
    win_graph: sp.csr_matrix
    thin: NDArray[np.bool_]

    @property
    def needs_profile(self) -> NDArray[np.bool_]:
        """Competitors whose interval the bootstrap or sandwich cannot be trusted alone for."""
        return self.open_upper | self.open_lower | self.one_class | self.thin

    def beats(self, sources: NDArray[np.int64]) -> NDArray[np.bool_]:
        """``out[k, v]``: ``sources[k]`` beats ``v`` transitively (reflexive); one BFS per source."""
        n = self.scc.shape[0]
        out = np.zeros((sources.shape[0], n), dtype=bool)
        for k, s in enumerate(sources):
            out[k, breadth_first_order(self.win_graph, int(s), directed=True, return_predecessors=False)] = True
        return out

    def difference_open(self, idx: NDArray[np.int64]) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
        """For the competitors ``idx``: ``upper[a, b]`` is True when the data cannot bound
        ``theta_a - theta_b`` from above (``b`` never transitively beat ``a``); ``lower = upper.T``."""
        reach = self.beats(idx)[:, idx]
        upper = ~reach.T
        np.fill_diagonal(upper, False)
        return upper, upper.T.copy()


# A competitor with fewer (weighted) wins or losses than this, ties counting half, is *thin* on that
# side: its likelihood is far from quadratic there, so it gets the profile interval too, and it does
# not define the centre (its first win must not move every established competitor's score).
THIN_BELOW = 5.0


def _reach(graph: sp.csr_matrix, starts: NDArray[np.int64]) -> NDArray[np.bool_]:
    """Competitors reachable from every one of ``starts`` (one BFS each)."""
    out = np.ones(graph.shape[0], dtype=bool)
    for s in starts:
        seen = np.zeros(graph.shape[0], dtype=bool)
        seen[breadth_first_order(graph, int(s), directed=True, return_predecessors=False)] = True
        out &= seen
    return out


def boundedness(
    n: int,
    lo: NDArray[np.int64],
    hi: NDArray[np.int64],
    w_lo: NDArray[np.float64],
    w_hi: NDArray[np.float64],
    comp: NDArray[np.int64],
    one_class: NDArray[np.bool_],
    reference: int | None = None,
) -> Boundedness:
    """Analyse the win digraph of per-pair win shares ``w_lo`` (lo's, ties half) and ``w_hi``;
    ``one_class`` is passed through (it needs the outcome classes, which the shares have merged).

    Centre of a component: the reference if given; else the members of the largest SCC when it holds
    a strict majority (else all members), leaving out thin members unless that leaves none.
    """
    src = np.concatenate([lo[w_lo > 0], hi[w_hi > 0]])
    dst = np.concatenate([hi[w_lo > 0], lo[w_hi > 0]])
    graph = sp.csr_matrix((np.ones(src.shape[0]), (src, dst)), shape=(n, n))
    graph_t = graph.T.tocsr()
    _, scc = connected_components(graph, directed=True, connection="strong")
    scc = scc.astype(np.int64)
    won = np.bincount(lo, w_lo, minlength=n) + np.bincount(hi, w_hi, minlength=n)
    lost = np.bincount(lo, w_hi, minlength=n) + np.bincount(hi, w_lo, minlength=n)
    thin = (won < THIN_BELOW) | (lost < THIN_BELOW)
    centre = np.zeros(n, dtype=bool)
    open_upper = np.zeros(n, dtype=bool)
    open_lower = np.zeros(n, dtype=bool)
    for c in np.unique(comp):
        members = np.flatnonzero(comp == c)
        if reference is not None and comp[reference] == c:
            core = np.array([reference])
        else:
            labels, sizes = np.unique(scc[members], return_counts=True)
            core = members[scc[members] == labels[np.argmax(sizes)]] if sizes.max() * 2 > members.shape[0] else members
            if (~thin[core]).sum() >= 2:
                # At least two: a centre of one would pin that competitor at 1000 with a zero-width
                # interval, an anchor nobody declared.
                core = core[~thin[core]]
        centre[core] = True
        if np.unique(scc[members]).shape[0] == 1:
            continue  # strongly connected: every difference is bounded
        # One representative of each SCC the centre touches: the level of i is bounded above iff
        # every centre member beats i transitively, below iff i beats every centre member.
        _, first = np.unique(scc[core], return_index=True)
        reps = core[first]
        open_upper[members] = ~_reach(graph, reps)[members]
        open_lower[members] = ~_reach(graph_t, reps)[members]
    return Boundedness(centre, open_upper, open_lower, scc, one_class, graph, thin)
