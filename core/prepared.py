"""Prepared reads and updates: a hot statement's SQL compiled once per process, run again with each call's values.

Django's ORM builds and compiles every statement anew: the battle read with its campaign, prompt and both
competitors costs 2.7 ms of Python to build and compile and 0.3 ms to send and read (docs/reliability/load.md).
A rater's cycle runs the same dozen statements with different values, so ``Prepared`` keeps what the compiler
made the first time and sends it again with the new values: the same SQL, the same parameters in the same
places, the same model instances (``select_related`` included) or row count back.

A prepared statement is written as a builder, a function from its *slots* (named values of a declared type:
``int``, ``str``, ``UUID``, an aware ``datetime``) to an ordinary queryset::

    _battle_of_rater = Prepared(
        lambda battle_id, rater_id: Battle.objects.select_related("prompt").filter(pk=battle_id, rater_id=rater_id),
        battle_id=UUID, rater_id=int,
    )
    battle = _battle_of_rater.first(battle_id=..., rater_id=user.pk)

The first call with a given tenant scope calls the builder twice with two sets of stand-in values, compiles
both, and finds where each slot's value landed among the parameters. Anything the builder reads besides its
slots (the clock, a random number) would give the two compilations different SQL or different parameters
outside the slots, and raises ``PreparedError`` instead of being kept. Every later call copies the compiled
parameters, puts its values in the slots' places and runs the SQL through Django's cursor (so query logging,
``CaptureQueriesContext`` and the execute wrappers see it as they see any statement).

What the builder may depend on: its slots and **the tenant scope** (raters.tenancy: the organisations a
``TenantManager`` filters on). The scope is part of the key a compiled statement is kept under, so a statement
compiled in one organisation's scope is never run in another's; a queryset that refuses to run (no scope
open: django-scopes' ``DisabledQuerySet``) is never compiled, and raises as it would have. The builder must
not read settings or anything else that may change while the process runs.

Only on PostgreSQL (where a parameter reaches the driver as the value the builder was given); elsewhere (the
demo's SQLite) and with ``ARENA_PREPARED=False`` every call runs the builder's queryset itself, which is
also the reference the tests hold the compiled path to.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar
from uuid import UUID

from django.conf import settings
from django.core.exceptions import EmptyResultSet
from django.db import DEFAULT_DB_ALIAS, connections, models, transaction
from django.db.models.expressions import DatabaseDefault, RawSQL
from django.db.models.query import FlatValuesListIterable, ModelIterable, ValuesIterable, ValuesListIterable
from django.db.models.sql import InsertQuery, UpdateQuery
from django.db.models.sql.constants import ROW_COUNT, SINGLE
from django_scopes import get_scope

__all__ = ["Many", "Prepared", "PreparedAggregate", "PreparedError", "PreparedUpdate", "first_unlocked"]

M = TypeVar("M")

SLOT_TYPES: tuple[type, ...] = (int, str, UUID, datetime)
# The iterables a compiled read may produce: model instances, values() and values_list() rows.
_ITERABLES = (ModelIterable, ValuesIterable, ValuesListIterable, FlatValuesListIterable)
# The most values a Many slot is compiled for (more run the builder's own queryset), and the most slots.
MAX_MANY = 1_000
MAX_SLOTS = 99
# How many scopes a statement keeps compiled (one per organisation set its callers have): past it, the oldest go.
MAX_SCOPES = 512


class PreparedError(RuntimeError):
    """A statement that cannot be compiled once for every call: a programming error, raised on its first use."""


@dataclass(frozen=True)
class Many:
    """A slot of several values of one type, for ``field__in=``: a tuple of distinct values. The SQL has one
    parameter a value, so the statement is compiled for each count of values it is called with."""

    kind: type


def _stand_in(kind: type, number: int) -> Any:
    """A value of the slot's type that no real row or constant has, different for each slot and generation.
    Integers are within PostgreSQL's ``integer`` and positive (Django turns a lookup beyond a column's range
    into an empty result, which compiles to no SQL: such a statement is then never compiled, see
    ``_compiled_for``)."""
    if kind is int:
        return 2_000_000_000 + number
    if kind is str:
        return f"\u2060prepared-slot:{number}\u2060"
    if kind is UUID:
        return UUID(int=(0x5107_9E7A_0000_0000 << 64) | number)
    if kind is datetime:
        return datetime(1907, 3, 5, 7, 11, 13, number, tzinfo=UTC)
    raise PreparedError(f"a slot's type must be one of {[k.__name__ for k in SLOT_TYPES]}, not {kind!r}")


def _scope_key() -> tuple[Any, ...] | None:
    """The tenant scope as part of a compiled statement's key (None: a scope of a shape that cannot be keyed,
    so the statement is built anew)."""
    items = []
    for name, value in sorted(get_scope().items()):
        if isinstance(value, list | tuple):
            if not all(type(item) is int for item in value):
                return None
            value = tuple(value)
        elif value is not None and type(value) not in (bool, int, str):
            return None
        items.append((name, value))
    return tuple(items)


def _runs_as_plain_queryset(queryset: Any) -> bool:
    """Whether evaluating the queryset is Django's own evaluation (not a queryset that refuses to run, such as
    django-scopes' DisabledQuerySet outside any scope, or one that changes what evaluation does)."""
    kind = type(queryset)
    return all(getattr(kind, name) is getattr(models.QuerySet, name) for name in ("__iter__", "_fetch_all", "iterator"))


