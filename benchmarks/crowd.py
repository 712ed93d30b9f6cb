"""Benchmark of the reliability-weighted view (crowd Bradley-Terry) against plain Bradley-Terry,
measured in the same run on the same votes. One command:

    python benchmarks/crowd.py [--seeds 16] [--raters 1000] [--votes 100000] [--competitors 50] [--repeat 3]

Accuracy: synthetic campaigns with known truth (10 competitors, neighbours 0.18 logits = 31 points
apart, 20 raters, 6,000 votes) with 0% bad raters, 20% voting at random (a coin flip) and 20%
adversarial (always the weaker side). Printed per campaign type, averaged over the seeds: the Kendall
tau to the true order and its distance (discordant pairs of 45), top-1 and top-3 accuracy (share of
the true top 3 among the estimated top 3), plain BT vs crowd BT.

Error against plain BT (issue 20.2): the same three kinds of campaign on random true boards (10
competitors drawn N(0, 0.5), 20 raters, 2,000 votes), per kind over the seeds: the ratio of the mean
error (root mean square distance of the centred log-strengths to the truth) crowd / plain, the mean gap
slope (crowd's centred scores on plain's, least squares through the origin) and the share of campaigns
where crowd BT is further from the truth. Goal: honest ratio ~1.00 (under 1.02) and slope ~1.00
(within 0.01); with bad raters a ratio well under 1.

Time: one fit on 1,000 raters x 100,000 votes x 50 competitors (20% random raters), from the vote
arrays: plain BT (aggregate the cells, fit) against crowd BT (the plain fit it starts from, the
(rater, pair) cells, the EM fit), best of ``--repeat``, and a rater-bootstrap round (mean of five).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ranking.estimators import aggregate_cells, crowd_bootstrap, crowd_cells, fit_bradley_terry, fit_crowd_bt  # noqa: E402
from ranking.estimators.synthetic import crowd_campaign, discordant_pairs  # noqa: E402


def top_k(scores: NDArray[np.float64], truth: NDArray[np.float64], k: int) -> float:
    return len(set(np.argsort(-scores)[:k]) & set(np.argsort(-truth)[:k])) / k


def accuracy(seeds: int) -> None:
    theta = np.linspace(-0.8, 0.8, 10)
    pairs = 45
    print(f"accuracy: 10 competitors, 20 raters, 6,000 votes, {seeds} seeds (mean over seeds)")
    print(f"{'campaign':<22}{'':>8}{'tau':>8}{'discord':>9}{'top-1':>7}{'top-3':>7}{'eta bad':>9}{'eta good':>10}")
    for kind in ("honest", "random", "adversarial"):
        res: dict[str, list[list[float]]] = {"plain BT": [], "crowd BT": []}
        eta_bad: list[float] = []
        eta_good: list[float] = []
        for seed in range(seeds):
            c = crowd_campaign(np.random.default_rng(seed), theta, n_raters=20, n_votes=6000, kind=kind)  # type: ignore[arg-type]
            raw = fit_bradley_terry(aggregate_cells(c.a, c.b, c.outcome, n_competitors=10))
            fit = fit_crowd_bt(crowd_cells(c.a, c.b, c.outcome, c.rater, n_competitors=10), raw)
            eta_bad.extend(fit.eta[c.bad])
            eta_good.extend(fit.eta[~c.bad])
            for name, scores in (("plain BT", raw.scores), ("crowd BT", fit.scores)):
                d = discordant_pairs(scores, theta)
                res[name].append([1 - 2 * d / pairs, d, top_k(scores, theta, 1), top_k(scores, theta, 3)])
        label = {"honest": "0% bad raters", "random": "20% random", "adversarial": "20% adversarial"}[kind]
        for name, rows in res.items():
            m = np.mean(rows, axis=0)
            etas = (
                f"{np.mean(eta_bad) if eta_bad else float('nan'):>9.3f}{np.mean(eta_good):>10.3f}"
                if name == "crowd BT"
                else ""
            )
            print(f"{label:<22}{name:>8}{m[0]:>8.3f}{m[1]:>9.2f}{m[2]:>7.2f}{m[3]:>7.2f}{etas}")
            label = ""


def error_ratios(seeds: int) -> None:
    print(f"\nerror against plain BT: 10 competitors ~ N(0, 0.5), 20 raters, 2,000 votes, {seeds} seeds")
    print(f"{'campaign':<22}{'error ratio':>12}{'gap slope':>11}{'worse in':>10}")
    for kind in ("honest", "random", "adversarial"):
        err_plain, err_crowd, slopes = [], [], []
        for seed in range(seeds):
            rng = np.random.default_rng(seed)
            truth = np.asarray(rng.normal(0.0, 0.5, 10), dtype=np.float64)
            c = crowd_campaign(rng, truth, n_raters=20, n_votes=2000, kind=kind)  # type: ignore[arg-type]
            raw = fit_bradley_terry(aggregate_cells(c.a, c.b, c.outcome, n_competitors=10))
            fit = fit_crowd_bt(crowd_cells(c.a, c.b, c.outcome, c.rater, n_competitors=10), raw)
            p, q, t = (x - x.mean() for x in (raw.log_strength, fit.log_strength, truth))
            err_plain.append(float(np.sqrt(np.mean((p - t) ** 2))))
            err_crowd.append(float(np.sqrt(np.mean((q - t) ** 2))))
            slopes.append(float(q @ p / (p @ p)))
        ratio = np.mean(err_crowd) / np.mean(err_plain)
        worse = np.mean(np.array(err_crowd) > np.array(err_plain))
        label = {"honest": "0% bad raters", "random": "20% random", "adversarial": "20% adversarial"}[kind]
        goal = "  goal < 1.02, slope 1.00 +- 0.01" if kind == "honest" else "  goal well under 1"
        print(f"{label:<22}{ratio:>12.3f}{np.mean(slopes):>11.3f}{worse:>10.2f}{goal}")


def timing(n_raters: int, n_votes: int, n_competitors: int, repeat: int) -> None:
    rng = np.random.default_rng(0)
    theta = rng.normal(0.0, 0.8, n_competitors)
    c = crowd_campaign(rng, theta, n_raters=n_raters, n_votes=n_votes, kind="random")

    def plain() -> object:
        return fit_bradley_terry(aggregate_cells(c.a, c.b, c.outcome, n_competitors=n_competitors))

    def crowd() -> object:
        raw = fit_bradley_terry(aggregate_cells(c.a, c.b, c.outcome, n_competitors=n_competitors))
        return fit_crowd_bt(crowd_cells(c.a, c.b, c.outcome, c.rater, n_competitors=n_competitors), raw)

    def best(fn: object) -> float:
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            fn()  # type: ignore[operator]
            times.append(time.perf_counter() - t0)
        return min(times)

    t_plain, t_crowd = best(plain), best(crowd)
    raw = fit_bradley_terry(aggregate_cells(c.a, c.b, c.outcome, n_competitors=n_competitors))
    cc = crowd_cells(c.a, c.b, c.outcome, c.rater, n_competitors=n_competitors)
    fit = fit_crowd_bt(cc, raw)
    t0 = time.perf_counter()
    crowd_bootstrap(cc, fit, rounds=5, seed=0)
    t_round = (time.perf_counter() - t0) / 5
    print(
        f"\ntime: {n_raters:,} raters x {n_votes:,} votes x {n_competitors} competitors, best of {repeat}\n"
        f"  plain BT fit        {t_plain:8.3f} s\n"
        f"  crowd BT fit        {t_crowd:8.3f} s   ratio {t_crowd / t_plain:6.1f} x plain "
        f"({fit.iterations} iterations, converged {fit.converged}; "
        f"{int(fit.estimated.sum())} raters estimated)\n"
        f"  bootstrap round     {t_round:8.3f} s   (a 100-round rater bootstrap: about {100 * t_round:.0f} s)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=16)
    parser.add_argument("--raters", type=int, default=1000)
    parser.add_argument("--votes", type=int, default=100_000)
    parser.add_argument("--competitors", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    accuracy(args.seeds)
    error_ratios(args.seeds)
    timing(args.raters, args.votes, args.competitors, args.repeat)


if __name__ == "__main__":
    main()
