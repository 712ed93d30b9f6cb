"""Session fixture: one real Triton server with the shipped and the test-only model repositories.

Self-contained on purpose (no Django, no project settings) so that it can move to the top-level
`tests/conftest.py` unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from serving.triton.server import TritonServer

PROJECT_ROOT = Path(__file__).resolve().parents[2]
SHIPPED_REPOSITORY = PROJECT_ROOT / "serving" / "model_repository"
TEST_REPOSITORY = PROJECT_ROOT / "tests" / "serving" / "model_repository"


@pytest.fixture(scope="session")
def triton_server() -> Iterator[TritonServer]:
    with TritonServer([SHIPPED_REPOSITORY, TEST_REPOSITORY]) as server:
        yield server
