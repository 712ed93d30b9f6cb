"""Judges and their runs: the judges, a campaign's judge runs (list, start, one) and a run's verdicts
(boards and calibration: ``ranking.apis``)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.http import Http404
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.exceptions import ValidationError as ApiValidationError
from rest_framework.parsers import JSONParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api import ErrorOutput, cursor_page, limit_parameter, page_of

from .. import selectors, services
from ..models import JudgeRun
from .access import _campaign, _principal


class RubricOutput(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    name = serializers.CharField()
    version = serializers.IntegerField()
    kind = serializers.CharField()
    question = serializers.CharField()
    instructions = serializers.CharField()
    content_hash = serializers.CharField()
    created_at = serializers.DateTimeField()


class JudgeOutput(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    name = serializers.CharField()
    model = serializers.CharField(source="endpoint.model_name")
    model_version = serializers.CharField(source="endpoint.model_version")
    family = serializers.CharField()
    excluded_families = serializers.SerializerMethodField(
        help_text="Families it never judges: the configured ones and its own (its family, else its model names)."
    )
    temperature = serializers.FloatField()
    max_tokens = serializers.IntegerField()
    active = serializers.BooleanField()
    rubric = RubricOutput()
    created_at = serializers.DateTimeField()

    def get_excluded_families(self, judge: Any) -> list[str]:
        return sorted(judge.families_excluded())


class JudgeRunStatsOutput(serializers.Serializer[Any]):
    order_disagreement_rate = serializers.FloatField(allow_null=True, help_text="Judged pairs whose orders disagreed.")
    position_bias = serializers.FloatField(
        allow_null=True, help_text="(first - second) / decisive replies: +1 always the first answer, 0 none."
    )
    first_position_share = serializers.FloatField(allow_null=True)
    refusal_rate = serializers.FloatField(allow_null=True, help_text="Replies that were not the strict JSON.")
    failure_rate = serializers.FloatField(allow_null=True, help_text="Calls that got no reply.")
    pair_refusal_rate = serializers.FloatField(allow_null=True)
    tokens = serializers.IntegerField()
    input_tokens = serializers.IntegerField()
    output_tokens = serializers.IntegerField()
    call_wall_seconds = serializers.FloatField(
        help_text="The judge calls' wall-clock latencies, summed: not GPU time (calls overlap, servers batch)."
    )


class JudgeRunOutput(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    campaign_id = serializers.IntegerField()
    judge_id = serializers.IntegerField()
    judge = serializers.CharField(source="judge.name")
    rubric_id = serializers.IntegerField()
    rubric_version = serializers.IntegerField(source="rubric.version")
    rubric_hash = serializers.CharField(source="rubric.content_hash")
    kind = serializers.CharField()
    status = serializers.CharField()
    seed = serializers.IntegerField()
    competitor_ids = serializers.ListField(child=serializers.IntegerField())
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    error = serializers.CharField()
    pairs_total = serializers.IntegerField()
    pairs_judged = serializers.IntegerField()
    pairs_refused = serializers.IntegerField()
    pairs_inconsistent = serializers.IntegerField()
    pairs_excluded_family = serializers.IntegerField(
        help_text="Pairs skipped: a side served by the judge's own model (its endpoint, or the same model name), "
        "or of a family it excludes."
    )
    calls = serializers.IntegerField()
    calls_refused = serializers.IntegerField()
    calls_failed = serializers.IntegerField()
    stats = serializers.SerializerMethodField()

    @extend_schema_field(JudgeRunStatsOutput)
    def get_stats(self, run: Any) -> dict[str, Any]:
        # A run still going has no stored stats yet: the same rates, from its counters so far.
        return dict(run.stats or run.stats_derived())


JUDGE_RUN_EXAMPLE = {
    "id": 7,
    "campaign_id": 12,
    "judge_id": 3,
    "judge": "helpfulness judge",
    "rubric_id": 5,
    "rubric_version": 2,
    "rubric_hash": "9f2c...",
    "kind": "battles",
    "status": "done",
    "seed": 0,
    "competitor_ids": [],
    "created_at": "2026-12-01T12:00:00Z",
    "started_at": "2026-12-01T12:00:01Z",
    "finished_at": "2026-12-01T12:03:00Z",
    "error": "",
    "pairs_total": 200,
    "pairs_judged": 190,
    "pairs_refused": 10,
    "pairs_inconsistent": 21,
    "pairs_excluded_family": 0,
    "calls": 400,
    "calls_refused": 11,
    "calls_failed": 0,
    "stats": {
        "order_disagreement_rate": 0.1105,
        "position_bias": 0.08,
        "first_position_share": 0.54,
        "refusal_rate": 0.0275,
        "failure_rate": 0.0,
        "pair_refusal_rate": 0.05,
        "tokens": 160000,
        "input_tokens": 150000,
        "output_tokens": 10000,
        "call_wall_seconds": 95.2,
    },
}


class _PageQuery(serializers.Serializer[Any]):
    limit = serializers.IntegerField(required=False, min_value=1, max_value=500)
    cursor = serializers.CharField(required=False)


PAGE_PARAMETERS = [
    limit_parameter("Items"),
    OpenApiParameter("cursor", str, description="From the previous page's `next`."),
]


class JudgeListApi(APIView):
    """``GET /api/v1/judges/``: the judges of the caller's organisations, each with its rubric version."""

    @extend_schema(
        operation_id="judges_list",
        summary="Judges",
        description="Judges (a served model, one rubric version, temperature 0) of the organisations the caller "
        "may read, newest first, in cursor pages. A retired judge (its rubric has a newer version) is inactive.",
        parameters=PAGE_PARAMETERS,
        responses={200: page_of(JudgeOutput)},
        tags=["judges"],
    )
    def get(self, request: Request) -> Response:
        _PageQuery(data=request.query_params).is_valid(raise_exception=True)
        return cursor_page(  # type: ignore[no-any-return]
            request=request,
            view=self,
            queryset=selectors.judges_viewable_by(_principal(request)),
            output=JudgeOutput,
            ordering="-id",
        )


