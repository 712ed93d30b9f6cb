"""Benchmark of the ranking estimators: one command, figures as ratios to baselines measured alongside.

    python benchmarks/ranking.py [--battles 1000000] [--competitors 200 1000] [--rounds 100] [--no-peer]

For each board size: synthetic votes (1,000,000 battles, 10% ties, 3% both_bad, 4 style features,
prompt ids) with competitors named by strings, generated before any clock starts. Every stage that
the product runs starts from the competitor *names* (factorised to codes inside the stage, as the
recompute does with the log's ids), not from ready integer codes.

Printed per stage: best-of-N seconds, the ratio to its reference, and the peak memory *of that stage*
(tracemalloc, which numpy reports its buffers to: the peak above what was allocated when the stage
started, measured in a separate run so tracing does not slow the timed one), and the process's resident
peak over the timed runs (VmHWM, reset before each stage; the generated data included).

At 1,000 competitors one stage times the whole board as a recompute computes and stores it: the raw view's
``board_compute`` from the log's keys (codes, cells, the fit, the 100-round bootstrap, intervals made honest
at the boundary, rank ranges, the pairwise section) and the payload as written (the JSON of the method, rows,
pairwise section and extra; the pairwise grids' bytes), with its sizes printed.

References measured in the same run:
  floor      count the (pair, outcome) cells of integer arrays: the least any estimator must do
  baseline   a plain bootstrap written here: the same cells, every round drawn when needed and fitted
             by Newton's method (Hessian rebuilt and factorised every step) warm-started at the fit
  peer       evalica's Bradley-Terry (pip install '.[benchmark]'), one fit on the same names, against
             our one fit from the same names

Targets (the issues'): at 1,000 competitors raw BT + 100-round bootstrap, and the whole board, each <= 0.5 x
the baseline's time and <= 700 MB peak, memory flat in the number of rounds; at 200 competitors raw + bootstrap <= 0.5 s
on an idle reference 2-core machine (a loaded machine shows it in the floor ratio).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from unittest import mock

import numpy as np
import pandas as pd
import scipy.linalg as la
from numpy.typing import NDArray
from scipy.special import expit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ranking import estimators as ranking_estimators  # noqa: E402
from ranking.compute import Method, board_compute, competitor_codes  # noqa: E402
from ranking.estimators import (  # noqa: E402
    aggregate_cells,
    bootstrap_intervals,
    cluster_bootstrap_intervals,
    elo_order_spread,
    fit_bradley_terry,
    fit_style,
    laplacian,
    online_elo,
    pairwise_table,
    rank_ranges,
    sandwich_intervals,
    shown_mask,
    style_bootstrap_intervals,
    style_design,
    style_differences,
    style_sandwich_intervals,
)
from ranking.estimators.bradley_terry import pair_design  # noqa: E402
from ranking.estimators.intervals import _draw_cells, _round_generators  # noqa: E402
from ranking.estimators.synthetic import random_pairs, simulate_bt, simulate_style_counts  # noqa: E402
from ranking.policy import VoteArrays  # noqa: E402

T = TypeVar("T")
Codes = tuple[NDArray[np.int64], NDArray[np.int64], int]


@dataclass(frozen=True)
class Data:
    n: int
    ids: NDArray[np.int64]  # the competitors' primary keys (sorted, sparse), as in the competitor table
    left_id: NDArray[np.int64]  # one key per battle, as in the vote log
    right_id: NDArray[np.int64]
    names: NDArray[np.object_]  # competitor names
    left: NDArray[np.object_]  # one name per battle
    right: NDArray[np.object_]
    a: NDArray[np.int64]
    b: NDArray[np.int64]
    outcome: NDArray[np.int64]
    style_l: NDArray[np.float64]
    style_r: NDArray[np.float64]
    prompt: NDArray[np.int64]
    votes: VoteArrays  # the same battles as the recompute reads them from the log (competitor keys)


def generate(n: int, m: int, seed: int) -> Data:
    rng = np.random.default_rng(seed)
    theta = rng.normal(0.0, 0.8, n)
    a, b = random_pairs(rng, n, m)
    left, right = simulate_style_counts(rng, m), simulate_style_counts(rng, m)
    x = style_differences(left, right).x
    sim = simulate_bt(
        rng, theta, m, tie_prob=0.10, both_bad_prob=0.03, extra_logit=x @ np.array([0.3, 0.05, 0.05, 0.1]), a=a, b=b
    )
    names = np.array([f"vendor-{i % 37}/model-{i:04d}" for i in range(n)], dtype=object)
    prompt = rng.integers(0, m // 10, m)
    # Primary keys as a long-lived database hands them out: increasing, with gaps (deleted rows, other
    # campaigns' competitors in between).
    ids = np.cumsum(rng.integers(1, 50, n)).astype(np.int64) + 10_000
    zero = np.zeros(m, dtype=np.int64)
    votes = VoteArrays(
        vote_id=np.arange(m, dtype=np.int64),
        left=ids[a],
        right=ids[b],
        outcome=sim.outcome,
        decision_ms=zero + 5000,
        rater=rng.integers(0, 200, m),
        prompt=prompt,
        category=zero,
        categories=("",),
        identity=np.zeros(m, dtype=bool),
        style_left=left,
        style_right=right,
    )
    return Data(n, ids, ids[a], ids[b], names, names[a], names[b], a, b, sim.outcome, left, right, prompt, votes)


def codes(d: Data) -> tuple[NDArray[np.int64], NDArray[np.int64], int]:
    """The log's competitor keys to dense codes 0..n-1, by the recompute's own (checking) function."""
    a, b = competitor_codes(d.left_id, d.right_id, d.ids)
    return a, b, int(d.ids.shape[0])


def name_codes(d: Data) -> tuple[NDArray[np.int64], NDArray[np.int64], int]:
    """Name strings to dense codes 0..n-1 (sorted): what an engine handed names must do first."""
    both, uniques = pd.factorize(np.concatenate([d.left, d.right]), sort=True)
    m = d.left.shape[0]
    return both[:m].astype(np.int64), both[m:].astype(np.int64), int(uniques.shape[0])


# --- the stages ---------------------------------------------------------------------------------


def stage_floor(d: Data, args: argparse.Namespace) -> None:
    """Count the (pair, outcome) cells of in-memory integer arrays: the floor."""
    aggregate_cells(d.a, d.b, d.outcome, n_competitors=d.n)


def stage_bt_bootstrap_ranks(d: Data, args: argparse.Namespace, mapping: Callable[[Data], Codes] | None = None) -> None:
    """From the log's keys: codes, aggregate, fit BT, bootstrap, rank ranges among the shown."""
    a, b, n = (mapping or codes)(d)
    cells = aggregate_cells(a, b, d.outcome, n_competitors=n)
    fit = fit_bradley_terry(cells)
    iv = bootstrap_intervals(cells, fit, rounds=args.rounds, seed=0)
    rank_ranges(iv.lower, iv.upper, shown_mask(fit.battles, 50))


