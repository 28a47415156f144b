"""``gc_paused`` across threads: the collector stays off until the last block leaves."""

from __future__ import annotations

import gc
import threading

from ppdm.mining.kernel import gc_paused


def test_the_collector_stays_off_until_the_last_thread_leaves():
    """Two threads in overlapping blocks (as two parties simulated in one process): the
    first to leave must not turn the collector back on under the other's block."""
    was = gc.isenabled()
    gc.enable()
    try:
        inside = threading.Barrier(2)
        first_left = threading.Event()
        seen: list[bool] = []

        def early() -> None:
            with gc_paused():
                inside.wait(timeout=10)
            first_left.set()

        def late() -> None:
            with gc_paused():
                inside.wait(timeout=10)
                assert first_left.wait(timeout=10)
                seen.append(gc.isenabled())

        threads = [threading.Thread(target=early), threading.Thread(target=late)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=20)
        assert seen == [False]
        assert gc.isenabled()  # on again once both have left
    finally:
        if not was:
            gc.disable()


def test_a_collector_that_was_off_stays_off_and_nesting_restores():
    was = gc.isenabled()
    try:
        gc.disable()
        with gc_paused(), gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
        gc.enable()
        with gc_paused():
            with gc_paused():
                pass
            assert not gc.isenabled()  # the outer block is still inside
        assert gc.isenabled()
    finally:
        (gc.enable if was else gc.disable)()


def test_an_exception_in_the_block_still_restores_the_collector():
    was = gc.isenabled()
    gc.enable()
    try:
        try:
            with gc_paused():
                raise RuntimeError("boom")
        except RuntimeError:
            pass
        assert gc.isenabled()
    finally:
        (gc.enable if was else gc.disable)()