@dataclass(frozen=True)
class _Compiled:
    sql: str
    params: tuple[Any, ...]
    places: tuple[tuple[int, str, int], ...]  # (index among the parameters, slot, index in a Many slot or -1)
    compiler: Any = None  # a read's compiler after compiling: its select, klass_info, converters
    query: Any = None
    model: Any = None
    iterable_class: Any = None
    fields: Any = None
    names: tuple[str, ...] = ()  # an aggregate's results, in the order of its columns
    returning: str = ""  # an update's RETURNING list (PreparedUpdate.first_updated)
    # The columns' converters (a field's from_db_value: JSON, for one), as the compiler finds them for the
    # first compilation: the fields' own functions, called with each call's connection. PostgreSQL's backend,
    # the only one statements run compiled on (_Statement._enabled), adds none bound to its connection.
    converters: Any = None


# Kept for a scope whose statement is not compiled (the builder's queryset answers every call there).
_UNCOMPILED = _Compiled(sql="", params=(), places=())


class _Statement(Generic[M]):
    """What ``Prepared``, ``PreparedAggregate`` and ``PreparedUpdate`` share: the slots, the compiled statements by
    scope, the checks."""

    def __init__(self, build: Callable[..., Any], **slots: type | Many) -> None:
        if len(slots) > MAX_SLOTS:
            raise PreparedError(f"at most {MAX_SLOTS} slots")
        for name, kind in slots.items():
            if (kind.kind if isinstance(kind, Many) else kind) not in SLOT_TYPES:
                raise PreparedError(f"slot {name!r}: a type of {[k.__name__ for k in SLOT_TYPES]}, not {kind!r}")
        self.build = build
        self.slots = slots
        self.name = getattr(build, "__qualname__", repr(build))
        self._compiled: dict[tuple[Any, ...], _Compiled] = {}  # by (scope, the counts of the Many slots)
        self._lock = threading.Lock()

    def _checked(self, values: dict[str, Any]) -> dict[str, Any]:
        if values.keys() != self.slots.keys():
            raise TypeError(f"{self.name}: slots {sorted(self.slots)}, given {sorted(values)}")
        for name, value in values.items():
            kind = self.slots[name]
            if isinstance(kind, Many):
                if type(value) is not tuple or len(set(value)) != len(value):
                    raise TypeError(f"{self.name}: slot {name!r} takes a tuple of distinct values, not {value!r}")
                for item in value:
                    self._check_one(name, kind.kind, item)
            else:
                self._check_one(name, kind, value)
        return values

    def _check_one(self, name: str, kind: type, value: Any) -> None:
        if kind is int and type(value) is not int:  # bool is an int, and would compile to other SQL
            raise TypeError(f"{self.name}: slot {name!r} takes an int, not {value!r}")
        if not isinstance(value, kind):
            raise TypeError(f"{self.name}: slot {name!r} takes a {kind.__name__}, not {value!r}")
        if isinstance(value, datetime) and value.tzinfo is None and settings.USE_TZ:
            raise TypeError(f"{self.name}: slot {name!r} takes an aware datetime, not {value!r}")

    def _enabled(self) -> bool:
        return bool(getattr(settings, "ARENA_PREPARED", True)) and connections[DEFAULT_DB_ALIAS].vendor == "postgresql"

    def _stand_ins(self, generation: int, counts: tuple[int, ...]) -> dict[str, Any]:
        stand_ins: dict[str, Any] = {}
        many = iter(counts)
        for i, (name, kind) in enumerate(self.slots.items()):
            number = generation * 100_000 + i * 1_000  # a Many slot's values: + 0 ... + 999
            if isinstance(kind, Many):
                stand_ins[name] = tuple(_stand_in(kind.kind, number + j) for j in range(next(many)))
            else:
                stand_ins[name] = _stand_in(kind, number)
        return stand_ins

    def _key(self, values: dict[str, Any]) -> tuple[Any, ...] | None:
        """Where the statement compiled for this call is kept: the tenant scope, and how many values each
        Many slot has (None: a scope that cannot be keyed)."""
        scope = _scope_key()
        counts = tuple(len(values[name]) for name, kind in self.slots.items() if isinstance(kind, Many))
        if scope is None or any(count >= MAX_MANY for count in counts):
            return None
        return (scope, counts)

    def _compile_one(self, values: dict[str, Any]) -> _Compiled | None:  # pragma: no cover - overridden
        raise NotImplementedError

    def _for_call(self, values: dict[str, Any]) -> tuple[dict[str, Any], _Compiled | None]:
        """The call's values, checked, and the statement compiled for it (None: run the builder's own)."""
        values = self._checked(values)
        if not self._enabled():
            return values, None
        key = self._key(values)
        return values, None if key is None else self._compiled_for(key)

    def _pair(self, values: dict[str, Any], second: str) -> tuple[Any, dict[str, Any]]:
        """A builder's ``(queryset, {name: ...})`` for these values (updates and aggregates)."""
        built = self.build(**values)
        if not (isinstance(built, tuple) and len(built) == 2 and isinstance(built[0], models.QuerySet)):
            raise PreparedError(f"{self.name}: the builder returns (queryset, {{{second}}}), not {built!r}")
        return built[0], dict(built[1])

    def _compiled_for(self, key: tuple[Any, ...]) -> _Compiled | None:
        """The statement compiled for this scope, compiled now if it is the first call in it; None when the
        builder's queryset is one Django would not run as it is (the caller then runs the builder's own)."""
        compiled = self._compiled.get(key)
        if compiled is not None:
            return None if compiled is _UNCOMPILED else compiled
        try:
            first = self._compile_one(self._stand_ins(1, key[1]))
            second = self._compile_one(self._stand_ins(2, key[1]))
        except EmptyResultSet:
            # Django found the result empty without asking the database (an organisation scope of none, a
            # lookup beyond a column's range): the builder's own queryset answers each call, as it would.
            first = second = None
        if first is None or second is None:
            self._keep(key, _UNCOMPILED)
            return None
        if first.sql != second.sql or len(first.params) != len(second.params):
            raise PreparedError(f"{self.name}: the SQL depends on more than the slots and the tenant scope")
        if first.places != second.places:
            raise PreparedError(f"{self.name}: a slot's value lands in different places between two compilations")
        slotted = {index for index, _, _ in first.places}
        for index, (a, b) in enumerate(zip(first.params, second.params, strict=True)):
            if index not in slotted and a != b:
                raise PreparedError(
                    f"{self.name}: parameter {index} ({a!r}, then {b!r}) depends on more than the slots and the "
                    "tenant scope (the clock? a random number?): pass it as a slot"
                )
        self._keep(key, first)
        return first

    def _keep(self, key: tuple[Any, ...], compiled: _Compiled) -> None:
        with self._lock:
            if len(self._compiled) >= MAX_SCOPES:
                self._compiled.pop(next(iter(self._compiled)))
            self._compiled[key] = compiled

    def compiled_in_scope(self) -> bool:
        """Whether the statement runs compiled in the current scope (after a first call in it): for tests."""
        scope = _scope_key()
        return any(key[0] == scope and kept is not _UNCOMPILED for key, kept in list(self._compiled.items()))

    def _places(self, params: tuple[Any, ...], values: dict[str, Any]) -> tuple[tuple[int, str, int], ...]:
        """Where each slot's stand-in (each value of a Many slot's) landed among the parameters: every one
        must land somewhere."""
        places: list[tuple[int, str, int]] = []
        for name, value in values.items():
            items = enumerate(value) if isinstance(self.slots[name], Many) else [(-1, value)]
            for j, item in items:
                # The value itself, or wrapped by the backend in a subclass of its type that fixes its SQL type
                # (psycopg's Int4 for an integer field's value under server-side binding).
                found = [
                    i
                    for i, param in enumerate(params)
                    if isinstance(param, type(item)) and type(param) is not bool and param == item
                ]
                if not found:
                    raise PreparedError(
                        f"{self.name}: slot {name!r} did not reach the SQL as a parameter (compared against a "
                        "constant, transformed, or not used)"
                    )
                places.extend((i, name, j) for i in found)
        return tuple(sorted(places))

    @staticmethod
    def _params(compiled: _Compiled, values: dict[str, Any]) -> list[Any]:
        """The kept parameters with this call's values in the slots' places."""
        params = list(compiled.params)
        for index, name, j in compiled.places:
            value = values[name] if j < 0 else values[name][j]
            kind = type(params[index])
            params[index] = value if kind is type(value) else kind(value)  # wrapped as the compiler wrapped it
        return params

    def _bound(self, compiled: _Compiled, values: dict[str, Any]) -> Any:
        """A copy of the kept compiler that sends the kept SQL with these values, on this thread's connection."""
        params = self._params(compiled, values)
        compiler = copy.copy(compiled.compiler)
        compiler.connection = connections[DEFAULT_DB_ALIAS]
        compiler.as_sql = lambda *args, **kwargs: (compiled.sql, params)
        compiler.get_converters = lambda expressions: compiled.converters
        return compiler


