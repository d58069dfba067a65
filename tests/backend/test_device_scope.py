"""An op inside a forward skips the device scope only where the backend has none to enter."""

from __future__ import annotations


def test_a_backend_that_overrides_device_scope_keeps_it_inside_a_forward() -> None:
    from minitorch_accum.backend import Backend, NumpyBackend

    class Scoped(NumpyBackend):
        def device_scope(self):  # type: ignore[no-untyped-def]
            return super().device_scope()

    assert Scoped.has_device_scope and not NumpyBackend.has_device_scope and not Backend.has_device_scope
