"""Strict fields: serializer fields that take only what the schema says (a JSON boolean, number or string,
not its look-alikes), the fast surrogate check for long texts, and the bases of the list endpoints'
query filters (django-filter)."""

from __future__ import annotations

import re
from typing import Any

import django_filters
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.exceptions import ValidationError as ApiValidationError
from rest_framework.validators import ProhibitSurrogateCharactersValidator


class StrictBooleanField(serializers.BooleanField):
    """In a JSON body a boolean is true or false, not 0, "yes" or "on" (the schema says boolean)."""

    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            self.fail("invalid", input=data)
        return data


class StrictIntegerField(serializers.IntegerField):
    """In a JSON body an integer is a number, not "12"."""

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        value: int = super().to_internal_value(data)
        return value


_SURROGATE = re.compile("[\ud800-\udfff]")


class FastSurrogateCheck:
    """DRF's ``ProhibitSurrogateCharactersValidator`` with one regex search instead of a Python loop over
    every character (a batch of shadow battles carries megabytes of answer text): the same refusal."""

    message = "Surrogate characters are not allowed: U+{code_point:X}."

    def __call__(self, value: Any) -> None:
        found = _SURROGATE.search(str(value))
        if found is not None:
            message = self.message.format(code_point=ord(found.group()))
            raise ApiValidationError(message, code="surrogate_characters_not_allowed")


class LongTextField(serializers.CharField):
    """A CharField for long texts (answers, prompts) with the fast surrogate check."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.validators = [
            FastSurrogateCheck() if isinstance(v, ProhibitSurrogateCharactersValidator) else v for v in self.validators
        ]


class StrictCharField(LongTextField):
    """A string, and only a string: DRF's CharField would take 42 as "42" (the schema says string)."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictSlugField(serializers.SlugField):
    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictFloatField(serializers.FloatField):
    """A JSON number; not a string, not a boolean."""

    def to_internal_value(self, data: Any) -> float:
        if isinstance(data, bool) or not isinstance(data, (int, float)):
            self.fail("invalid")
        return super().to_internal_value(data)


# --- Query filters (django-filter) of the list endpoints -----------------------------------------------


class _FilterSet(django_filters.FilterSet):  # type: ignore[misc]  # django-filter ships no type information
    pass


@extend_schema_field(OpenApiTypes.BOOL)
class _BooleanFilter(django_filters.TypedChoiceFilter):  # type: ignore[misc]  # no types in django-filter
    """``true`` or ``false``, and anything else a 400: django-filter's ``BooleanFilter`` reads an unknown
    value as "not given", which would answer a typo with the unfiltered list."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(choices=[("true", "true"), ("false", "false")], coerce=lambda v: v == "true", **kwargs)
