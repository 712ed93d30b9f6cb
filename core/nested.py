"""Related rows read in their parent's statement: one JSON array as an annotation, model instances made back from it.

Django reads a to-many relation in a statement of its own (``prefetch_related``). Where a hot read always needs a
few related rows (a battle's two answers, on the battle page and in the vote), that is a round trip, a statement
for PostgreSQL to parse and plan, and the ORM's per-statement work, all for two rows. ``rows_json`` aggregates
the related rows into one JSON array, an annotation of the parent's read (PostgreSQL's ``jsonb_agg``, in the
order asked); ``instances_from_json`` makes model instances of the array's objects, the fields asked for set as
a read of the model would set them, every other field deferred (loaded on access, as ``only()`` leaves it)::

    battles = Battle.objects.annotate(answers=rows_json(Generation.objects.filter(battle=OuterRef("pk")),
                                                        ("id", "side", "text"), order_by=("turn", "side")))
    answers = instances_from_json(Generation, ("id", "side", "text"), battle.answers)

A value goes through JSON and back: an integer, a string, a boolean and a JSON field's value come back as they
went; a float as the same float (PostgreSQL writes a ``double precision`` in JSON with the digits that read back
exactly; ``NaN`` and the infinities as strings, which ``float`` reads); a UUID and a date-time from their text.
Fields of other kinds (a decimal would lose digits through JSON's numbers) are refused when the fields are
named. PostgreSQL only: elsewhere the related rows are read apart, as before.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any, TypeVar
from uuid import UUID

from django.contrib.postgres.aggregates import JSONBAgg
from django.db import DEFAULT_DB_ALIAS, models
from django.db.models import JSONField, Subquery
from django.db.models.functions import JSONObject

__all__ = ["instances_from_json", "rows_json"]

M = TypeVar("M", bound=models.Model)

# What JSON gives back for each kind of field, and how a read's value is made of it (None: the value itself).
_AS_IS = (
    models.BooleanField,
    models.CharField,
    models.TextField,
    models.IntegerField,  # and its subclasses: big, small, positive, the auto keys
    models.JSONField,
)


def _loader(field: models.Field[Any, Any]) -> Callable[[Any], Any] | None:
    # A foreign key's column holds its target's value.
    target = field.target_field if isinstance(field, models.ForeignKey) else field
    if isinstance(target, models.FloatField):
        return float
    if isinstance(target, models.UUIDField):
        return UUID
    if isinstance(target, models.DateTimeField):
        return datetime.fromisoformat
    if isinstance(target, _AS_IS):
        return None
    kind = type(target).__name__
    raise ValueError(f"{field.model.__name__}.{field.name}: a {kind} does not go through JSON as it is")


_Plan = tuple[tuple[str, ...], tuple[tuple[str, Any], ...]]
_plans: dict[tuple[type[models.Model], tuple[str, ...]], _Plan] = {}


def _plan(model: type[models.Model], fields: tuple[str, ...]) -> _Plan:
    """The attribute names in the model's order (what ``from_db`` takes) and each one's JSON key and loader."""
    planned = _plans.get((model, fields))
    if planned is None:
        planned = _plans[(model, fields)] = _planned(model, fields)
    return planned


def _planned(model: type[models.Model], fields: tuple[str, ...]) -> _Plan:
    by_name = {}
    for name in fields:
        field = model._meta.get_field(name)
        if not field.concrete or field.many_to_many or field.one_to_many:
            raise ValueError(f"{model.__name__}.{name}: not a column of the model's table")
        by_name[field.attname] = (name, _loader(field))
    ordered = tuple(f.attname for f in model._meta.concrete_fields if f.attname in by_name)
    return ordered, tuple(by_name[attname] for attname in ordered)


def rows_json(queryset: models.QuerySet[Any], fields: Sequence[str], *, order_by: Sequence[str] = ()) -> Subquery:
    """The rows of ``queryset`` (filtered on an ``OuterRef`` of the parent) as one JSON array of objects holding
    ``fields``, in ``order_by``'s order: an annotation of the parent's read (NULL where there are none)."""
    _plan(queryset.model, tuple(fields))  # refuses a field that does not go through JSON, here and not on a read
    objects = JSONObject(**{name: name for name in fields})
    # Grouped by a constant (which Django leaves out of GROUP BY): one aggregate over every row, the subquery's one
    # row; without a grouping Django would group by the key, a row each.
    rows = (
        queryset.order_by()
        .annotate(_one=models.Value(1, output_field=models.IntegerField()))
        .values("_one")
        .annotate(_rows=JSONBAgg(objects, order_by=tuple(order_by)))
        .values("_rows")
    )
    return Subquery(rows, output_field=JSONField())


def instances_from_json(
    model: type[M], fields: Sequence[str], rows: Iterable[dict[str, Any]] | None, *, using: str = DEFAULT_DB_ALIAS
) -> list[M]:
    """Model instances of ``rows_json``'s objects (None: no rows), as a read with ``only(*fields)`` makes them: the
    fields set, the others deferred, the instance marked as read from the database."""
    ordered, loaders = _plan(model, tuple(fields))
    instances = []
    for row in rows or ():
        values = []
        for key, load in loaders:
            value = row[key]
            values.append(value if load is None or value is None else load(value))
        instances.append(model.from_db(using, ordered, values))
    return instances
