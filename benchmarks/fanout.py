"""Fan-out benchmark: is a battle as fast as its slower side, or as slow as both sides in a row?

    python benchmarks/fanout.py [--battles 60] [--protocol grpc|http] [--fast-ms 200] [--slow-ms 240]

Starts a real Triton server with two delay models (fixed, different delays) in a temporary model
repository, then runs each battle twice, interleaved so that both measurements see the same machine
state: once through `generate_pair` (concurrent) and once as two `generate` calls in a row (the
sequential baseline). Prints median/p90 battle wall time, the ratio of the wall time to the slower
side's measured latency (target <= 1.05 at the median) and to the sum of both sides' latencies
(slow / (fast + slow) when truly concurrent: 0.5 for equal delays, 0.55 for the default 200/240 ms; about 1.0
for the baseline). Exits 1 if the median ratio to the
slower side is above 1.05.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from serving.triton.client import EndpointSpec, GenerationResult, SamplingParams, generate, generate_pair  # noqa: E402
from serving.triton.server import TritonServer  # noqa: E402

TARGET_RATIO_TO_SLOWER = 1.05

CONFIG = """\
backend: "python"
max_batch_size: 0
input [
  {{ name: "text_input" data_type: TYPE_STRING dims: [ 1 ] }},
  {{ name: "system_prompt" data_type: TYPE_STRING dims: [ 1 ] optional: true }},
  {{ name: "max_tokens" data_type: TYPE_INT32 dims: [ 1 ] optional: true }},
  {{ name: "temperature" data_type: TYPE_FP32 dims: [ 1 ] optional: true }},
  {{ name: "top_p" data_type: TYPE_FP32 dims: [ 1 ] optional: true }},
  {{ name: "seed" data_type: TYPE_UINT64 dims: [ 1 ] optional: true }}
]
output [
  {{ name: "text_output" data_type: TYPE_STRING dims: [ 1 ] }},
  {{ name: "output_tokens" data_type: TYPE_INT32 dims: [ 1 ] }},
  {{ name: "finish_reason" data_type: TYPE_STRING dims: [ 1 ] }}
]
instance_group [ {{ count: {instances} kind: KIND_CPU }} ]
parameters {{ key: "delay_ms" value: {{ string_value: "{delay_ms}" }} }}
"""

MODEL = """\
import json
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        params = json.loads(args["model_config"])["parameters"]
        self.delay_s = float(params["delay_ms"]["string_value"]) / 1000.0

    def execute(self, requests):
        time.sleep(self.delay_s)
        return [
            pb_utils.InferenceResponse(
                output_tensors=[
                    pb_utils.Tensor("text_output", np.array([b"done"], dtype=np.object_)),
                    pb_utils.Tensor("output_tokens", np.array([1], dtype=np.int32)),
                    pb_utils.Tensor("finish_reason", np.array([b"stop"], dtype=np.object_)),
                ]
            )
            for _ in requests
        ]
"""


def write_repository(root: Path, delays_ms: dict[str, int]) -> Path:
    for name, delay_ms in delays_ms.items():
        (root / name / "1").mkdir(parents=True)
        (root / name / "config.pbtxt").write_text(CONFIG.format(delay_ms=delay_ms, instances=1))
        (root / name / "1" / "model.py").write_text(MODEL)
    return root


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    position = (len(ordered) - 1) * q
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def summarise(label: str, walls: list[float], sides: list[tuple[GenerationResult, GenerationResult]]) -> float:
    to_slower = [w / max(a.latency_s, b.latency_s) for w, (a, b) in zip(walls, sides, strict=True)]
    to_sum = [w / (a.latency_s + b.latency_s) for w, (a, b) in zip(walls, sides, strict=True)]
    median_ratio = statistics.median(to_slower)
    median_ms, p90_ms = statistics.median(walls) * 1000, percentile(walls, 0.9) * 1000
    print(
        f"{label:<22} wall median {median_ms:7.1f} ms   p90 {p90_ms:7.1f} ms"
        f"   wall/slower median {median_ratio:5.3f} (p90 {percentile(to_slower, 0.9):5.3f})"
        f"   wall/sum median {statistics.median(to_sum):5.3f}"
    )
    return median_ratio


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--battles", type=int, default=60)
    parser.add_argument("--protocol", choices=["grpc", "http"], default="grpc")
    parser.add_argument("--fast-ms", type=int, default=200)
    parser.add_argument("--slow-ms", type=int, default=240)
    parser.add_argument("--warmup", type=int, default=3)
    args = parser.parse_args(argv)
    if args.battles < 1:
        parser.error("--battles must be >= 1")

    params = SamplingParams(temperature=0.7, top_p=0.9, max_tokens=64, system_prompt="", seed=1)
    with tempfile.TemporaryDirectory(prefix="arena-fanout-") as tmp:
        repository = write_repository(Path(tmp), {"bench-fast": args.fast_ms, "bench-slow": args.slow_ms})
        with TritonServer([repository]) as server:
            url = server.grpc_url if args.protocol == "grpc" else server.http_url
            left = EndpointSpec(url, args.protocol, "bench-fast")
            right = EndpointSpec(url, args.protocol, "bench-slow")
            for _ in range(args.warmup):
                generate_pair(left, right, "warm-up", params)

            pair_walls: list[float] = []
            pair_sides: list[tuple[GenerationResult, GenerationResult]] = []
            seq_walls: list[float] = []
            seq_sides: list[tuple[GenerationResult, GenerationResult]] = []
            for battle in range(args.battles):
                prompt = f"battle {battle}"
                started = time.perf_counter()
                pair = generate_pair(left, right, prompt, params)
                pair_walls.append(time.perf_counter() - started)
                pair_sides.append(pair)

                started = time.perf_counter()
                sequential = (generate(left, prompt, params), generate(right, prompt, params))
                seq_walls.append(time.perf_counter() - started)
                seq_sides.append(sequential)

    failures = [r.error for pair in pair_sides + seq_sides for r in pair if not r.ok]
    if failures:
        print(f"{len(failures)} calls failed, e.g.: {failures[0]}", file=sys.stderr)
        return 2

    print(
        f"{args.battles} battles over {args.protocol}: delay models {args.fast_ms} ms and {args.slow_ms} ms "
        f"(+ warm-up {args.warmup})"
    )
    fast_latency = statistics.median(a.latency_s for a, _ in pair_sides)
    slow_latency = statistics.median(b.latency_s for _, b in pair_sides)
    print(f"side latency median    fast {fast_latency * 1000:7.1f} ms   slow {slow_latency * 1000:7.1f} ms")
    ideal = slow_latency / (fast_latency + slow_latency)
    print(f"ideal (truly concurrent): wall/slower 1.000, wall/sum {ideal:5.3f} (0.5 for equal delays)")
    ratio = summarise("generate_pair", pair_walls, pair_sides)
    summarise("sequential (baseline)", seq_walls, seq_sides)
    speedup = statistics.median(seq_walls) / statistics.median(pair_walls)
    print(f"speed-up of generate_pair over the baseline (median walls): {speedup:4.2f}x")
    verdict = "PASS" if ratio <= TARGET_RATIO_TO_SLOWER else "FAIL"
    print(f"{verdict}: median wall/slower {ratio:.3f} (target <= {TARGET_RATIO_TO_SLOWER})")
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    raise SystemExit(main())
