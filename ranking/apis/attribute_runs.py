"""An attribute board's runs: start one, read it with its provenance, its scores, its judgement ledger, and
the replication between two runs."""

from __future__ import annotations

from typing import Any

from django.http import Http404
from drf_spectacular.utils import OpenApiExample, extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.parsers import JSONParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from battles.apis import StrictIntegerField
from core.api import cursor_page, page_of
from core.errors import Invalid

from .. import selectors, services
from ..models import AttributeJudgement, AttributeRun, AttributeScore
from .access import _actor_via, _principal
from .attribute_boards import (
    BOARD_EXAMPLE,
    PAGE_PARAMETERS,
    JudgeRefOutput,
    PageQuery,
    _attribute_board,
    _attribute_board_writable,
    _attribute_run,
)


class RunProvenanceFields(serializers.Serializer[Any]):
    """What a run was made by and of: the fields a run and each of its score rows both carry."""

    judge = JudgeRefOutput()
    model_name = serializers.CharField(help_text="The judge's served model, as called.")
    rubric_hash = serializers.CharField()
    template_hash = serializers.CharField(help_text="SHA-256 of the judge prompt's template.")
    seed = serializers.IntegerField()
    entities = serializers.IntegerField()
    calls = serializers.IntegerField()
    accepted = serializers.IntegerField()
    refused = serializers.IntegerField()
    malformed = serializers.IntegerField()
    call_errors = serializers.IntegerField(help_text="Calls that failed (no reply).")
    pairs = serializers.IntegerField()
    output_tokens = serializers.IntegerField()
    call_seconds = serializers.FloatField(help_text="Sum of the judge calls' latencies (the run's cost).")
    degraded = serializers.BooleanField()
    finished_at = serializers.DateTimeField(allow_null=True)


class AttributeRunOutput(RunProvenanceFields):
    id = serializers.IntegerField()
    board_id = serializers.IntegerField()
    attribute = serializers.CharField()
    top_k = serializers.IntegerField()
    batch_size = serializers.IntegerField()
    budget_calls = serializers.IntegerField()
    status = serializers.ChoiceField(choices=AttributeRun.Status.values)
    stop_reason = serializers.CharField(help_text="separated, budget, exhausted, or failed.")
    failure_reason = serializers.CharField()
    pairs_refused = serializers.IntegerField()
    checks = serializers.IntegerField()
    solve = serializers.DictField(
        help_text="The final fit: hash, dispersion, cyclic share, components, method; `order`: the figures below; "
        "`top_k_error`: the same as the field of that name."
    )
    top_k_error = serializers.SerializerMethodField(
        help_text="Probability that the reported top-k set is wrong, under the fit's normal posterior: probability, "
        "its Monte Carlo se, draws, each entity's share of draws in the top k (`in_top_k`, by entity position); a "
        "`reason` instead of a probability when it cannot be estimated. Null before the run finishes, and for runs "
        "finished before it was computed."
    )
    order_disagreements = serializers.SerializerMethodField(
        help_text="Usable pairs whose two presentation orders favoured the same position (the verdict flipped)."
    )
    order_pairs = serializers.SerializerMethodField(help_text="Usable pairs judged in both orders.")
    order_residual = serializers.SerializerMethodField(
        help_text="Signed order residual: mean of (log(a/b) shown a first + log(b/a) shown b first) / 2, natural "
        "log; positive when the item shown first is favoured. Null before the run finishes."
    )
    created_at = serializers.DateTimeField()

    def _order(self, run: AttributeRun) -> dict[str, Any]:
        return dict((run.solve or {}).get("order") or {})

    @extend_schema_field(serializers.DictField(allow_null=True))
    def get_top_k_error(self, run: AttributeRun) -> dict[str, Any] | None:
        value = (run.solve or {}).get("top_k_error")
        return dict(value) if isinstance(value, dict) else None

    def get_order_disagreements(self, run: AttributeRun) -> int | None:
        return self._order(run).get("disagreements")

    def get_order_pairs(self, run: AttributeRun) -> int | None:
        return self._order(run).get("pairs")

    def get_order_residual(self, run: AttributeRun) -> float | None:
        return self._order(run).get("signed_residual")

    started_at = serializers.DateTimeField(allow_null=True)


