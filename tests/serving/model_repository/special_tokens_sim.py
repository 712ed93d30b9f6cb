"""A model that answers with special tokens in its text, as a real one did (Gemma 3 270M began an answer
with `<start_of_image>` eight times), for the tests of serving/triton/special_tokens.py.

`CHUNKS` is the answer as the streamed model sends it, one response per chunk, with tokens split across
chunks; the model of the `arena` contract answers the same text in one piece. `SHOWN` is what a rater may
see of it: the text without its tokens, nothing else changed (a lone `<`, a bracket that is not a token)."""

from __future__ import annotations

CHUNKS = (
    "<start_of_image>" * 6,
    "<start_of",
    "_image><start_of_image>The answer",
    " is <",
    "|im_end",
    "|> forty-two",
    " [IN",
    "ST]: a < b",
    " and [x] <",
    "/s> done<e",
    "nd_of_turn>",
)
SHOWN = "The answer is  forty-two : a < b and [x]  done"


def respond(pb_utils: object, request: object, *, streamed: bool) -> object:
    """One response for the arena contract; for the vLLM one, send every chunk, then the empty final."""
    import numpy as np

    tensor = pb_utils.Tensor  # type: ignore[attr-defined]
    response = pb_utils.InferenceResponse  # type: ignore[attr-defined]
    if not streamed:
        text = "".join(CHUNKS)
        return response(
            output_tensors=[
                tensor("text_output", np.array([text.encode("utf-8")], dtype=np.object_)),
                tensor("output_tokens", np.array([len(CHUNKS)], dtype=np.int32)),
                tensor("finish_reason", np.array([b"stop"], dtype=np.object_)),
            ]
        )
    sender = request.get_response_sender()  # type: ignore[attr-defined]
    for index, chunk in enumerate(CHUNKS):
        last = index == len(CHUNKS) - 1
        sender.send(
            response(
                output_tensors=[
                    tensor("text_output", np.array([chunk.encode("utf-8")], dtype=np.object_)),
                    tensor("finish_reason", np.array([b"stop" if last else b"None"], dtype=np.object_)),
                    tensor("num_output_tokens", np.array([1], dtype=np.uint32)),
                ]
            )
        )
    sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)  # type: ignore[attr-defined]
    return None
