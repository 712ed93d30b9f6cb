"""Crowd studies and the participants who entered through their links (read-only)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from raters.admin import ReadOnlyTenantAdmin, TenantAdmin, absolute_link_column

from ..models import Participant, Study


def study_entry_link(study: Study) -> str:
    """The entry path with the vendor's placeholders, which the vendor fills in for each participant."""
    query = (
        "?PROLIFIC_PID={{%PROLIFIC_PID%}}&STUDY_ID={{%STUDY_ID%}}&SESSION_ID={{%SESSION_ID%}}"
        if study.vendor == Study.Vendor.PROLIFIC
        else "?worker_id=<worker id>&assignment_id=<assignment id>"
    )
    # Rater attributes the link carries: the manager writes a fixed value, or the vendor's placeholder.
    for parameter, key in (study.attribute_parameters or {}).items():
        query += f"&{parameter}=<{key}>"
    return f"{study.path}{query}"


@admin.register(Study)
class StudyAdmin(TenantAdmin):
    """A campaign's crowd study: the vendor link to hand out, its pool, target and completion code.
    Saved through the generic audited service (``study.created`` / ``study.changed``)."""

    list_display = ("name", "campaign", "vendor", "pool", "target_votes", "active", "participant_count")
    list_filter = ("vendor", "active")
    readonly_fields = ("completion_preview",)
    fields = (
        "organization",
        "campaign",
        "name",
        "vendor",
        "pool",
        "target_votes",
        "time_limit_min",
        "completion_code",
        "completion_url",
        "completion_preview",
        "instructions",
        "consent_text",
        "attribute_parameters",
        "active",
    )

    def _entry_link(self, request: HttpRequest) -> Any:
        # Absolute, to paste into the vendor's study as it is (ARENA_SITE_URL, else this page's address).
        return absolute_link_column(request, description="Link for the vendor", path=study_entry_link)

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return (*super().get_fields(request, obj), self._entry_link(request))

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return (*super().get_readonly_fields(request, obj), self._entry_link(request))

    @admin.display(description="Participants are sent to")
    def completion_preview(self, obj: Study) -> str:
        return obj.completion_link() if obj.pk is not None else "-"

    @admin.display(description="Participants")
    def participant_count(self, obj: Study) -> int:
        return obj.participants.count()


@admin.register(Participant)
class ParticipantAdmin(ReadOnlyTenantAdmin):
    """Who entered through a study link (the vendor's ids are for the organisation's managers, who
    approve and pay them; the vote log knows only the account)."""

    list_display = ("vendor_participant_id", "study", "status", "entered_at", "consented_at", "completed_at")
    list_filter = ("status", "study")
    search_fields = ("vendor_participant_id",)
