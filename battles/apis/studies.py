"""Crowd studies: a campaign's studies (list, create, retrieve, close) and their participants' progress.

People: owners and managers of the campaign's organisation (participants' vendor ids are for those who
pay them); keys: their organisation's, a read key reading only. Another organisation's is 404."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound as ApiNotFound
from rest_framework.parsers import JSONParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api import ErrorOutput, cursor_page, limit_parameter, page_of
from core.site import site_url
from raters.authentication import ApiKeyPrincipal

from .. import selectors, services
from ..models import Campaign, Participant, Study
from .access import _principal
from .fields import StrictCharField, StrictIntegerField


def _study_campaign(request: Request, campaign_id: int, *, write: bool = False) -> Campaign:
    principal = _principal(request)
    if isinstance(principal, ApiKeyPrincipal) and not write:
        campaign = selectors.campaign_viewable_by(user=principal, campaign_id=campaign_id)
    else:
        campaign = selectors.campaign_writable_by(user=principal, campaign_id=campaign_id)
    if campaign is None:
        raise ApiNotFound("No such campaign.")
    return campaign


def _study(request: Request, campaign_id: int, study_id: int, *, write: bool = False) -> Study:
    study = selectors.study_of(campaign=_study_campaign(request, campaign_id, write=write), study_id=study_id)
    if study is None:
        raise ApiNotFound("No such study.")
    return study


class StudyProgressOutput(serializers.Serializer[Any]):
    participants = serializers.IntegerField(help_text="Everyone who entered through the link.")
    active = serializers.IntegerField(help_text="Rating now (entered, not completed, not ended).")
    completed = serializers.IntegerField(help_text="Reached the target and were shown the code.")
    declined = serializers.IntegerField(help_text="Did not agree to the consent text.")
    timed_out = serializers.IntegerField(help_text="Ran out of time before the target.")
    left = serializers.IntegerField(help_text="Left (returned) the study before the target: no code.")
    votes = serializers.IntegerField(help_text="Votes the participants cast in the campaign.")
    voided_battles = serializers.IntegerField(
        help_text="Their battles that were voided (time ran out, left, a model failed, an answer was refused)."
    )


class StudyOutput(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    campaign = serializers.IntegerField(source="campaign_id")
    name = serializers.CharField()
    vendor = serializers.ChoiceField(choices=Study.Vendor.values)
    pool = serializers.IntegerField(source="pool_id", help_text="The rater pool participants join.")
    target_votes = serializers.IntegerField()
    time_limit_min = serializers.IntegerField()
    completion_code = serializers.CharField()
    completion_url = serializers.CharField(help_text="Other vendors: the template with {code}; Prolific: empty.")
    completion_link = serializers.SerializerMethodField(help_text="Where participants are sent at the end.")
    instructions = serializers.CharField(allow_blank=True)
    consent_text = serializers.CharField(allow_blank=True)
    attribute_parameters = serializers.DictField(
        child=serializers.CharField(),
        help_text="Link parameter -> rater attribute key read when a participant first arrives (rater-segment boards).",
    )
    active = serializers.BooleanField(help_text="False once closed: the link answers 'not found'.")
    entry_path = serializers.CharField(source="path", help_text="The link's path on this site (see `entry_url`).")
    entry_url = serializers.SerializerMethodField(
        help_text="The link to hand out, absolute: under ARENA_SITE_URL, else the address this request came to."
    )
    created_at = serializers.DateTimeField()
    progress = serializers.SerializerMethodField()

    def get_completion_link(self, study: Study) -> str:
        return study.completion_link()

    def get_entry_url(self, study: Study) -> str:
        return site_url(study.path, request=self.context.get("request"))

    @extend_schema_field(StudyProgressOutput)
    def get_progress(self, study: Study) -> dict[str, int]:
        return selectors.study_progress(study)


class ParticipantQualificationOutput(serializers.Serializer[Any]):
    status = serializers.ChoiceField(
        choices=["passed", "failed", "pending"],
        help_text="pending: still answering the qualification's gold battles (no real battle yet).",
    )
    answered = serializers.IntegerField(help_text="Qualification battles answered (so far, while pending).")
    correct = serializers.IntegerField(help_text="Of those, answered as expected.")
    required_battles = serializers.IntegerField(help_text="The campaign's qualification battles (k).")
    pass_mark = serializers.FloatField(help_text="Share correct needed to pass (the one in force when decided).")


class ParticipantOutput(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    vendor_participant_id = serializers.CharField(help_text="PROLIFIC_PID or worker_id (for approving and paying).")
    vendor_study_id = serializers.CharField(allow_blank=True)
    external_session_id = serializers.CharField(allow_blank=True, help_text="SESSION_ID or assignment_id.")
    status = serializers.ChoiceField(choices=Participant.Status.values)
    entered_at = serializers.DateTimeField()
    consented_at = serializers.DateTimeField(allow_null=True)
    completed_at = serializers.DateTimeField(allow_null=True)
    ended_at = serializers.DateTimeField(allow_null=True, help_text="Declined, timed out or left.")
    deadline = serializers.DateTimeField(help_text="Entry plus the study's time limit.")
    votes = serializers.IntegerField(help_text="Votes cast in the study's campaign.")
    target = serializers.IntegerField(source="study.target_votes")
    complete = serializers.SerializerMethodField(help_text="Completed (reached the target and got the code).")
    voided = serializers.IntegerField(help_text="Their battles that were voided.")
    qualification = serializers.SerializerMethodField(
        help_text="The outcome of the campaign's qualification; null when the campaign asks for none."
    )

    def get_complete(self, participant: Participant) -> bool:
        return participant.status == Participant.Status.COMPLETED

    @extend_schema_field(ParticipantQualificationOutput(allow_null=True))
    def get_qualification(self, participant: Participant) -> dict[str, Any] | None:
        # From selectors.participants_progress's annotations: no query per participant.
        campaign = participant.study.campaign
        status = getattr(participant, "qualification_status", None)
        if status is None and campaign.qualification_battles <= 0:
            return None
        if status is None:
            return {
                "status": "pending",
                "answered": min(participant.gold_answered, campaign.qualification_battles),  # type: ignore[attr-defined]
                "correct": min(participant.gold_correct, campaign.qualification_battles),  # type: ignore[attr-defined]
                "required_battles": campaign.qualification_battles,
                "pass_mark": campaign.qualification_pass,
            }
        return {
            "status": status,
            "answered": participant.qualification_answered,  # type: ignore[attr-defined]
            "correct": participant.qualification_correct,  # type: ignore[attr-defined]
            "required_battles": participant.qualification_answered,  # type: ignore[attr-defined]  # k when decided
            "pass_mark": participant.qualification_threshold,  # type: ignore[attr-defined]
        }


STUDY_EXAMPLE = {
    "id": 4,
    "campaign": 3,
    "name": "Prolific wave 1",
    "vendor": "prolific",
    "pool": 9,
    "target_votes": 20,
    "time_limit_min": 60,
    "completion_code": "C7X9QK2",
    "completion_url": "",
    "completion_link": "https://app.prolific.com/submissions/complete?cc=C7X9QK2",
    "instructions": "Pick the better answer.",
    "consent_text": "",
    "attribute_parameters": {"lang": "language"},
    "active": True,
    "entry_path": "/s/k3Jd9sQ0vX2mN8pLr4tY6w/",
    "entry_url": "https://arena.example.org/s/k3Jd9sQ0vX2mN8pLr4tY6w/",
    "created_at": "2026-12-01T10:00:00Z",
    "progress": {
        "participants": 12,
        "active": 3,
        "completed": 8,
        "declined": 0,
        "timed_out": 1,
        "left": 0,
        "votes": 181,
        "voided_battles": 1,
    },
}


class StudyListCreateApi(APIView):
    """``GET``: the campaign's studies. ``POST``: a new study (write key, or an owner/manager)."""

    parser_classes = [JSONParser]

    class Input(serializers.Serializer[Any]):
        name = StrictCharField(max_length=200)
        vendor = serializers.ChoiceField(choices=Study.Vendor.values, default=Study.Vendor.PROLIFIC)
        pool = StrictIntegerField(min_value=1, help_text="A rater pool of the campaign.")
        target_votes = StrictIntegerField(min_value=1, max_value=100_000, default=20)
        time_limit_min = StrictIntegerField(min_value=1, max_value=24 * 60, default=60)
        completion_code = StrictCharField(max_length=64)
        completion_url = StrictCharField(max_length=500, required=False, default="", allow_blank=True)
        instructions = StrictCharField(max_length=50_000, required=False, default="", allow_blank=True)
        consent_text = StrictCharField(max_length=50_000, required=False, default="", allow_blank=True)
        attribute_parameters = serializers.DictField(
            child=StrictCharField(max_length=40),
            required=False,
            default=dict,
            help_text='Rater attributes to read from the link: {"link parameter": "attribute key"}, e.g. '
            '{"lang": "language"} (at most 10; not the vendor\'s id parameters).',
        )

    class PageQuery(serializers.Serializer[Any]):
        limit = serializers.IntegerField(required=False, min_value=1, max_value=500)
        cursor = serializers.CharField(required=False)

    @extend_schema(
        operation_id="studies_list",
        summary="A campaign's crowd studies",
        description="Each with its link, completion code and its participants' progress, newest first, in cursor "
        "pages. Owners and managers, or a key of the organisation.",
        parameters=[
            limit_parameter("Studies"),
            OpenApiParameter("cursor", str, description="From the previous page's `next`."),
        ],
        responses={200: page_of(StudyOutput)},
        examples=[
            OpenApiExample(
                "A study", value={"next": None, "previous": None, "results": [STUDY_EXAMPLE]}, response_only=True
            )
        ],
        tags=["studies"],
    )
    def get(self, request: Request, campaign_id: int) -> Response:
        campaign = _study_campaign(request, campaign_id)
        self.PageQuery(data=request.query_params).is_valid(raise_exception=True)
        return cursor_page(  # type: ignore[no-any-return]
            request=request, view=self, queryset=selectors.studies_of(campaign), output=StudyOutput, ordering="-id"
        )

    @extend_schema(
        operation_id="studies_create",
        summary="Create a crowd study",
        description="The same rules as the console: `pool` one of the campaign's rater pools, `target_votes` at "
        "most the campaign's session and per-rater caps, Prolific's completion URL fixed (leave it empty), another "
        "vendor's an https URL with `{code}`. Answers 201 with the study, its link in `entry_path`. Audited as "
        "`study.created`.",
        request=Input,
        responses={201: StudyOutput},
        examples=[
            OpenApiExample(
                "A Prolific wave",
                value={"name": "Prolific wave 1", "pool": 9, "target_votes": 20, "completion_code": "C7X9QK2"},
                request_only=True,
            ),
            OpenApiExample("Created", value={**STUDY_EXAMPLE, "progress": {}}, response_only=True),
        ],
        tags=["studies"],
    )
    def post(self, request: Request, campaign_id: int) -> Response:
        campaign = _study_campaign(request, campaign_id, write=True)
        body = self.Input(data=request.data)
        body.is_valid(raise_exception=True)
        fields = dict(body.validated_data)
        study = services.study_create(
            campaign=campaign, pool_id=fields.pop("pool"), actor=_principal(request), **fields
        )
        return Response(StudyOutput(study, context={"request": request}).data, status=status.HTTP_201_CREATED)


