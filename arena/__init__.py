import os

# One BLAS thread a process unless the operator says otherwise (ARENA_BLAS_THREADS, or the libraries' own
# variables). Arena runs many processes on the same cores (web workers, Celery workers); OpenBLAS's threads
# spin while they wait, and with more of them than free cores a 100,000-vote validation took 52 s instead of
# 1.5 s on the 2-core development machine under load. Set before numpy is first imported (numpy reads these
# when it loads).
for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, os.environ.get("ARENA_BLAS_THREADS", "1"))

from .celery import app as celery_app  # noqa: E402

__all__ = ("celery_app",)
