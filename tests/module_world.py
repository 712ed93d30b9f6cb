"""A world built once per test module, for tests that only read it.

``module_world`` is the body of a module-scoped fixture: it builds the rows (with the test database
unblocked and tenant scopes disabled, as the suite's fixtures build theirs) inside an outer transaction
that stays open for the module and is rolled back at its end. Each test of the module that uses the
database (``django_db``, not ``transaction=True``) then runs in its own transaction as usual, which
Django opens as a savepoint inside the outer one and rolls back after the test: a test sees the world
and its own writes, never another test's.

Hand the tests ids and strings, never the model instances the builder made (a test that changed one
would change it for the next test): a test re-fetches what it needs by pk."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from typing import TypeVar

from django.db import connection, transaction
from pytest_django import DjangoDbBlocker

from raters.tenancy import scopes_disabled

T = TypeVar("T")


def module_world(django_db_blocker: DjangoDbBlocker, build: Callable[[], T]) -> Iterator[T]:
    """Build the world with ``build()`` in an outer transaction, yield what it returns, roll it all back.

    Use it from a module-scoped fixture that also requests ``django_db_setup`` (so the test database
    exists first)::

        @pytest.fixture(scope="module")
        def world(django_db_setup, django_db_blocker):
            yield from module_world(django_db_blocker, _build)
    """
    with django_db_blocker.unblock():
        outer = transaction.atomic()
        outer.__enter__()
        try:
            with scopes_disabled():
                world = build()
        except BaseException:
            outer.__exit__(*sys.exc_info())
            raise
    try:
        yield world
    finally:
        with django_db_blocker.unblock():
            # Every test's transaction was a savepoint in this one: if a test had committed or closed the
            # connection, its writes would have leaked to the tests after it, so that fails loudly here.
            assert connection.in_atomic_block, "a test ended the module's outer transaction"
            transaction.set_rollback(True)
            outer.__exit__(None, None, None)
