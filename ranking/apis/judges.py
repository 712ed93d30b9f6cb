"""Judges' boards and calibration (the judges and their runs: ``battles.apis``)."""

from __future__ import annotations

from typing import Any

from django.http import Http404
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from battles.models import Campaign, Judge
from core.api import ErrorOutput

from .. import estimators as est
from .. import selectors
from ..models import JudgeCalibration
from .access import _campaign
from .leaderboards import LeaderboardRowOutput


class CalibrationOutput(serializers.Serializer[Any]):
    """One category of a calibration (empty category: all of them)."""

    category = serializers.CharField(help_text="Empty: all categories.")
    version = serializers.IntegerField()
    rubric_id = serializers.IntegerField()
    rubric_version = serializers.IntegerField(source="rubric.version")
    rubric_hash = serializers.CharField(source="rubric.content_hash")
    run_id = serializers.IntegerField(allow_null=True)
    battles = serializers.IntegerField(help_text="Battles with a human vote and a verdict of the judge.")
    refused = serializers.IntegerField(help_text="Human-voted battles the judge refused (left out).")
    agreement = serializers.FloatField(allow_null=True, help_text="Share of battles where judge and human agree.")
    agreement_lower = serializers.FloatField(allow_null=True, help_text="95% Wilson interval.")
    agreement_upper = serializers.FloatField(allow_null=True)
    kappa = serializers.FloatField(allow_null=True, help_text="Cohen's kappa on left, right, tie, both_bad.")
    kappa_lower = serializers.FloatField(allow_null=True)
    kappa_upper = serializers.FloatField(allow_null=True)
    kappa_note = serializers.CharField(help_text="Why kappa is missing, when it is.")
    gate = serializers.ChoiceField(
        choices=JudgeCalibration.Gate.values,
        help_text="Read from the agreement's 95% Wilson interval (`gate_rule`): may_run_alone (lower end >= 0.90), "
        "with_humans (lower end >= 0.75), needs_work (upper end < 0.75), insufficient (the interval spans 0.75, "
        "or < 20 battles).",
    )
    human_votes = serializers.SerializerMethodField(
        help_text="Human votes (never gold) on the battles the judge has a verdict for: human_votes = used + "
        "refused + excluded.total."
    )
    used = serializers.SerializerMethodField(help_text="Human votes compared with a verdict (= battles).")
    excluded = serializers.SerializerMethodField(
        help_text="Human votes left out by the campaign's exclusion policy, as the human board leaves them out: per "
        "rule (flagged_rater, too_fast, identity_leak, over_prompt_cap, over_rater_cap; a vote may break several) "
        "and total (each vote once). Null for a calibration made before this account was kept."
    )
    table = serializers.ListField(
        child=serializers.ListField(child=serializers.IntegerField()),
        help_text="4 x 4 counts, rows human, columns judge: left, right, tie, both_bad.",
    )
    created_at = serializers.DateTimeField()

    @staticmethod
    def _account(row: JudgeCalibration) -> dict[str, Any]:
        account: dict[str, Any] = (row.extra or {}).get("human_votes") or {}
        return account

    @extend_schema_field(serializers.IntegerField(allow_null=True))
    def get_human_votes(self, row: JudgeCalibration) -> int | None:
        value = self._account(row).get("human_votes")
        return None if value is None else int(value)

    @extend_schema_field(serializers.IntegerField(allow_null=True))
    def get_used(self, row: JudgeCalibration) -> int | None:
        value = self._account(row).get("used")
        return None if value is None else int(value)

    @extend_schema_field(serializers.DictField(child=serializers.IntegerField(), allow_null=True))
    def get_excluded(self, row: JudgeCalibration) -> dict[str, int] | None:
        value = self._account(row).get("excluded")
        return None if value is None else {str(k): int(v) for k, v in value.items()}


class JudgeCalibrationOutput(serializers.Serializer[Any]):
    campaign = serializers.IntegerField()
    judge = serializers.IntegerField()
    gates = serializers.DictField(child=serializers.FloatField(), help_text="The agreement thresholds.")
    gate_rule = serializers.CharField(help_text="How a gate is read from the agreement's interval.")
    gate_confidence = serializers.FloatField(help_text="The interval's level (its ends are the gates' evidence).")
    policy = serializers.DictField(
        allow_null=True,
        help_text="The exclusion policy the human votes were kept under (the human board's, as its snapshots "
        "store it); null before the first calibration.",
    )
    results = CalibrationOutput(many=True)