class Prepared(_Statement[M]):
    """A read: the builder returns a queryset of model instances (``select_related`` allowed), of ``values()``
    or of ``values_list()`` rows; ``all`` runs it, ``first`` takes its first row (order and slice it in the
    builder, as ``first()`` would)."""

    def all(self, **values: Any) -> list[M]:
        values, compiled = self._for_call(values)
        if compiled is None:
            return list(self.build(**values))
        compiler = self._bound(compiled, values)
        query = copy.copy(compiled.query)
        query.get_compiler = lambda *args, **kwargs: compiler
        queryset: models.QuerySet[Any] = models.QuerySet(model=compiled.model, query=query, using=DEFAULT_DB_ALIAS)
        queryset._iterable_class = compiled.iterable_class
        queryset._fields = compiled.fields  # type: ignore[attr-defined]  # Django's own, untyped in the stubs
        return list(queryset)

    def first(self, **values: Any) -> M | None:
        rows = self.all(**values)
        return rows[0] if rows else None

    def _compile_one(self, values: dict[str, Any]) -> _Compiled | None:
        built = self.build(**values)
        if not isinstance(built, models.QuerySet):
            raise PreparedError(f"{self.name}: the builder returns a queryset, not {built!r}")
        queryset: Any = built  # its private attributes (Django's own) are untyped in the stubs
        if not _runs_as_plain_queryset(queryset):
            return None
        if queryset.db != DEFAULT_DB_ALIAS:
            raise PreparedError(f"{self.name}: only the default database")
        if queryset._prefetch_related_lookups or queryset._known_related_objects:
            raise PreparedError(f"{self.name}: prefetch_related and related managers' querysets are not compiled")
        if queryset.query.select_for_update:
            raise PreparedError(
                f"{self.name}: select_for_update() is not compiled (Django checks its transaction there)"
            )
        if queryset._iterable_class not in _ITERABLES:
            raise PreparedError(f"{self.name}: rows of {queryset._iterable_class.__name__} are not compiled")
        query = queryset.query
        compiler = query.get_compiler(using=DEFAULT_DB_ALIAS)
        sql, params = compiler.as_sql()
        params = tuple(params)
        return _Compiled(
            sql=sql,
            params=params,
            places=self._places(params, values),
            compiler=compiler,
            converters=compiler.get_converters([column[0] for column in compiler.select[: compiler.col_count]]),
            query=query,
            model=queryset.model,
            iterable_class=queryset._iterable_class,
            fields=queryset._fields,
        )


