"""Reads about model endpoints."""

from __future__ import annotations

from collections.abc import Iterable

from .models import ModelEndpoint
from .triton.client import model_readiness


def endpoints_not_ready(endpoints: Iterable[ModelEndpoint]) -> list[str]:
    """One line per endpoint whose Triton server does not report its model ready (asked live)."""
    return [problem for problem in (model_readiness(endpoint.spec()) for endpoint in endpoints) if problem]
