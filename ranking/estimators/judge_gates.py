"""The gates a judge's calibration against the human votes passes: a gate is passed only when the agreement's
own interval supports it, never on the point estimate alone.

A judge that agrees with the humans on 18 of 20 battles has an agreement of 0.90, but its 95% Wilson interval
is about 0.70 to 0.97: those battles cannot tell a 90% judge from a 75% one. Under the point rule such a judge
"may run alone"; a judge whose true agreement is 0.85 shows 18 of 20 or better 40% of the time.
``calibration_gate`` passes a gate only when the lower end of the interval reaches it, so a judge whose true
agreement is below a gate passes it at most about 2.5% of the time (the one-sided error of a 95% interval's
lower end), at any number of battles; ``benchmarks/judge_gates.py`` measures it."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .pairwise import wilson_interval

GATE_NEEDS_WORK = 0.75  # the agreement a judge must be shown to reach before it judges beside humans
GATE_ALONE = 0.90  # the agreement a judge must be shown to reach before it may run alone on a category
MIN_CALIBRATION_BATTLES = 20  # fewer: no gate is claimed, whatever the interval says
GATE_CONFIDENCE = 0.95  # the interval whose ends the gates are read from (the one the pages show)

GATE_RULE = (
    f"A gate is passed only when its own interval supports it: may_run_alone when the lower end of the "
    f"agreement's {GATE_CONFIDENCE:.0%} Wilson interval is at least {GATE_ALONE:.2f}; with_humans when that lower "
    f"end is at least {GATE_NEEDS_WORK:.2f}; needs_work when the upper end is below {GATE_NEEDS_WORK:.2f}; "
    f"insufficient when the interval spans {GATE_NEEDS_WORK:.2f} (the battles cannot tell yet) or fewer than "
    f"{MIN_CALIBRATION_BATTLES} battles were judged by both."
)


def calibration_gates(
    agreed: ArrayLike, battles: ArrayLike, *, confidence: float = GATE_CONFIDENCE
) -> NDArray[np.str_]:
    """The gate of each calibration (vectorised): ``agreed`` of ``battles`` judged alike by judge and human.
    Read from the Wilson interval at ``confidence``: see ``GATE_RULE``."""
    k = np.asarray(agreed, dtype=np.float64)
    n = np.asarray(battles, dtype=np.int64)
    lower, upper = wilson_interval(k, np.maximum(n, 1), confidence=confidence)
    gates = np.full(np.broadcast(k, n).shape, "insufficient", dtype="<U13")
    enough = n >= MIN_CALIBRATION_BATTLES
    gates[enough & (upper < GATE_NEEDS_WORK)] = "needs_work"
    gates[enough & (lower >= GATE_NEEDS_WORK)] = "with_humans"
    gates[enough & (lower >= GATE_ALONE)] = "may_run_alone"
    return gates


def calibration_gate(agreed: float, battles: int, *, confidence: float = GATE_CONFIDENCE) -> str:
    """The gate of one calibration: ``agreed`` of ``battles`` judged alike (``GATE_RULE``)."""
    return str(calibration_gates(np.array([agreed]), np.array([battles]), confidence=confidence)[0])