class PreparedUpdate(_Statement[int]):
    """An update: the builder returns ``(queryset, {field: value})``, what ``queryset.update(**values)`` would
    be given (a field's attname, such as ``rater_id``, for a foreign key); ``run`` returns the rows updated.
    One table only (no update through a join, no parent model)."""

    def run(self, **values: Any) -> int:
        values, compiled = self._for_call(values)
        if compiled is None:
            queryset, fields = self._pair(values, "field: value")
            return int(queryset.update(**fields))
        with transaction.mark_for_rollback_on_error(using=DEFAULT_DB_ALIAS):
            return int(self._bound(compiled, values).execute_sql(ROW_COUNT))

    def first_updated(self, **values: Any) -> Any | None:
        """For an update of at most one row (a claim: the filter names one row, or ``first_unlocked``'s): run it
        and return the row as it was written, as a model instance (``UPDATE ... RETURNING`` every column, one
        statement), or None where it updated nothing. The builder's own path (another database, or
        ``ARENA_PREPARED`` off) reads the row's key, updates it and reads it back, in a transaction."""
        values, compiled = self._for_call(values)
        if compiled is None:
            queryset, fields = self._pair(values, "field: value")
            with transaction.atomic(using=DEFAULT_DB_ALIAS):
                keys = list(queryset.values_list("pk", flat=True)[:2])
                if len(keys) > 1:
                    raise PreparedError(f"{self.name}: first_updated() is for an update of at most one row")
                if not keys or not queryset.filter(pk=keys[0]).update(**fields):
                    return None
                return queryset.model._base_manager.get(pk=keys[0])
        model = compiled.model
        sql = f"{compiled.sql} RETURNING {compiled.returning}"
        with transaction.mark_for_rollback_on_error(using=DEFAULT_DB_ALIAS):
            with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
                cursor.execute(sql, self._params(compiled, values))
                rows = cursor.fetchall()
            if len(rows) > 1:
                # A programming error (the builder's filter must name one row), said: inside a transaction it is
                # rolled back with it; in autocommit the rows are written by now.
                raise PreparedError(f"{self.name}: first_updated() is for an update of at most one row")
        if not rows:
            return None
        compiler = copy.copy(compiled.compiler)
        compiler.connection = connections[DEFAULT_DB_ALIAS]  # the converters are called with this call's connection
        row = next(compiler.apply_converters(rows, compiled.converters)) if compiled.converters else rows[0]
        return model.from_db(DEFAULT_DB_ALIAS, compiled.fields, tuple(row))

    def update_and_insert(self, instance: models.Model, **values: Any) -> bool:
        """For an update of at most one row that a new row goes with (a vote and the battle it locks): run the
        update and, in the same statement, insert ``instance`` (a new row of any model) if and only if the update
        changed a row. True, the instance stored (its key and the columns the database returns set, as ``save()``
        sets them); or False and nothing written. One statement (``WITH updated AS (UPDATE ... RETURNING 1),
        inserted AS (INSERT ... SELECT ... FROM updated)``), so in autocommit it is a transaction of its own with
        no ``BEGIN`` or ``COMMIT`` around it, and an error in the insert (a unique constraint) undoes the update
        too. The builder's own path (another database, or ``ARENA_PREPARED`` off) runs the update, then the
        insert, in a transaction. Neither sends ``pre_save`` or ``post_save`` (nor calls the model's ``save()``):
        for models whose rows need neither, as the vote log's append-only rows."""
        if not instance._state.adding:
            raise PreparedError(f"{self.name}: update_and_insert() inserts a new instance, not {instance!r}")
        values, compiled = self._for_call(values)
        if compiled is None:
            queryset, fields = self._pair(values, "field: value")
            with transaction.atomic(using=DEFAULT_DB_ALIAS):
                updated = queryset.update(**fields)
                if updated > 1:
                    raise PreparedError(f"{self.name}: update_and_insert() is for an update of at most one row")
                if not updated:
                    return False
                insert = _Insert(instance)
                returned = (
                    type(instance)
                    ._base_manager.using(DEFAULT_DB_ALIAS)
                    ._insert(  # type: ignore[attr-defined]
                        [instance], fields=insert.fields, returning_fields=insert.returning, using=DEFAULT_DB_ALIAS
                    )
                )
                insert.stored(returned[0])
                return True
        insert = _Insert(instance)
        sql = (
            f'WITH "updated" AS ({compiled.sql} RETURNING 1), "inserted" AS ({insert.sql} FROM (SELECT 1 FROM '
            f'"updated" LIMIT 1) AS "one" RETURNING {insert.returning_sql}) SELECT (SELECT COUNT(*) FROM "updated"), '
            '"inserted".* FROM (SELECT 1) AS "always" LEFT JOIN "inserted" ON TRUE'
        )
        with transaction.mark_for_rollback_on_error(using=DEFAULT_DB_ALIAS):
            with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
                cursor.execute(sql, [*self._params(compiled, values), *insert.params])
                row = cursor.fetchone()
            if row[0] > 1:
                # A programming error (the builder's filter must name one row), said: inside a transaction it is
                # rolled back with it; in autocommit the rows are written by now.
                raise PreparedError(f"{self.name}: update_and_insert() is for an update of at most one row")
        if not row[0]:
            return False
        insert.stored(row[1:])
        return True

    def _compile_one(self, values: dict[str, Any]) -> _Compiled | None:
        queryset, fields = self._pair(values, "field: value")
        if not _runs_as_plain_queryset(queryset) or type(queryset).update is not models.QuerySet.update:
            return None
        if queryset.db != DEFAULT_DB_ALIAS or queryset.query.is_sliced:
            raise PreparedError(f"{self.name}: only an unsliced queryset of the default database")
        query = queryset.query.chain(UpdateQuery)
        query.add_update_values(fields)
        query.clear_select_clause()
        if query.related_updates or query.order_by:
            raise PreparedError(f"{self.name}: an update of one table, unordered")
        query.get_initial_alias()
        if query.count_active_tables() != 1:
            raise PreparedError(f"{self.name}: an update whose filter joins another table is not compiled")
        compiler = query.get_compiler(using=DEFAULT_DB_ALIAS)
        sql, params = compiler.as_sql()
        if not sql:
            raise EmptyResultSet
        params = tuple(params)
        # For first_updated: every column of the row written, and what a read of them converts (JSON, for one).
        model = queryset.model
        reader = model._base_manager.using(DEFAULT_DB_ALIAS).all().query.get_compiler(using=DEFAULT_DB_ALIAS)
        reader.setup_query()
        columns = [column[0] for column in reader.select]
        quote = reader.connection.ops.quote_name
        return _Compiled(
            sql=sql,
            params=params,
            places=self._places(params, values),
            compiler=compiler,
            model=model,
            fields=tuple(column.target.attname for column in columns),
            returning=", ".join(f"{quote(model._meta.db_table)}.{quote(column.target.column)}" for column in columns),
            converters=reader.get_converters(columns),
        )


