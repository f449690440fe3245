"""One BLAS thread for a block of small matrix products, set by the process itself (threadpoolctl).

The complexity classifier's per-question work is a few tiny matrix products (~0.5 ms). OpenBLAS runs
them on as many threads as there are cores; when other processes keep those cores busy, its worker
threads wait for CPU time and a ~1 ms classification takes tens of milliseconds (p95 in the hundreds;
docs/RESULTS.md). One thread is as fast on a quiet machine and stays fast on a busy one, so the
classifier step runs inside `single_blas_thread()` and nobody needs OPENBLAS_NUM_THREADS=1.

The limit is process-wide: the OpenBLAS in numpy's and scipy's wheels (pthreads) has no per-thread
setting (its `openblas_set_num_threads_local` sets the global count too). So blocks entered by
several threads at once share one limit: the first in sets it, the last out restores the previous
count; an answer computed meanwhile in another thread runs its BLAS calls on one thread for those
~1 ms, which costs little. threadpoolctl (3.6+) lets only one Python thread, the first that set a
limit, change OpenBLAS's count and silently ignores the others; since answers run in whichever
worker thread is free, each change here first clears that ownership (`force=True`, its documented
escape) and releases it again afterwards.
"""
from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_lock = threading.Lock()
_inside = 0  # blocks currently inside single_blas_thread(), in any thread
_limiter: Any = None  # threadpoolctl's limit while _inside > 0
_controller: Any = None


def _blas_controller() -> Any:
    """threadpoolctl's view of the loaded libraries, made once (inspecting them costs ~ms, a limit
    through it ~20 µs), on first use: numpy's and scipy's BLAS are loaded by then."""
    global _controller
    if _controller is None:
        from threadpoolctl import ThreadpoolController

        _controller = ThreadpoolController()
    return _controller


def _release_openblas_ownership() -> None:
    import threadpoolctl

    openblas = getattr(threadpoolctl, "OpenBLASController", None)
    if openblas is not None and hasattr(openblas, "clear_controlling_thread"):  # threadpoolctl >= 3.6
        openblas.clear_controlling_thread(force=True)


@contextmanager
def single_blas_thread() -> Iterator[None]:
    """BLAS calls inside the block run on one thread (see the module docstring)."""
    global _inside, _limiter
    with _lock:
        if _inside == 0:
            _release_openblas_ownership()
            _limiter = _blas_controller().limit(limits=1, user_api="blas")
        _inside += 1
    try:
        yield
    finally:
        with _lock:
            _inside -= 1
            if _inside == 0:
                _release_openblas_ownership()  # this thread may not be the one that set the limit
                _limiter.restore_original_limits()
                _limiter = None
                _release_openblas_ownership()  # other code may limit BLAS from any thread
