"""``KerasCallback``: the same hooks and report for code that trains with ``model.fit``.

::

    cb = tflint.runtime.KerasCallback()
    model.fit(ds, epochs=3, callbacks=[cb])
    print(cb.report.to_json())

If a ``watch()`` session is already active (e.g. under ``tflint profile``) the callback only
feeds it exact step boundaries; otherwise it starts its own session at ``on_train_begin`` and
stops it at ``on_train_end`` (also when training stops with an exception, through ``close()``).
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

import keras

from tflint.runtime.watch import ProfileSession, active_session


class KerasCallback(keras.callbacks.Callback):
    def __init__(
        self,
        signals: Iterable[str] | None = None,
        live: Callable[[dict[str, Any]], None] | None = None,
        session: ProfileSession | None = None,
        json_path: str | None = None,
    ) -> None:
        super().__init__()
        self._signals = signals
        self._live = live
        self.session: ProfileSession | None = session
        self._own = False
        self.json_path = json_path
        self.report: Any = None

    def on_train_begin(self, logs: Any = None) -> None:
        active = active_session()
        if active is not None:
            self.session = active
            self._own = False
            return
        if self.session is None:
            self.session = ProfileSession(signals=self._signals, live=self._live)
        self.session.__enter__()
        self._own = True
        self._check_model()

    def _check_model(self) -> None:
        """A model that trains with no trainable variables (fit binds ``train_step`` before
        ``on_train_begin``, so an owned session checks the model here)."""
        s = self.session
        dead = s.hooks.get("dead-parameter") if s is not None else None
        model = getattr(self, "model", None)
        if dead is None or not dead.active or model is None:
            return
        try:
            if not getattr(model, "built", False):
                from tflint.runtime.dead_params import untracked_variables

                if not untracked_variables(model):
                    return  # not built yet: its weights may simply not exist yet
            dead._on_train_step(model)
        except Exception as exc:  # noqa: BLE001
            dead.fail(exc, "Keras callback model check")

    def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
        s = self.session
        if s is not None and s.steps is not None and s.enabled:
            try:
                s.steps.keras_batch_end(self.model)
            except Exception as exc:  # noqa: BLE001
                s.steps.fail(exc, "Keras callback")

    def on_train_end(self, logs: Any = None) -> None:
        self.close()

    def close(self) -> None:
        """Stop an owned session and build the report (idempotent)."""
        s = self.session
        if s is None:
            return
        if self._own:
            s.__exit__(None, None, None)
            self._own = False
        self.report = s.report(script="<keras>")
        if self.json_path:
            self.report.save(self.json_path)