class JudgeDetailApi(APIView):
    @extend_schema(
        operation_id="judge_read",
        summary="One judge",
        description="The judge, its model and its rubric version (404 outside the caller's organisations).",
        responses={200: JudgeOutput, 404: ErrorOutput},
        tags=["judges"],
    )
    def get(self, request: Request, judge_id: int) -> Response:
        judge = selectors.judge_viewable_by(user=_principal(request), judge_id=judge_id)
        if judge is None:
            raise Http404("No such judge.")
        return Response(JudgeOutput(judge).data)


class JudgeRunListCreateApi(APIView):
    """``GET``: the campaign's judge runs with their stats, newest first. ``POST``: start one (202)."""

    parser_classes = [JSONParser]

    class Input(serializers.Serializer[Any]):
        judge_id = serializers.IntegerField(min_value=1)
        kind = serializers.ChoiceField(choices=JudgeRun.Kind.values, default=JudgeRun.Kind.BATTLES)
        seed = serializers.IntegerField(min_value=0, max_value=2**31 - 1, default=0)
        competitor_ids = serializers.ListField(
            child=serializers.IntegerField(min_value=1),
            required=False,
            default=list,
            max_length=100,
            help_text="Golden runs: the competitors that answer (default: the campaign's active ones).",
        )

    @extend_schema(
        operation_id="judge_runs_list",
        summary="Judge runs of a campaign",
        description="Runs newest first, in cursor pages, each with its counters and rates: order disagreement, "
        "signed position bias, refusal rate, tokens and model seconds.",
        parameters=PAGE_PARAMETERS,
        responses={200: page_of(JudgeRunOutput)},
        examples=[
            OpenApiExample(
                "A finished run",
                value={"next": None, "previous": None, "results": [JUDGE_RUN_EXAMPLE]},
                response_only=True,
            )
        ],
        tags=["judges"],
    )
    def get(self, request: Request, campaign_id: int) -> Response:
        campaign = _campaign(request, campaign_id)
        _PageQuery(data=request.query_params).is_valid(raise_exception=True)
        return cursor_page(  # type: ignore[no-any-return]
            request=request,
            view=self,
            queryset=selectors.judge_runs_for(campaign=campaign),
            output=JudgeRunOutput,
            ordering="-id",
        )

    @extend_schema(
        operation_id="judge_runs_create",
        summary="Start a judge run",
        description="Queues a run of the judge over the campaign: `kind` battles (every judgeable battle, each "
        "judged in both presentation orders) or golden (each competitor answers every active pool prompt once, "
        "then every pair of answers is judged). Answers 202 with the run; poll it until `status` is done or "
        "failed. The judge's board and calibration follow. Audited; needs a write key, or an owner or manager.",
        request=Input,
        responses={202: JudgeRunOutput, 400: ErrorOutput, 404: ErrorOutput},
        examples=[
            OpenApiExample("Judge the battles", value={"judge_id": 3}, request_only=True),
            OpenApiExample("Queued", value={**JUDGE_RUN_EXAMPLE, "status": "queued"}, response_only=True),
        ],
        tags=["judges"],
    )
    def post(self, request: Request, campaign_id: int) -> Response:
        principal = _principal(request)
        campaign = selectors.campaign_writable_by(user=principal, campaign_id=campaign_id)
        if campaign is None:
            raise Http404("No such campaign.")
        data = self.Input(data=request.data)
        data.is_valid(raise_exception=True)
        judge = selectors.judge_viewable_by(user=principal, judge_id=data.validated_data["judge_id"])
        if judge is None or judge.organization_id != campaign.organization_id:
            raise ApiValidationError({"judge_id": ["No such judge in the campaign's organisation."]})
        run = services.judge_run_create(
            judge=judge,
            campaign=campaign,
            actor=principal if isinstance(principal, User) else None,
            kind=data.validated_data["kind"],
            seed=data.validated_data["seed"],
            competitor_ids=data.validated_data["competitor_ids"],
        )
        return Response(JudgeRunOutput(run).data, status=status.HTTP_202_ACCEPTED)


