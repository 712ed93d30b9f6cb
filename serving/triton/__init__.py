"""Talking to NVIDIA Triton, with nothing of Django: the client (``client``: one generation, a pair at
once, streamed or not, over the contracts of ``serving.models.ModelEndpoint``) and the server process
(``server``: the ``tritonserver`` binary of the Triton environment, started and stopped), and the special
tokens every answer is cleared of (``special_tokens``: they would name a model).

This is the face other apps import from; ``tritonclient`` and the standard library are all it needs
(import-linter's "pure" contract, ``pyproject.toml``)."""

from .client import (
    EndpointSpec,
    GenerationResult,
    Prompt,
    SamplingParams,
    StreamEvent,
    generate,
    generate_pair,
    stream_pair,
)
from .server import TritonEnvironment, TritonEnvironmentError, TritonServer, TritonServerError
from .special_tokens import SpecialTokenFilter, strip_special_tokens

__all__ = [
    "EndpointSpec",
    "GenerationResult",
    "Prompt",
    "SamplingParams",
    "SpecialTokenFilter",
    "StreamEvent",
    "TritonEnvironment",
    "TritonEnvironmentError",
    "TritonServer",
    "TritonServerError",
    "generate",
    "generate_pair",
    "stream_pair",
    "strip_special_tokens",
]
