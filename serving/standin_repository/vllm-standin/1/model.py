"""Triton Python-backend entry point of the CPU stand-ins (`arena_standin.py`, loaded by path).

Which contract a stand-in speaks (`vllm` or `trtllm`), its contestant and its delays come from the
`parameters` of its `config.pbtxt`; this same file serves every stand-in.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path


def _load_arena_standin() -> types.ModuleType:
    # exec the source instead of importing it: an import would write __pycache__/ at the top of the
    # model repository, and Triton would take that folder for a model on its next start.
    path = Path(__file__).resolve().parents[2] / "arena_standin.py"
    module = types.ModuleType("arena_standin")
    module.__file__ = str(path)
    sys.modules["arena_standin"] = module  # dataclasses look their module up while being defined
    exec(compile(path.read_text(encoding="utf-8"), str(path), "exec"), module.__dict__)
    return module


class TritonPythonModel(_load_arena_standin().StandinModel):  # type: ignore[misc]
    pass