class JudgeRunDetailApi(APIView):
    @extend_schema(
        operation_id="judge_run_read",
        summary="One judge run",
        description="The run with its counters and rates.",
        responses={200: JudgeRunOutput, 404: ErrorOutput},
        examples=[OpenApiExample("A finished run", value=JUDGE_RUN_EXAMPLE, response_only=True)],
        tags=["judges"],
    )
    def get(self, request: Request, campaign_id: int, run_id: int) -> Response:
        run = selectors.judge_run_for(campaign=_campaign(request, campaign_id), run_id=run_id)
        if run is None:
            raise Http404("No such judge run.")
        return Response(JudgeRunOutput(run).data)


class JudgeVerdictOutput(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    run_id = serializers.IntegerField()
    judge_id = serializers.IntegerField()
    rubric_id = serializers.IntegerField()
    rubric_version = serializers.IntegerField()
    rubric_hash = serializers.CharField()
    battle_id = serializers.UUIDField(allow_null=True, help_text="Null for a golden run's pair (no battle).")
    prompt_id = serializers.IntegerField()
    category = serializers.CharField()
    left_id = serializers.IntegerField(help_text="The competitor on the battle's left (golden: the lower id).")
    right_id = serializers.IntegerField()
    choice = serializers.CharField(
        help_text="The counterbalanced verdict on the sides: left, right, tie, both_bad; empty when refused."
    )
    consistent = serializers.BooleanField(help_text="Both presentation orders gave the same verdict.")
    refused = serializers.BooleanField(help_text="Either order's reply was not the strict JSON, or its call failed.")
    refusal = serializers.CharField(help_text="Why the pair was refused.")
    verdict_ab = serializers.CharField(
        help_text="Order ab (left answer shown first), in the judge's frame: A (first), B, tie, both_bad; "
        "empty when refused."
    )
    verdict_ba = serializers.CharField(help_text="Order ba (right answer shown first), in the judge's frame.")
    reply_ab = serializers.CharField(help_text="The judge's raw reply in order ab, verbatim.")
    reply_ba = serializers.CharField(help_text="The judge's raw reply in order ba, verbatim.")
    input_tokens = serializers.IntegerField()
    output_tokens = serializers.IntegerField()
    latency_s = serializers.FloatField(help_text="Both calls' model time.")
    created_at = serializers.DateTimeField()


JUDGE_VERDICT_EXAMPLE = {
    "id": 901,
    "run_id": 7,
    "judge_id": 3,
    "rubric_id": 5,
    "rubric_version": 2,
    "rubric_hash": "9f2c...",
    "battle_id": "6f1d2c3e-9a4b-4c1f-8d2e-1a2b3c4d5e6f",
    "prompt_id": 88,
    "category": "coding",
    "left_id": 40,
    "right_id": 41,
    "choice": "tie",
    "consistent": False,
    "refused": False,
    "refusal": "",
    "verdict_ab": "A",
    "verdict_ba": "A",
    "reply_ab": '{"verdict": "A", "reason": "answers the question"}',
    "reply_ba": '{"verdict": "A", "reason": "more complete"}',
    "input_tokens": 812,
    "output_tokens": 24,
    "latency_s": 0.61,
    "created_at": "2026-12-01T12:01:00Z",
}


class JudgeRunVerdictsApi(APIView):
    """``GET``: one judge run's verdicts, the judge votes' log (both orders' raw replies included)."""

    @extend_schema(
        operation_id="judge_run_verdicts_list",
        summary="A judge run's verdicts",
        description="Every pair the run asked its judge about, in the order they were appended, in cursor pages: "
        "both presentation orders' raw replies and verdicts, the counterbalanced verdict on the sides "
        "(an order disagreement is a tie, `consistent` false), refusals with their reason, tokens and model "
        "time. Read as the run itself is (404 outside the caller's organisations).",
        parameters=PAGE_PARAMETERS,
        responses={200: page_of(JudgeVerdictOutput), 404: ErrorOutput},
        examples=[
            OpenApiExample(
                "An order disagreement (counted a tie)",
                value={"next": None, "previous": None, "results": [JUDGE_VERDICT_EXAMPLE]},
                response_only=True,
            )
        ],
        tags=["judges"],
    )
    def get(self, request: Request, campaign_id: int, run_id: int) -> Response:
        run = selectors.judge_run_for(campaign=_campaign(request, campaign_id), run_id=run_id)
        if run is None:
            raise Http404("No such judge run.")
        _PageQuery(data=request.query_params).is_valid(raise_exception=True)
        return cursor_page(  # type: ignore[no-any-return]
            request=request,
            view=self,
            queryset=selectors.judge_verdicts_of(run),
            output=JudgeVerdictOutput,
            ordering="id",
        )
