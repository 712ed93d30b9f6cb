"""Board analyses on a public-like set of pairwise judgements (``benchmarks/public_pairs.py``), one function
per analysis; ``main`` runs them in turn.

    python benchmarks/board_audit.py [--scale]

Robustness (issue 24.1, ``robustness``): the overall raw board of the judgements, audited as a recompute
audits it (``ranking.board_robustness.robustness_block``): the fewest votes whose removal changes rank 1,
the top 3 and the top 5, verified by exact refits, and whether the board's leader is the true one (the
data are a simulation with a known truth). Its cost is printed against one Bradley-Terry fit of the same
board, measured in the same run: goal at most 200 fits (the audit's refits are warm-started and bounded:
``robustness_audit``'s docstring). ``--scale`` adds the cost at the size of a large campaign: 300
competitors, 1,000,000 votes (goal: under 10 s on a quiet 2-core machine).

Validation (issue 24.2, ``validation``): the same judgements split in time order, each candidate model (tie
treatment x prior) fitted on the first 80% and scored on the last 20% (``benchmarks/board_validation.py``).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.board_validation import validate_arrays  # noqa: E402
from benchmarks.public_pairs import PublicPairs, load_public_pairs  # noqa: E402
from ranking.board_robustness import robustness_block  # noqa: E402
from ranking.compute import Method  # noqa: E402
from ranking.estimators import LEFT_WINS, RIGHT_WINS, TIE, aggregate_cells, fit_bradley_terry  # noqa: E402
from ranking.policy import VoteArrays  # noqa: E402

FIT_RATIO_GOAL = 200.0
SCALE_GOAL_S = 10.0


def vote_arrays(a: NDArray[np.int64], b: NDArray[np.int64], outcome: NDArray[np.int64]) -> VoteArrays:
    """Votes one by one, ids 1..m in order, competitor primary keys 1..n (codes + 1)."""
    m = a.shape[0]
    zero = np.zeros(m, dtype=np.int64)
    return VoteArrays(
        vote_id=np.arange(1, m + 1, dtype=np.int64),
        left=a + 1,
        right=b + 1,
        outcome=outcome,
        decision_ms=zero + 5000,
        rater=zero,
        prompt=np.arange(m, dtype=np.int64),
        category=zero,
        categories=("",),
        identity=np.zeros(m, dtype=bool),
        style_left=np.zeros((m, 0)),
        style_right=np.zeros((m, 0)),
    )


def _timed_audit(
    a: NDArray[np.int64], b: NDArray[np.int64], outcome: NDArray[np.int64], labels: dict[int, str]
) -> tuple[dict[str, Any], float, float]:
    """The block, its seconds, and the seconds of one Bradley-Terry fit of the same board (the baseline)."""
    n = len(labels)
    votes = vote_arrays(a, b, outcome)
    ids = np.arange(1, n + 1, dtype=np.int64)
    t0 = time.perf_counter()
    fit_bradley_terry(aggregate_cells(a, b, outcome, n_competitors=n))
    fit_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    block = robustness_block(votes, votes, ids, labels, Method(min_votes=30))
    return block, time.perf_counter() - t0, fit_s


def audit_robustness(pairs: PublicPairs) -> None:
    """Print the robustness audit of the overall raw board of ``pairs``."""
    labels = {k + 1: name for k, name in enumerate(pairs.names)}
    block, audit_s, fit_s = _timed_audit(pairs.a, pairs.b, pairs.outcome, labels)
    print(f"Robustness audit: {pairs.votes:,} votes, {len(pairs.names)} competitors ({pairs.source})")
    leader = block["leader"]
    if pairs.true_scores is not None and leader is not None:
        true_first = pairs.names[int(np.argmax(pairs.true_scores))]
        print(f"  board's rank 1: {leader['label']} (true rank 1: {true_first})")
    if block["reason"]:
        print(f"  not audited: {block['reason']}")
    for t in block["targets"]:
        if t["status"] == "flips":
            after = ", ".join(x["label"] for x in t["entering"])
            print(
                f"  {t['target']}: {t['votes']} votes ({t['share_pct']}%) change it ({after} in); first-order estimate "
                f"{t['approximate']}; verified by refit: {t['verified']}; no removal one smaller does: {t['minimal']}; "
                f"{t['refits']} refits"
            )
            for d in t["drops"][:6]:
                what = {"win": "beat", "tie": "tied with", "both_bad": "both bad with"}[d["outcome"]]
                pair = f"{d['first']['label']} {what} {d['second']['label']}"
                print(f"      drop {d['votes']} x {pair}: ids {d['vote_ids'][:5]}")
        else:
            print(f"  {t['target']}: {t['status']}: {t['reason']}")
    ratio = audit_s / fit_s
    verdict = "meets" if ratio <= FIT_RATIO_GOAL else "misses"
    print(
        f"  cost: audit {audit_s:.2f} s = {ratio:.0f} x one fit ({fit_s * 1000:.0f} ms); "
        f"goal <= {FIT_RATIO_GOAL:.0f}: {verdict}"
    )


def audit_validation(pairs: PublicPairs) -> None:
    """Print the held-out predictive validation of ``pairs`` (issue 24.2, ``validation``): which tie
    treatment and prior predict the last 20% of the votes best from the first 80% (the data carry no style
    features, so no style candidate). The simulation's ties come at a constant rate whatever the pair, which
    is the "ties dropped" model's forecast (ties at the training share): the verdict should say so."""
    print(f"Held-out validation: {pairs.votes:,} votes, {len(pairs.names)} competitors ({pairs.source})")
    t0 = time.perf_counter()
    validate_arrays(pairs.a, pairs.b, pairs.outcome, n_competitors=len(pairs.names))
    print(f"  cost: {time.perf_counter() - t0:.2f} s")


def audit_at_scale(n: int = 300, votes: int = 1_000_000, seed: int = 0) -> None:
    """The audit's cost on a large campaign: ``n`` competitors with the top two close, ``votes`` votes."""
    rng = np.random.default_rng(seed)
    theta = np.sort(rng.normal(0.0, 1.0, n))[::-1].copy()
    theta[1] = theta[0] - 0.03
    a = rng.integers(0, n, votes)
    b = (a + rng.integers(1, n, votes)) % n
    p = 1.0 / (1.0 + np.exp(-(theta[a] - theta[b])))
    u = rng.random(votes)
    outcome = np.where(u < 0.15, TIE, np.where(rng.random(votes) < p, LEFT_WINS, RIGHT_WINS)).astype(np.int64)
    block, audit_s, fit_s = _timed_audit(a, b, outcome, {k + 1: f"m{k}" for k in range(n)})
    found = ", ".join(f"{t['target']}: {t.get('votes', t['status'])}" for t in block["targets"])
    verdict = "meets" if audit_s <= SCALE_GOAL_S else "misses"
    print(
        f"At scale: {n} competitors, {votes:,} votes: audit {audit_s:.1f} s = {audit_s / fit_s:.0f} x one fit "
        f"({fit_s:.2f} s); {found}; goal < {SCALE_GOAL_S:.0f} s: {verdict}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", action="store_true", help="also time the audit at 300 x 1,000,000")
    args = parser.parse_args()
    print("load average: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    pairs = load_public_pairs()
    audit_robustness(pairs)
    audit_validation(pairs)
    if args.scale:
        audit_at_scale()


if __name__ == "__main__":
    main()