class _Insert:
    """One new row as ``save()`` would insert it (the same columns, ``pre_save`` values and parameters, by Django's
    insert compiler), as an ``INSERT ... SELECT`` without its ``FROM``, for ``update_and_insert``; a column whose
    value is the database's default (``db_default``) is left out, as the database then writes it."""

    def __init__(self, instance: models.Model) -> None:
        model = type(instance)
        meta = model._meta
        connection = connections[DEFAULT_DB_ALIAS]
        self.instance = instance
        if meta.parents:
            raise PreparedError(f"{model.__name__}: a model with parent tables is not inserted in one statement")
        query = InsertQuery(model)
        query.insert_values(meta.local_concrete_fields, [instance])
        compiler = query.get_compiler(using=DEFAULT_DB_ALIAS)
        pk_set = instance._is_pk_set(meta)  # type: ignore[attr-defined]  # Django's own, untyped in the stubs
        fields, row = [], []
        for field in meta.local_concrete_fields:
            if field.generated or (field is meta.auto_field and not pk_set):
                continue
            value = compiler.pre_save_val(field, instance)
            if isinstance(value, DatabaseDefault):
                continue
            fields.append(field)
            row.append(compiler.prepare_value(field, value))
        placeholders, params = compiler.assemble_as_sql(fields, [row])
        quote = connection.ops.quote_name
        self._table: str = meta.db_table
        self.fields = fields
        self.returning = meta.db_returning_fields
        self.sql = (
            f"INSERT INTO {quote(self._table)} ({', '.join(quote(str(field.column)) for field in fields)}) "
            f"SELECT {', '.join(placeholders[0])}"
        )
        self.params = list(params[0])
        self.returning_sql = ", ".join(quote(str(field.column)) for field in self.returning)
        self._compiler = compiler

    def stored(self, returned: Any) -> None:
        """The row is written: the columns the database returned set on the instance, as ``save()`` sets them."""
        columns = [field.get_col(self._table) for field in self.returning]
        converters = self._compiler.get_converters(columns)
        values = next(self._compiler.apply_converters([list(returned)], converters)) if converters else returned
        for value, field in zip(values, self.returning, strict=True):
            setattr(self.instance, field.attname, value)
        self.instance._state.adding = False
        self.instance._state.db = DEFAULT_DB_ALIAS