def stage_bt_bootstrap_ranks_names(d: Data, args: argparse.Namespace) -> None:
    """The same from name strings (``name_codes``)."""
    stage_bt_bootstrap_ranks(d, args, name_codes)


def _loglik(
    th: NDArray[np.float64],
    lo: NDArray[np.int64],
    hi: NDArray[np.int64],
    w_lo: NDArray[np.float64],
    tot: NDArray[np.float64],
    prior: float,
) -> float:
    dd = th[lo] - th[hi]
    return float(w_lo @ dd - tot @ np.logaddexp(0.0, dd)) + prior * float((0.5 * th - np.logaddexp(0.0, th)).sum())


def stage_baseline(d: Data, args: argparse.Namespace) -> None:
    """From the log's keys: the same cells and fit, then a plain bootstrap: each round drawn when needed, exactly
    as ours draws it (the same multinomial of the same cells), and fitted by Newton's method (the
    Laplacian Hessian rebuilt and Cholesky-factorised every step, halved while a step > 0.01 lowers the
    likelihood) from the full-data optimum to the same tolerance. Only the solver differs."""
    a, b, n = codes(d)
    cells = aggregate_cells(a, b, d.outcome, n_competitors=n)
    fit = fit_bradley_terry(cells)
    design = pair_design(cells, fit.params.both_bad)
    dc = _draw_cells(cells, design)
    total = int(cells.count.sum())
    category_of_battle = np.repeat(np.arange(dc.count.shape[0]), dc.count.astype(np.int64))
    prior = fit.params.prior_games
    lo, hi = design.lo, design.hi
    out = np.empty((args.rounds, n))
    for r, g in enumerate(_round_generators(0, args.rounds)):
        k = np.bincount(category_of_battle[g.integers(0, total, total)], minlength=dc.count.shape[0])
        w_lo, w_hi = dc.pair_wins(k.astype(np.float64))
        tot = w_lo + w_hi
        theta = fit.theta_raw.copy()
        for _ in range(100):
            p = expit(theta[lo] - theta[hi])
            res = w_lo - tot * p
            grad = np.bincount(lo, res, minlength=n) - np.bincount(hi, res, minlength=n) + prior * (0.5 - expit(theta))
            h = laplacian(n, lo, hi, tot * p * (1 - p))
            p0 = expit(theta)
            h[np.diag_indices(n)] += prior * p0 * (1 - p0)
            step = la.cho_solve(la.cho_factor(h, check_finite=False), grad, check_finite=False)
            t, size = 1.0, float(np.abs(step).max())
            if size > 1e-2:
                f0 = _loglik(theta, lo, hi, w_lo, tot, prior)
                while _loglik(theta + t * step, lo, hi, w_lo, tot, prior) < f0 - 1e-12 * abs(f0) and t > 1e-6:
                    t *= 0.5
            theta = theta + t * step
            if t * size <= 1e-6:
                break
        out[r] = theta