class JudgeBoardOutput(serializers.Serializer[Any]):
    campaign = serializers.IntegerField(source="campaign_id")
    judge = serializers.IntegerField(source="judge_id")
    judge_name = serializers.CharField(source="judge.name")
    rubric_id = serializers.IntegerField()
    rubric_version = serializers.IntegerField(source="rubric.version")
    rubric_hash = serializers.CharField(source="rubric.content_hash")
    run_id = serializers.IntegerField(allow_null=True)
    kind = serializers.CharField(help_text="battles or golden.")
    version = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    verdicts_total = serializers.IntegerField()
    verdicts_used = serializers.IntegerField()
    verdicts_refused = serializers.IntegerField()
    verdicts_inconsistent = serializers.IntegerField(help_text="Order disagreements, ranked as ties.")
    method = serializers.DictField()
    rows = LeaderboardRowOutput(many=True)
    extra = serializers.DictField()
    calibration = serializers.SerializerMethodField(help_text="The judge's newest calibration on this campaign.")

    @extend_schema_field(CalibrationOutput(many=True))
    def get_calibration(self, board: Any) -> Any:
        return CalibrationOutput(self.context["calibration"], many=True).data


class JudgeBoardInput(serializers.Serializer[Any]):
    kind = serializers.ChoiceField(choices=["battles", "golden"], required=False, default="battles")


def _judge_of(campaign: Campaign, judge_id: int) -> Judge:
    judge = selectors.judge_of_campaign(campaign=campaign, judge_id=judge_id)
    if judge is None:
        raise Http404("No such judge.")
    return judge


class JudgeBoardApi(APIView):
    @extend_schema(
        operation_id="judge_board",
        tags=["judges"],
        summary="A judge's leaderboard of a campaign",
        description="The newest board of the judge's counterbalanced verdicts (the human boards' estimator; no "
        "human vote in it, and no human board has a judge's verdict), with the judge's newest calibration. "
        "`kind` golden: the newest golden run's board. 404 before the judge's first run.",
        parameters=[OpenApiParameter("kind", str, enum=["battles", "golden"], description="Default battles.")],
        responses={200: JudgeBoardOutput, 404: ErrorOutput},
    )
    def get(self, request: Request, campaign_id: int, judge_id: int) -> Response:
        campaign = _campaign(request, campaign_id)
        judge = _judge_of(campaign, judge_id)
        query = JudgeBoardInput(data=request.query_params)
        query.is_valid(raise_exception=True)
        board = selectors.judge_board_latest(campaign=campaign, judge=judge, kind=query.validated_data["kind"])
        if board is None:
            raise Http404("This judge has no board on this campaign yet.")
        names = selectors.competitor_names(campaign=campaign)
        board.rows = selectors.snapshot_rows(snapshot=board, names=names)
        calibration = selectors.judge_calibration_latest(campaign=campaign, judge=judge)
        return Response(JudgeBoardOutput(board, context={"calibration": calibration}).data)


class JudgeCalibrationApi(APIView):
    @extend_schema(
        operation_id="judge_calibration",
        tags=["judges"],
        summary="A judge's agreement with the human votes",
        description="The newest calibration of the judge on the campaign: per category (and overall, empty "
        "category), agreement with the human votes on the battles both judged, Cohen's kappa, and the gate. "
        "The human votes are exactly those the human board uses (the campaign's exclusion policy: flagged "
        "raters, too-fast votes, identity leaks, caps; never gold); each result says how many were used and "
        "how many were left out, by which rule. A gate is passed only when the agreement's interval supports "
        "it (`gate_rule`). A calibration belongs to the judge's rubric version; `results` is empty before the "
        "first.",
        responses={200: JudgeCalibrationOutput, 404: ErrorOutput},
    )
    def get(self, request: Request, campaign_id: int, judge_id: int) -> Response:
        campaign = _campaign(request, campaign_id)
        judge = _judge_of(campaign, judge_id)
        rows = selectors.judge_calibration_latest(campaign=campaign, judge=judge)
        return Response(
            JudgeCalibrationOutput(
                {
                    "campaign": campaign.pk,
                    "judge": judge.pk,
                    "gates": {"needs_work_below": est.GATE_NEEDS_WORK, "may_run_alone_from": est.GATE_ALONE},
                    "gate_rule": est.GATE_RULE,
                    "gate_confidence": est.GATE_CONFIDENCE,
                    "policy": (rows[0].extra or {}).get("policy") if rows else None,
                    "results": rows,
                }
            ).data
        )
