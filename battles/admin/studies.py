"""Crowd studies and the participants who entered through their links (read-only)."""

from __future__ import annotations

from django.contrib import admin

from raters.admin import ReadOnlyTenantAdmin, TenantAdmin

from ..models import Participant, Study


@admin.register(Study)
class StudyAdmin(TenantAdmin):
    """A campaign's crowd study: the vendor link to hand out, its pool, target and completion code.
    Saved through the generic audited service (``study.created`` / ``study.changed``)."""

    list_display = ("name", "campaign", "vendor", "pool", "target_votes", "active", "participant_count")
    list_filter = ("vendor", "active")
    readonly_fields = ("entry_link", "completion_preview")
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
        "active",
        "entry_link",
    )

    @admin.display(description="Link for the vendor (after this site's address)")
    def entry_link(self, obj: Study) -> str:
        if obj.pk is None:
            return "Shown once the study is saved."
        query = (
            "?PROLIFIC_PID={{%PROLIFIC_PID%}}&STUDY_ID={{%STUDY_ID%}}&SESSION_ID={{%SESSION_ID%}}"
            if obj.vendor == Study.Vendor.PROLIFIC
            else "?worker_id=<worker id>&assignment_id=<assignment id>"
        )
        return f"{obj.path}{query}"

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