class StudyDetailApi(APIView):
    @extend_schema(
        operation_id="studies_retrieve",
        summary="A crowd study and its progress",
        responses={200: StudyOutput},
        examples=[OpenApiExample("A study", value=STUDY_EXAMPLE, response_only=True)],
        tags=["studies"],
    )
    def get(self, request: Request, campaign_id: int, study_id: int) -> Response:
        return Response(StudyOutput(_study(request, campaign_id, study_id), context={"request": request}).data)


class StudyCloseApi(APIView):
    @extend_schema(
        operation_id="studies_close",
        summary="Close a crowd study",
        description="Its link answers 'not found' from now on (nobody enters or comes back through it); votes, "
        "progress and codes stay. 409 if it is closed already. Audited as `study.closed`. No body.",
        request=None,
        responses={200: StudyOutput, 409: ErrorOutput},
        examples=[OpenApiExample("Closed", value={**STUDY_EXAMPLE, "active": False}, response_only=True)],
        tags=["studies"],
    )
    def post(self, request: Request, campaign_id: int, study_id: int) -> Response:
        study = _study(request, campaign_id, study_id, write=True)
        study = services.study_close(study=study, actor=_principal(request))
        return Response(StudyOutput(study, context={"request": request}).data)


class ParticipantFilterQuery(serializers.Serializer[Any]):
    status = serializers.ChoiceField(choices=Participant.Status.values, required=False)
    limit = serializers.IntegerField(required=False, min_value=1, max_value=500)
    cursor = serializers.CharField(required=False)