RUN_EXAMPLE = {
    "id": 12,
    "board_id": 4,
    "judge": BOARD_EXAMPLE["judge"],
    "attribute": "how formal the reply is",
    "rubric_hash": "9c1f" + "0" * 60,
    "template_hash": "51aa" + "0" * 60,
    "model_name": "qwen2.5-7b",
    "seed": 0,
    "top_k": 10,
    "batch_size": 16,
    "entities": 50,
    "budget_calls": 400,
    "status": "done",
    "stop_reason": "budget",
    "failure_reason": "",
    "calls": 400,
    "accepted": 382,
    "refused": 10,
    "malformed": 8,
    "call_errors": 0,
    "pairs": 200,
    "pairs_refused": 11,
    "checks": 14,
    "output_tokens": 9120,
    "call_seconds": 61.2,
    "degraded": False,
    "solve": {"hash": "e3b0" + "0" * 60, "components": 1, "cyclic_share": 0.04},
    "order_disagreements": 9,
    "order_pairs": 189,
    "order_residual": 0.031,
    "created_at": "2026-12-01T12:00:00Z",
    "started_at": "2026-12-01T12:00:01Z",
    "finished_at": "2026-12-01T12:01:10Z",
}


class AttributeRunsApi(APIView):
    parser_classes = [JSONParser]

    class Input(serializers.Serializer[Any]):
        judge_id = StrictIntegerField(
            required=False, help_text="Another ratio judge of the board's organisation (default: the board's)."
        )
        seed = StrictIntegerField(
            required=False, min_value=0, max_value=2**31 - 1, help_text="Default: the board's seed."
        )

    @extend_schema(
        operation_id="attribute_board_runs_list",
        tags=["attribute boards"],
        summary="A board's runs",
        description="Newest first, with their provenance and counts.",
        parameters=PAGE_PARAMETERS,
        responses={200: page_of(AttributeRunOutput)},
    )
    def get(self, request: Request, board_id: int) -> Response:
        board = _attribute_board(request, board_id)
        PageQuery(data=request.query_params).is_valid(raise_exception=True)
        return cursor_page(  # type: ignore[no-any-return]
            request=request,
            view=self,
            queryset=AttributeRun.objects.filter(board=board).select_related("judge__rubric", "judge__endpoint"),
            output=AttributeRunOutput,
        )

    @extend_schema(
        operation_id="attribute_board_run_start",
        tags=["attribute boards"],
        summary="Start a run",
        description="Queues a run (202); a worker judges pairs chosen by the adaptive design until the "
        "certified stopping rule or the budget. Another judge or seed makes a replication (compare the "
        "runs). Audited. Needs a write key, or an owner or manager.",
        request=Input,
        responses={202: AttributeRunOutput},
        examples=[
            OpenApiExample("A replication with another seed", request_only=True, value={"seed": 7}),
            OpenApiExample("Queued", response_only=True, value={**RUN_EXAMPLE, "status": "queued", "calls": 0}),
        ],
    )
    def post(self, request: Request, board_id: int) -> Response:
        board = _attribute_board_writable(request, board_id)
        body = self.Input(data=request.data)
        body.is_valid(raise_exception=True)
        judge = None
        if "judge_id" in body.validated_data:
            judge = selectors.judge_writable_by(user=_principal(request), judge_id=body.validated_data["judge_id"])
            if judge is None or judge.organization_id != board.organization_id:
                raise Invalid("No such judge.", field_errors={"judge_id": "Not a judge of this board's organisation."})
        actor, via = _actor_via(request)
        run = services.attribute_run_start(
            board=board, actor=actor, judge=judge, seed=body.validated_data.get("seed"), via=via
        )
        return Response(AttributeRunOutput(run).data, status=status.HTTP_202_ACCEPTED)


class AttributeRunDetailApi(APIView):
    @extend_schema(
        operation_id="attribute_run_read",
        tags=["attribute boards"],
        summary="A run, with its provenance",
        responses={200: AttributeRunOutput},
        examples=[OpenApiExample("Finished", value=RUN_EXAMPLE)],
    )
    def get(self, request: Request, run_id: int) -> Response:
        return Response(AttributeRunOutput(_attribute_run(request, run_id)).data)


class ScoreProvenanceOutput(RunProvenanceFields):
    """The run a score row comes from, on the row itself: a row copied out of the API (into a sheet, a
    report) still says which judge, template, seed and counts made it."""

    run_id = serializers.IntegerField(source="id")
    solve_hash = serializers.SerializerMethodField(help_text="Hash of the final solve (same observations: same hash).")

    def get_solve_hash(self, run: AttributeRun) -> str:
        return str((run.solve or {}).get("hash", ""))