# What the whole-board stage last stored (bytes of JSON, bytes of grids), for the line under the table.
PAYLOAD: dict[str, int] = {}


def stage_whole_board(d: Data, args: argparse.Namespace) -> None:
    """From the log's keys, the raw board as a recompute computes and stores it: ``board_compute`` (codes,
    cells, fit, bootstrap, boundary intervals, rank ranges, the pairwise section and its grids' bytes) and the
    JSON the snapshot's columns are written as (Django's JSONField: ``json.dumps``)."""
    method = Method(rounds=args.rounds)
    labels = {int(i): str(name) for i, name in zip(d.ids, d.names, strict=True)}
    board = board_compute(d.votes, d.ids, labels, method)
    text = json.dumps([method.as_dict(view="raw"), board.rows, board.pairwise, board.extra])
    PAYLOAD.update(json=len(text), arrays=len(board.pairwise_arrays))


def stage_ours_fit(d: Data, args: argparse.Namespace) -> None:
    """From name strings (as the peer is given them): codes, aggregate, one BT fit (the peer comparison)."""
    a, b, n = name_codes(d)
    fit_bradley_terry(aggregate_cells(a, b, d.outcome, n_competitors=n))


def stage_peer_fit(d: Data, args: argparse.Namespace) -> None:
    """evalica.bradley_terry on the same names (ties half a win; both_bad as a tie, as ours)."""
    import evalica

    winners = [
        evalica.Winner.X if o == 0 else evalica.Winner.Y if o == 1 else evalica.Winner.Draw for o in d.outcome.tolist()
    ]
    evalica.bradley_terry(d.left.tolist(), d.right.tolist(), winners, tolerance=1e-6)


