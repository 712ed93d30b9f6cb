"""Building admin POSTs the way the browser sends them, for the admin tests."""

from __future__ import annotations

import html
from typing import Any

from battles.admin import CampaignForm
from battles.models import Campaign


def _value(value: Any) -> Any:
    if value is None:
        return ""
    return getattr(value, "pk", value)


def campaign_form_data(
    campaign: Campaign,
    *,
    new_competitors: list[dict[str, Any]] | None = None,
    competitor_changes: dict[int, dict[str, Any]] | None = None,
    **overrides: Any,
) -> dict[str, Any]:
    """The change form of ``campaign`` as saved, with its competitor inline, plus the overrides."""
    data: dict[str, Any] = {"new_prompts": "", "new_prompts_category": ""}
    for name in CampaignForm.Meta.fields:
        if name == "organization":
            continue  # read-only once the campaign exists
        if name == "rater_pools":
            data[name] = [pool.pk for pool in campaign.rater_pools.all()]
            continue
        value = getattr(campaign, f"{name}_id" if name == "ranking_anchor" else name)
        if isinstance(value, bool):
            if value:
                data[name] = "on"
            continue
        data[name] = _value(value)
    existing = list(campaign.competitors.order_by("id"))
    rows: list[dict[str, Any]] = [
        {
            "id": c.pk,
            "endpoint": c.endpoint_id,
            "version_label": c.version_label,
            "family": c.family,
            "active": c.active,
            **(competitor_changes or {}).get(c.pk, {}),
        }
        for c in existing
    ]
    rows += [{"id": "", "active": True, **row} for row in new_competitors or []]
    prefix = "competitors"
    data.update(
        {
            f"{prefix}-TOTAL_FORMS": len(rows),
            f"{prefix}-INITIAL_FORMS": len(existing),
            f"{prefix}-MIN_NUM_FORMS": 0,
            f"{prefix}-MAX_NUM_FORMS": 1000,
        }
    )
    for i, row in enumerate(rows):
        data[f"{prefix}-{i}-campaign"] = campaign.pk
        for key, value in row.items():
            if isinstance(value, bool):
                if value:
                    data[f"{prefix}-{i}-{key}"] = "on"
            else:
                data[f"{prefix}-{i}-{key}"] = _value(value)
    data.update({k: _value(v) for k, v in overrides.items()})
    return data


def form_errors(response: Any) -> str:
    """Every error the admin shows on a re-rendered form (the main form and its inlines)."""
    try:
        errors = response.context["errors"]
    except (KeyError, TypeError):
        return ""
    return html.unescape(" ".join(str(e) for e in errors))
