"""The public index of published boards (no key, no session): the boards organisations published and
listed, with content hashes of their entities and attributes."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api import ErrorOutput

from .. import selectors
from .access import PublicRateThrottle


class HashedOutput(serializers.Serializer[Any]):
    entities = serializers.CharField(help_text="What entities_hash is computed from.")
    attributes = serializers.CharField(help_text="What attributes_hash is computed from.")
    method = serializers.CharField(help_text="How a value is hashed.")


class IndexedBoardOutput(serializers.Serializer[Any]):
    kind = serializers.ChoiceField(choices=["leaderboard", "attribute"])
    name = serializers.CharField()
    organization = serializers.CharField()
    published_at = serializers.DateTimeField(allow_null=True)
    url = serializers.CharField(help_text="The public page.")
    api_url = serializers.CharField(help_text="The public JSON, from which both hashes can be recomputed.")
    version = serializers.IntegerField(
        allow_null=True, help_text="Leaderboard: the snapshot version hashed; attribute board: the newest run's id."
    )
    entities = serializers.IntegerField(help_text="How many entities (competitors, or texts) were hashed.")
    entities_hash = serializers.CharField(help_text="sha256 of the entities (competitor model and version, or texts).")
    attributes_hash = serializers.CharField(help_text="sha256 of the board's attributes (see hashed).")
    hashed = HashedOutput()


class BoardIndexOutput(serializers.Serializer[Any]):
    boards = IndexedBoardOutput(many=True)
    truncated = serializers.BooleanField(help_text="More than 500 listed boards of a kind: the newest 500 are here.")
    hash_method = serializers.CharField()


class PublicBoardIndexApi(APIView):
    authentication_classes: list[Any] = []
    permission_classes = [AllowAny]
    throttle_classes = [PublicRateThrottle]

    @extend_schema(
        operation_id="public_board_index",
        tags=["published boards"],
        summary="The public index of published boards (public, no key)",
        description="Every board (leaderboards and attribute boards, of every organisation) that its organisation "
        "published and chose to list, newest first, with sha256 content hashes of its entities (competitor model "
        "and version; an attribute board's texts) and attributes, so that a change of either shows. A board "
        "published without listing, or unpublished, is never here. Throttled per IP.",
        auth=[],
        responses={200: BoardIndexOutput, 429: ErrorOutput},
        examples=[
            OpenApiExample(
                "One board",
                response_only=True,
                value={
                    "boards": [
                        {
                            "kind": "leaderboard",
                            "name": "Chat arena",
                            "organization": "Acme",
                            "published_at": "2026-12-01T12:00:00Z",
                            "url": "/boards/q3Zr1vB8mK0xYt2a/",
                            "api_url": "/api/v1/public/boards/q3Zr1vB8mK0xYt2a/",
                            "version": 12,
                            "entities": 8,
                            "entities_hash": "5f1c" + "0" * 60,
                            "attributes_hash": "a07e" + "0" * 60,
                        }
                    ],
                    "truncated": False,
                },
            )
        ],
    )
    def get(self, request: Request) -> Response:
        return Response(BoardIndexOutput(selectors.public_board_index_cached()).data)