def stage_bt_sandwich(d: Data, args: argparse.Namespace) -> None:
    """From the log's keys: aggregate, fit BT, sandwich intervals."""
    a, b, n = codes(d)
    cells = aggregate_cells(a, b, d.outcome, n_competitors=n)
    sandwich_intervals(cells, fit_bradley_terry(cells))


def stage_bt_prompt_bootstrap(d: Data, args: argparse.Namespace) -> None:
    """From the log's keys: aggregate by (prompt, pair, outcome), fit, bootstrap by prompt."""
    a, b, n = codes(d)
    cells = aggregate_cells(a, b, d.outcome, n_competitors=n, cluster=d.prompt)
    cluster_bootstrap_intervals(cells, fit_bradley_terry(cells), rounds=args.rounds, seed=0)


def stage_pairwise(d: Data, args: argparse.Namespace) -> None:
    """From the log's keys: the full pairwise table (win rates, Wilson, exact tests, tie rates)."""
    a, b, n = codes(d)
    pairwise_table(aggregate_cells(a, b, d.outcome, n_competitors=n))


def stage_style_analytic(d: Data, args: argparse.Namespace) -> None:
    """From the log's keys: style design, style-controlled fit, sandwich intervals."""
    a, b, n = codes(d)
    sd = style_design(a, b, d.outcome, d.style_l, d.style_r, n_competitors=n)
    style_sandwich_intervals(sd, fit_style(sd))


def stage_style_bootstrap(d: Data, args: argparse.Namespace) -> None:
    """From the log's keys: style design, fit, bootstrap (battles resampled)."""
    a, b, n = codes(d)
    sd = style_design(a, b, d.outcome, d.style_l, d.style_r, n_competitors=n)
    style_bootstrap_intervals(sd, fit_style(sd), rounds=args.rounds, seed=0)


def stage_style_bootstrap_newton(d: Data, args: argparse.Namespace) -> None:
    """The reference for the style bootstrap: the same rounds (the same draws), each solved by damped
    Newton on the rows drawn (the solver before the fixed-Hessian rounds)."""
    a, b, n = codes(d)
    sd = style_design(a, b, d.outcome, d.style_l, d.style_r, n_competitors=n)
    style_bootstrap_intervals(sd, fit_style(sd), rounds=args.rounds, seed=0, solver="newton")


def stage_online_elo(d: Data, args: argparse.Namespace) -> None:
    """Sequential Elo over all battles (a Python loop by nature)."""
    a, b, n = codes(d)
    online_elo(a, b, d.outcome, n_competitors=n)


def stage_elo_order_spread(d: Data, args: argparse.Namespace) -> None:
    """Elo's spread over 100 random orders (the board's figure next to live Elo): all orders replayed at
    once, one vectorised step per vote, each order's last 100,000 votes of a longer log."""
    a, b, n = codes(d)
    elo_order_spread(a, b, d.outcome, n_competitors=n)


def _board_votes(d: Data) -> VoteArrays:
    """The synthetic votes as the recompute hands them to ``board_compute`` (one by one, one category)."""
    m = int(d.a.shape[0])
    zeros = np.zeros(m, dtype=np.int64)
    return VoteArrays(
        vote_id=np.arange(m, dtype=np.int64),
        left=d.left_id,
        right=d.right_id,
        outcome=d.outcome,
        decision_ms=zeros,
        rater=zeros,
        prompt=d.prompt,
        category=zeros,
        categories=("",),
        identity=np.zeros(m, dtype=bool),
        style_left=np.asarray(d.style_l, dtype=np.float64),
        style_right=np.asarray(d.style_r, dtype=np.float64),
    )


def stage_style_board(d: Data, args: argparse.Namespace) -> None:
    """Through the board: ``board_compute``'s style view with the 100-round bootstrap (design, checks, the
    raw fit its open sides come from, the style fit, sandwich and bootstrap intervals, ranks, pairwise)."""
    board_compute(_board_votes(d), d.ids, {}, Method(style_interval="bootstrap", rounds=args.rounds), view="style")


