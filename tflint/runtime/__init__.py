"""Runtime hooks into TensorFlow: ``watch()``, ``ProfileSession`` and the Keras callback.

Importing this package does not import TensorFlow; the hooks import it when a session starts.
"""

from __future__ import annotations

from typing import Any

from tflint.runtime.watch import ProfileSession, active_session, watch

__all__ = ["watch", "ProfileSession", "KerasCallback", "active_session"]


def __getattr__(name: str) -> Any:
    if name == "KerasCallback":
        from tflint.runtime.keras_callback import KerasCallback

        return KerasCallback
    raise AttributeError(name)