class ParticipantListApi(APIView):
    @extend_schema(
        operation_id="studies_participants_list",
        summary="A study's participants and their progress",
        description="Each participant's status, times, votes toward the target, whether they completed, and their "
        "voided battles; newest entry first, in cursor pages. Filter with `?status=`.",
        parameters=[
            OpenApiParameter("status", str, enum=Participant.Status.values, description="Only this status."),
            limit_parameter("Participants"),
            OpenApiParameter("cursor", str, description="From the previous page's `next`."),
        ],
        responses={200: page_of(ParticipantOutput)},
        examples=[
            OpenApiExample(
                "A participant",
                response_only=True,
                value={
                    "next": None,
                    "previous": None,
                    "results": [
                        {
                            "id": 31,
                            "vendor_participant_id": "5f1a2b3c4d5e6f7a8b9c0d1e",
                            "vendor_study_id": "0123456789abcdef01234567",
                            "external_session_id": "fedcba9876543210fedcba98",
                            "status": "active",
                            "entered_at": "2026-12-01T10:05:00Z",
                            "consented_at": "2026-12-01T10:05:30Z",
                            "completed_at": None,
                            "ended_at": None,
                            "deadline": "2026-12-01T11:05:00Z",
                            "votes": 7,
                            "target": 20,
                            "complete": False,
                            "voided": 0,
                            "qualification": {
                                "status": "passed",
                                "answered": 4,
                                "correct": 4,
                                "required_battles": 4,
                                "pass_mark": 0.75,
                            },
                        }
                    ],
                },
            )
        ],
        tags=["studies"],
    )
    def get(self, request: Request, campaign_id: int, study_id: int) -> Response:
        study = _study(request, campaign_id, study_id)
        query = ParticipantFilterQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        participants = selectors.participants_progress(study)
        if "status" in query.validated_data:
            participants = participants.filter(status=query.validated_data["status"])
        return cursor_page(  # type: ignore[no-any-return]
            request=request, view=self, queryset=participants, output=ParticipantOutput, ordering="-id"
        )