def stage_style_board_newton(d: Data, args: argparse.Namespace) -> None:
    """The reference through the board: the same board with every bootstrap round solved by damped Newton."""
    real = ranking_estimators.style_bootstrap_intervals

    def newton(*a: Any, **k: Any) -> Any:
        return real(*a, **{**k, "solver": "newton"})

    with mock.patch.object(ranking_estimators, "style_bootstrap_intervals", newton):
        stage_style_board(d, args)


Stage = Callable[[Data, argparse.Namespace], None]
# (name, function, repeats (best of), reference stage name or None, target ratio or seconds)
Plan = list[tuple[str, Stage, int, str | None, str]]
PLAN_200: Plan = [
    ("floor", stage_floor, 5, None, ""),
    ("BT + bootstrap + ranks", stage_bt_bootstrap_ranks, 3, "floor", "<=0.5s idle"),
    ("  the same from name strings", stage_bt_bootstrap_ranks_names, 3, "floor", ""),
    ("BT + sandwich", stage_bt_sandwich, 3, "floor", ""),
    ("BT + bootstrap by prompt", stage_bt_prompt_bootstrap, 1, "floor", ""),
    ("pairwise table", stage_pairwise, 3, "floor", ""),
    ("style + analytic", stage_style_analytic, 3, "floor", "<=2s idle"),
    ("style + bootstrap, Newton rounds", stage_style_bootstrap_newton, 1, None, ""),
    ("style + bootstrap", stage_style_bootstrap, 1, "style + bootstrap, Newton rounds", "<=20s idle"),
    ("online Elo", stage_online_elo, 1, "floor", ""),
    ("Elo order spread, 100 orders", stage_elo_order_spread, 1, "online Elo", ""),
]
# Issue 23.4: style control through the board at 100,000 votes x 50 competitors, >= 4 x the Newton rounds.
PLAN_STYLE_BOARD: Plan = [
    ("style + bootstrap, Newton rounds", stage_style_bootstrap_newton, 1, None, ""),
    ("style + bootstrap", stage_style_bootstrap, 2, "style + bootstrap, Newton rounds", "(estimators alone)"),
    ("board: style, Newton rounds", stage_style_board_newton, 1, None, ""),
    ("board: style + bootstrap", stage_style_board, 3, "board: style, Newton rounds", ">=4x"),
]
PLAN_1000: Plan = [
    ("floor", stage_floor, 3, None, ""),
    ("baseline: Newton per round", stage_baseline, 1, None, ""),
    ("BT + bootstrap + ranks", stage_bt_bootstrap_ranks, 2, "baseline: Newton per round", "<=0.5x, <=700MB"),
    ("whole board, as stored", stage_whole_board, 2, "baseline: Newton per round", "<=0.5x, <=700MB"),
    ("ours: one fit from names", stage_ours_fit, 2, None, ""),
    ("peer: evalica one fit", stage_peer_fit, 2, "ours: one fit from names", "(ratio)"),
]


# The process's CPU seconds (all threads) of each stage's fastest run by CPU, for the speed-up goals' lines: on a
# shared machine wall seconds measure the load as much as the code; CPU seconds count the work.
CPU: dict[str, float] = {}


def timed(fn: Stage, d: Data, args: argparse.Namespace, repeats: int) -> float:
    best = float("inf")
    best_cpu = float("inf")
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        fn(d, args)
        best = min(best, time.perf_counter() - t0)
        best_cpu = min(best_cpu, time.process_time() - c0)
    CPU[fn.__name__] = min(CPU.get(fn.__name__, float("inf")), best_cpu)
    return best