class AttributeScoreOutput(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    entity_id = serializers.IntegerField()
    position = serializers.IntegerField(source="entity.position")
    label = serializers.CharField(source="entity.label")  # type: ignore[assignment]
    rank = serializers.IntegerField()
    score = serializers.FloatField(help_text="Natural-log attribute; the lowest entity of a component is 0.")
    std = serializers.FloatField(allow_null=True)
    z_score = serializers.FloatField(allow_null=True, help_text="Standard deviations above the top-k boundary.")
    percentile = serializers.FloatField()
    lower = serializers.FloatField(allow_null=True, help_text="95% interval.")
    upper = serializers.FloatField(allow_null=True)
    in_top_k = serializers.BooleanField()
    comparisons = serializers.IntegerField()
    stop_reason = serializers.CharField()
    provenance = ScoreProvenanceOutput(source="run")


class AttributeRunScoresApi(APIView):
    @extend_schema(
        operation_id="attribute_run_scores",
        tags=["attribute boards"],
        summary="A run's scores",
        description="Best first (by rank), in cursor pages. Empty for a run that has not finished or failed.",
        parameters=PAGE_PARAMETERS,
        responses={200: page_of(AttributeScoreOutput)},
    )
    def get(self, request: Request, run_id: int) -> Response:
        run = _attribute_run(request, run_id)
        PageQuery(data=request.query_params).is_valid(raise_exception=True)
        return cursor_page(  # type: ignore[no-any-return]
            request=request,
            view=self,
            queryset=AttributeScore.objects.filter(run=run).select_related(
                "entity", "run__judge__endpoint", "run__judge__rubric"
            ),
            output=AttributeScoreOutput,
            ordering="rank",
        )


class AttributeJudgementOutput(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    run_id = serializers.IntegerField()
    first_id = serializers.IntegerField(help_text="The entity shown as A.")
    second_id = serializers.IntegerField(help_text="The entity shown as B.")
    order = serializers.IntegerField(help_text="1: the pair's first presentation, 2: swapped.")
    batch = serializers.IntegerField()
    status = serializers.ChoiceField(choices=AttributeJudgement.Status.values)
    raw_reply = serializers.CharField()
    more = serializers.CharField()
    ratio = serializers.FloatField(allow_null=True)
    log_ratio = serializers.FloatField(allow_null=True, help_text="log(A / B).")
    confidence = serializers.FloatField(allow_null=True, help_text="As stated; never a weight.")
    used = serializers.BooleanField(help_text="Reached the estimator (both orders of the pair accepted).")
    reason = serializers.CharField()
    output_tokens = serializers.IntegerField()
    latency_s = serializers.FloatField()
    created_at = serializers.DateTimeField()


class AttributeRunJudgementsApi(APIView):
    @extend_schema(
        operation_id="attribute_run_judgements",
        tags=["attribute boards"],
        summary="A run's judgement ledger",
        description="Every judge call of the run in the order made: both presentation orders, the raw reply, "
        "the parse (or the refusal, the malformed reply, the call's error), tokens and latency. Append-only.",
        parameters=PAGE_PARAMETERS,
        responses={200: page_of(AttributeJudgementOutput)},
    )
    def get(self, request: Request, run_id: int) -> Response:
        run = _attribute_run(request, run_id)
        PageQuery(data=request.query_params).is_valid(raise_exception=True)
        return cursor_page(  # type: ignore[no-any-return]
            request=request,
            view=self,
            queryset=AttributeJudgement.objects.filter(run=run),
            output=AttributeJudgementOutput,
            ordering="id",
        )


class RunComparisonOutput(serializers.Serializer[Any]):
    run = serializers.IntegerField()
    other = serializers.IntegerField()
    kind = serializers.ChoiceField(choices=["seeds", "judges"], help_text="Same judge (seeds) or two judges.")
    entities = serializers.IntegerField(help_text="Entities both runs scored.")
    spearman = serializers.FloatField(allow_null=True)
    top_k_overlap = serializers.FloatField(allow_null=True)
    shared_pairs = serializers.IntegerField()
    pair_sign_agreement = serializers.FloatField(allow_null=True)


class AttributeRunCompareApi(APIView):
    @extend_schema(
        operation_id="attribute_run_compare",
        tags=["attribute boards"],
        summary="Replication between two runs of one board",
        description="Spearman's rho of the scores, top-k overlap, and on pairs both runs judged the share whose "
        "log-ratios agree in sign. Two seeds of one judge, or two judges (their agreement). 404 when the runs "
        "are of different boards.",
        responses={200: RunComparisonOutput},
    )
    def get(self, request: Request, run_id: int, other_id: int) -> Response:
        run, other = _attribute_run(request, run_id), _attribute_run(request, other_id)
        if run.board_id != other.board_id:
            raise Http404("The runs are of different boards.")
        return Response(RunComparisonOutput(selectors.attribute_runs_compare(run=run, other=other)).data)
