"""Attribute boards (ratio judgements): the boards, runs and judges a principal may read or write, a run's
observations and its fit recomputed from the ledger, replication between two runs, published boards."""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from django.contrib.auth.models import User
from django.db.models import QuerySet
from numpy.typing import NDArray

from battles.models import Judge
from raters.authentication import ApiKeyPrincipal
from raters.selectors import organizations_viewable_by, organizations_writable_by
from raters.tenancy import scopes_disabled
from serving.ratio_judging import RATIO_MAX

from ..estimators.ratio import RatioFit, fit_ratio
from ..estimators.ratio_design import spearman
from ..models import AttributeBoard, AttributeEntity, AttributeJudgement, AttributeRun, AttributeScore

# How a run's judgements are fitted; the run and its recomputation from the ledger must agree. Each
# entity's noise is estimated, and an answer at the judge's ladder end (RATIO_MAX) is censored: "at least".
RUN_FIT_OPTIONS: dict[str, Any] = {"noise": "entity", "censor_at": math.log(RATIO_MAX)}


def attribute_boards_viewable_by(user: User | ApiKeyPrincipal) -> QuerySet[AttributeBoard]:
    """Boards whose runs, scores and ledger the principal may read: owners, managers and viewers of the
    organisation, or its API keys (the same rule as campaigns)."""
    return AttributeBoard.objects.filter(organization__in=organizations_viewable_by(user)).select_related(
        "judge__rubric", "judge__endpoint"
    )


def attribute_board_viewable_by(*, user: User | ApiKeyPrincipal, board_id: int) -> AttributeBoard | None:
    return attribute_boards_viewable_by(user).filter(pk=board_id).first()


def attribute_board_writable_by(*, user: User | ApiKeyPrincipal, board_id: int) -> AttributeBoard | None:
    """A read-write key's organisation, or the organisations a person owns or manages."""
    return AttributeBoard.objects.filter(organization__in=organizations_writable_by(user), pk=board_id).first()


def attribute_run_viewable_by(*, user: User | ApiKeyPrincipal, run_id: int) -> AttributeRun | None:
    return (
        AttributeRun.objects.filter(organization__in=organizations_viewable_by(user), pk=run_id)
        .select_related("board", "judge__rubric")
        .first()
    )


def attribute_board_entities(board: AttributeBoard) -> list[AttributeEntity]:
    """The board's entities in estimator order (``position``)."""
    return list(AttributeEntity.objects.filter(board=board).order_by("position"))


@dataclass(frozen=True)
class RunObservations:
    """A run's accepted judgements as the estimator's arrays (indices into ``entities``)."""

    entities: list[int]  # entity ids, in position order
    i: NDArray[np.int64]
    j: NDArray[np.int64]
    log_ratio: NDArray[np.float64]
    confidence: NDArray[np.float64]


def attribute_run_observations(run: AttributeRun) -> RunObservations:
    """What reached the estimator in ``run``: the ledger's used rows, over the entities the run saw
    (the first ``run.entities`` positions)."""
    ids = list(
        AttributeEntity.objects.filter(board_id=run.board_id, position__lt=run.entities)
        .order_by("position")
        .values_list("pk", flat=True)
    )
    index = {pk: k for k, pk in enumerate(ids)}
    rows = list(
        AttributeJudgement.objects.filter(run=run, used=True)
        .order_by("id")
        .values_list("first_id", "second_id", "log_ratio", "confidence")
    )
    conf = [np.nan if c is None else float(c) for _, _, _, c in rows]
    return RunObservations(
        entities=ids,
        i=np.array([index[a] for a, _, _, _ in rows], dtype=np.int64),
        j=np.array([index[b] for _, b, _, _ in rows], dtype=np.int64),
        log_ratio=np.array([np.nan if r is None else r for _, _, r, _ in rows], dtype=np.float64),
        confidence=np.array(conf, dtype=np.float64),
    )


def attribute_run_fit(run: AttributeRun) -> RatioFit:
    """The run's solve, recomputed from its ledger: the same accepted judgements give the same bytes as
    the run recorded (``run.solve["hash"]``)."""
    obs = attribute_run_observations(run)
    return fit_ratio(len(obs.entities), obs.i, obs.j, obs.log_ratio, obs.confidence, seed=run.seed, **RUN_FIT_OPTIONS)


def attribute_fit_hash(fit: RatioFit) -> str:
    return hashlib.sha256(fit.canonical_bytes()).hexdigest()


def attribute_runs_compare(*, run: AttributeRun, other: AttributeRun) -> dict[str, Any]:
    """Replication between two finished runs of one board: Spearman's rho of the scores over the
    entities both ranked, top-k overlap, and (on pairs both runs judged) how often their fused
    log-ratios agree in sign. Same judge, different seeds: a seed replication; different judges:
    the judges' agreement."""
    if run.board_id != other.board_id:
        raise ValueError("runs of different boards")
    mine = dict(AttributeScore.objects.filter(run=run).values_list("entity_id", "score"))
    theirs = dict(AttributeScore.objects.filter(run=other).values_list("entity_id", "score"))
    top_mine = set(AttributeScore.objects.filter(run=run, in_top_k=True).values_list("entity_id", flat=True))
    top_theirs = set(AttributeScore.objects.filter(run=other, in_top_k=True).values_list("entity_id", flat=True))
    common = sorted(set(mine) & set(theirs))
    rho: float | None = None
    if len(common) >= 3:
        value = spearman([mine[e] for e in common], [theirs[e] for e in common])
        rho = None if np.isnan(value) else value

    def fused(r: AttributeRun) -> dict[tuple[int, int], float]:
        sums: dict[tuple[int, int], list[float]] = {}
        for a, b, lr in AttributeJudgement.objects.filter(run=r, used=True).values_list(
            "first_id", "second_id", "log_ratio"
        ):
            key, sign = ((a, b), 1.0) if a < b else ((b, a), -1.0)
            sums.setdefault(key, []).append(sign * (np.nan if lr is None else lr))
        return {key: float(np.mean(v)) for key, v in sums.items()}

    pairs_mine, pairs_theirs = fused(run), fused(other)
    shared = sorted(set(pairs_mine) & set(pairs_theirs))
    agree = sum(1 for key in shared if np.sign(pairs_mine[key]) == np.sign(pairs_theirs[key]))
    k = max(len(top_mine), 1)
    return {
        "run": run.pk,
        "other": other.pk,
        "kind": "seeds" if run.judge_id == other.judge_id else "judges",
        "entities": len(common),
        "spearman": rho,
        "top_k_overlap": len(top_mine & top_theirs) / k if top_mine else None,
        "shared_pairs": len(shared),
        "pair_sign_agreement": agree / len(shared) if shared else None,
    }


def attribute_board_public(*, slug: str) -> AttributeBoard | None:
    """A published board by its public address (any organisation: the address is the credential)."""
    with scopes_disabled():
        board = AttributeBoard.objects.filter(public_slug=slug).first()
    return board


def attribute_board_latest_run(board: AttributeBoard) -> AttributeRun | None:
    """The newest finished run of the board: what a published board shows."""
    return AttributeRun.objects.filter(board=board, status=AttributeRun.Status.DONE).order_by("-id").first()


def judge_writable_by(*, user: User | ApiKeyPrincipal, judge_id: int) -> Judge | None:
    """A judge the principal may put on a board: one of an organisation it may write to."""
    return (
        Judge.objects.filter(organization__in=organizations_writable_by(user), pk=judge_id)
        .select_related("organization", "rubric", "endpoint")
        .first()
    )