def timed_alternating(fn: Stage, ref: Stage, d: Data, args: argparse.Namespace, repeats: int) -> tuple[float, float]:
    """Best-of-``repeats`` seconds of ``fn`` and of its reference ``ref``, run in turn (ref, fn, ref, fn, ...): on
    a shared machine whose load drifts over a minute, both see the same stretches of it, so their ratio is
    not a comparison of a quiet moment with a busy one."""
    best, best_ref = float("inf"), float("inf")
    for _ in range(repeats):
        best_ref = min(best_ref, timed(ref, d, args, 1))
        best = min(best, timed(fn, d, args, 1))
    return best, best_ref


def rss_peak_reset() -> None:
    """Start the process's resident-set high-water mark afresh (Linux: 5 to /proc/self/clear_refs)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass


def rss_peak_mib() -> float:
    """The process's resident-set high-water mark (VmHWM) since the last reset, its data included; NaN where
    /proc does not say."""
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        return float("nan")
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def traced_peak_mib(fn: Stage, d: Data, args: argparse.Namespace) -> float:
    """Peak of traced allocations during one run of ``fn``, above what was live when it started."""
    tracemalloc.start()
    start, _ = tracemalloc.get_traced_memory()
    tracemalloc.reset_peak()
    fn(d, args)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return (peak - start) / 2**20


def run_plan(plan: Plan, d: Data, args: argparse.Namespace) -> bool:
    # "peak MiB": traced allocations of the stage alone; "RSS MiB": the process's resident peak over the timed
    # runs, the generated data (a few hundred MiB at 1,000,000 battles) included.
    print(f"{'stage':30s} {'seconds':>8s} {'ratio':>7s} {'to':>26s} {'peak MiB':>9s} {'RSS MiB':>8s}  target")
    seconds: dict[str, float] = {}
    functions = {name: fn for name, fn, *_ in plan}
    ok = True
    for name, fn, repeats, ref, target in plan:
        if any(s in name for s in args.skip) or (name.startswith("peer") and args.no_peer):
            continue
        rss_peak_reset()
        if target == ">=4x" and ref in seconds:
            # A speed-up goal: ours and the reference alternate (the reference's best over all its runs).
            secs, ref_secs = timed_alternating(fn, functions[ref], d, args, repeats)
            seconds[ref] = min(seconds[ref], ref_secs)
        else:
            secs = timed(fn, d, args, repeats)
        rss = rss_peak_mib()
        seconds[name] = secs
        peak = traced_peak_mib(fn, d, args)
        ratio = secs / seconds[ref] if ref in seconds else float("nan")
        verdict = ""
        if target.startswith("<=0.5x"):
            hit = ratio <= 0.5 and peak <= 700
            ok &= hit
            verdict = "ok" if hit else "MISSED"
        if target == ">=4x":
            # A speed-up: the reference's time over ours.
            ratio = 1 / ratio
            hit = ratio >= 4
            ok &= hit
            verdict = "ok" if hit else "MISSED"
        elif target == "(estimators alone)":
            ratio = 1 / ratio
        line = f"{name:30s} {secs:8.3f} {ratio:7.2f} {ref or '':>26s} {peak:9.0f} {rss:8.0f}  {target} {verdict}"
        if target == ">=4x" and ref in seconds:
            cpu, cpu_ref = CPU[fn.__name__], CPU[functions[ref].__name__]
            line += (
                f" (reference best {seconds[ref]:.3f} s, runs alternating; CPU seconds {cpu:.3f} against "
                f"{cpu_ref:.3f}: {cpu_ref / cpu:.2f} x)"
            )
        print(line, flush=True)
    return ok


def breakdown(d: Data, args: argparse.Namespace) -> None:
    """Where the time of "BT + bootstrap + ranks" goes: each step alone, best of 3 (wall and CPU)."""
    parts: dict[str, tuple[float, float]] = {}

    def clock(name: str, fn: Callable[[], T]) -> T:
        best, best_cpu = float("inf"), float("inf")
        for _ in range(3):
            t0, c0 = time.perf_counter(), time.process_time()
            out = fn()
            best, best_cpu = min(best, time.perf_counter() - t0), min(best_cpu, time.process_time() - c0)
        parts[name] = (best, best_cpu)
        return out

    a, b, n = clock("keys -> codes", lambda: codes(d))
    cells = clock("aggregate", lambda: aggregate_cells(a, b, d.outcome, n_competitors=n))
    fit = clock("fit", lambda: fit_bradley_terry(cells))
    iv = clock("bootstrap", lambda: bootstrap_intervals(cells, fit, rounds=args.rounds, seed=0))
    clock("rank ranges", lambda: rank_ranges(iv.lower, iv.upper, shown_mask(fit.battles, 50)))
    print(
        "  breakdown (wall / CPU s): "
        + ", ".join(f"{k} {w:.3f} / {c:.3f}" for k, (w, c) in parts.items())
        + f"; sum {sum(w for w, _ in parts.values()):.3f} s"
    )


def memory_in_rounds(d: Data, args: argparse.Namespace) -> None:
    """The bootstrap's traced peak at several round counts: flat when rounds are drawn as needed."""
    a, b, n = codes(d)
    cells = aggregate_cells(a, b, d.outcome, n_competitors=n)
    fit = fit_bradley_terry(cells)
    peaks = []
    for rounds in (25, 100):
        tracemalloc.start()
        start, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        bootstrap_intervals(cells, fit, rounds=rounds, seed=0)
        peaks.append((rounds, (tracemalloc.get_traced_memory()[1] - start) / 2**20))
        tracemalloc.stop()
    print(
        "bootstrap peak by rounds (MiB): "
        + ", ".join(f"{r}: {p:.0f}" for r, p in peaks)
        + "  (the samples themselves: rounds x n x 8 bytes)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--battles", type=int, default=1_000_000)
    parser.add_argument("--competitors", type=int, nargs="+", default=[200, 1000])
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip", nargs="*", default=[], help="substrings of stage names to skip")
    parser.add_argument("--no-peer", action="store_true", help="skip the evalica comparison")
    parser.add_argument(
        "--style-board", action="store_true", help="only: style control through the board, 100,000 votes x 50"
    )
    args = parser.parse_args(argv)
    print(
        f"load average at the start: {Path('/proc/loadavg').read_text().split()[:3]}; "
        f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')} (the figures in docs/benchmarks.md: 1)"
    )
    ok = True
    if args.style_board:
        t0 = time.perf_counter()
        data = generate(50, 100_000, args.seed)
        print(f"load average {Path('/proc/loadavg').read_text().split()[:3]}")
        print(
            f"\n100,000 battles, 50 competitors, {args.rounds} rounds (generated in {time.perf_counter() - t0:.1f} s); "
            "ratio here: the reference's seconds over ours"
        )
        ok = run_plan(PLAN_STYLE_BOARD, data, args)
        print(f"load average {Path('/proc/loadavg').read_text().split()[:3]}")
        return 0 if ok else 1
    for n in args.competitors:
        t0 = time.perf_counter()
        data = generate(n, args.battles, args.seed)
        print(
            f"\n{args.battles:,} battles, {n} competitors, {args.rounds} rounds "
            f"(generated in {time.perf_counter() - t0:.1f} s, not part of any figure)"
        )
        ok &= run_plan(PLAN_1000 if n >= 1000 else PLAN_200, data, args)
        if n < 1000:
            breakdown(data, args)
        if n >= 1000:
            if PAYLOAD:
                print(
                    f"whole board's payload: {PAYLOAD['json'] / 1e6:.2f} MB of JSON and "
                    f"{PAYLOAD['arrays'] / 1e6:.2f} MB of pairwise grids per snapshot"
                )
            memory_in_rounds(data, args)
    print(f"load average at the end: {Path('/proc/loadavg').read_text().split()[:3]}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
