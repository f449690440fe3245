"""The adaptive classifier runs its small matrix products on one BLAS thread, set by hypa itself."""
from __future__ import annotations

import threading

import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits

from core.params import DEFAULT_CONFIG_PATH, load_configs
from core.types import RetrievalParams


def _blas_threads() -> set[int]:
    return {lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"}


class _ThreadsSeen:
    """A classifier that records how many BLAS threads its matrix products would get."""

    def __init__(self) -> None:
        self.seen: list[set[int]] = []

    def predict(self, question, vector=None) -> int:
        self.seen.append(_blas_threads())
        np.ones((64, 384), dtype=np.float32) @ np.ones((384, 128), dtype=np.float32)
        return 1


def test_the_classifier_step_uses_one_blas_thread_without_openblas_num_threads():
    """Both cores busy: the default two BLAS threads made a 1.5 ms classification take tens of ms
    unless the user exported OPENBLAS_NUM_THREADS=1 (docs/RESULTS.md)."""
    from core.adaptive import ConfigPolicy

    assert _blas_threads(), "numpy has no BLAS that threadpoolctl can see"
    classifier = _ThreadsSeen()
    base = RetrievalParams(top_k=7, fusion="rankedFusion", alpha=0.5)
    policy = ConfigPolicy(load_configs(DEFAULT_CONFIG_PATH)["pa-3class"], base, classifier)
    with threadpool_limits(limits=2, user_api="blas"):  # what OpenBLAS picks on a 2-core machine
        params, label = policy.select("Who may conduct a bias audit?", None)
        assert label == 1 and params.config == "pa-3class"
        assert classifier.seen == [{1}]
        assert _blas_threads() == {2}  # restored afterwards: the index's large products keep two


def test_overlapping_blocks_in_worker_threads_restore_the_count_when_the_last_leaves():
    """Answers run in whichever worker thread is free, several at once, and those threads stay alive
    (thread pools): the first to enter is not the last to leave. threadpoolctl alone would ignore the
    last one's restore (only the first thread that set a limit may change OpenBLAS's count)."""
    from core.blas_threads import single_blas_thread

    first_in, second_in, first_out, second_out, stop = (threading.Event() for _ in range(5))
    seen: dict[str, set[int]] = {}

    def first() -> None:
        with single_blas_thread():
            first_in.set()
            second_in.wait(5)
        first_out.set()
        stop.wait(5)  # stays alive, like a pool's thread

    def second() -> None:
        first_in.wait(5)
        with single_blas_thread():
            second_in.set()
            first_out.wait(5)
            seen["second, after the first left"] = _blas_threads()
        second_out.set()
        stop.wait(5)

    with threadpool_limits(limits=2, user_api="blas"):
        workers = [threading.Thread(target=first), threading.Thread(target=second)]
        for w in workers:
            w.start()
        assert second_out.wait(10)
        seen["after both left"] = _blas_threads()
        stop.set()
        for w in workers:
            w.join(10)
    assert seen == {"second, after the first left": {1}, "after both left": {2}}
    with threadpool_limits(limits=1, user_api="blas"):  # and any thread may still set limits afterwards
        assert _blas_threads() == {1}