def first_unlocked(queryset: models.QuerySet[Any]) -> RawSQL:
    """The key of the first row of ``queryset`` (order it) that no other transaction holds, for ``pk=`` in an
    update's filter (a scalar subquery, which PostgreSQL runs once a statement): the subquery locks the row it
    picks and skips rows locked by others (PostgreSQL's ``FOR UPDATE SKIP LOCKED``), so of concurrent claims
    each takes a different row, in one statement each, without waiting or losing a race. On a database
    without it, the plain first row (SQLite runs one writer at a time)."""
    sql, params = queryset.values("pk")[:1].query.sql_with_params()
    connection = connections[queryset.db]
    if connection.features.has_select_for_update_skip_locked:
        table = connection.ops.quote_name(queryset.model._meta.db_table)
        sql = f"{sql} FOR UPDATE OF {table} SKIP LOCKED"
    return RawSQL(sql, params)


class _Captured(Exception):
    """Raised in place of running an aggregate's statement while it is being compiled."""


class PreparedAggregate(_Statement[dict[str, Any]]):
    """Aggregates over one queryset (``count()``, ``aggregate(...)``): the builder returns ``(queryset,
    {name: aggregate})``, what ``queryset.aggregate(**aggregates)`` would be given (``{"n": Count("*")}`` for a
    count); ``run`` returns the same dictionary. Only aggregates Django computes in one statement over the
    queryset's rows (not over a sliced, distinct or already aggregated queryset, which it wraps in a subquery)."""

    def run(self, **values: Any) -> dict[str, Any]:
        values, compiled = self._for_call(values)
        if compiled is None:
            queryset, aggregates = self._pair(values, "name: aggregate")
            return dict(queryset.aggregate(**aggregates))
        compiler = self._bound(compiled, values)
        row = compiler.execute_sql(SINGLE)  # an aggregate without GROUP BY always answers one row
        converters = compiled.converters
        result = next(compiler.apply_converters((row,), converters)) if converters else row
        return dict(zip(compiled.names, result, strict=True))

    def _compile_one(self, values: dict[str, Any]) -> _Compiled | None:
        queryset, aggregates = self._pair(values, "name: aggregate")
        if not _runs_as_plain_queryset(queryset) or type(queryset).aggregate is not models.QuerySet.aggregate:
            return None
        if queryset.db != DEFAULT_DB_ALIAS:
            raise PreparedError(f"{self.name}: only the default database")
        query = queryset.query.chain()
        made: list[Any] = []
        own_get_compiler = query.get_compiler

        def get_compiler(*args: Any, **kwargs: Any) -> Any:
            compiler = own_get_compiler(*args, **kwargs)

            def execute_sql(*args: Any, **kwargs: Any) -> Any:
                made.append((compiler, *compiler.as_sql()))
                raise _Captured

            compiler.execute_sql = execute_sql
            return compiler

        query.get_compiler = get_compiler  # Django aggregates over this very query unless it needs a subquery
        try:
            query.get_aggregation(DEFAULT_DB_ALIAS, aggregates)
        except _Captured:
            pass
        finally:
            del query.get_compiler
            for compiler, *_ in made:
                del compiler.execute_sql  # the compiler is kept: it runs the statement from now on
        if not made:
            raise PreparedError(f"{self.name}: Django computes these aggregates through a subquery; not compiled")
        compiler, sql, params = made[0]
        if not sql:
            raise EmptyResultSet
        params = tuple(params)
        return _Compiled(
            sql=sql,
            params=params,
            places=self._places(params, values),
            compiler=compiler,
            names=tuple(query.annotation_select),
            converters=compiler.get_converters(list(query.annotation_select.values())),
        )
