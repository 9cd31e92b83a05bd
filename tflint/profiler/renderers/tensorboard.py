"""``--logdir DIR``: the run's time series as TensorBoard scalars in ``DIR/tflint``.

Tags (all under ``tflint/``): ``step_time_s``, ``input_wait_share``, ``retraces``,
``host_rss_bytes`` and ``device_memory_bytes`` (one tag per device when there are several,
``device_memory_bytes/GPU:0``). Series are written point by point at their step; a single
figure is written at the run's last step. Point ``tensorboard --logdir DIR`` at the same
directory as the training's own summaries and tflint's curves appear as the ``tflint`` run.

The scalars are written with ``tf.summary`` (TensorFlow is already loaded in a profile run).
When the script switched eager execution off globally, they are written as plain ``Event``
records instead, which TensorBoard reads the same way.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any

from tflint.profiler.renderers import series_values

if TYPE_CHECKING:
    from tflint.profiler.report import Report

RUN_NAME = "tflint"
_METRICS = ("step_time_s", "input_wait_share", "retraces", "host_rss_bytes", "device_memory_bytes")


def scalar_points(report: "Report") -> dict[str, list[tuple[int, float]]]:
    """``{tag: [(step, value), ...]}`` for every metric that has data."""
    out: dict[str, list[tuple[int, float]]] = {}
    last_step = max(int(report.steps or 0), 0)
    for name in _METRICS:
        value = report.metrics.get(name)
        if isinstance(value, dict):
            # per device ({"GPU:0": series}) or a summary ({"total": n, ...})
            if name == "retraces" and isinstance(value.get("total"), (int, float)):
                out[f"{RUN_NAME}/{name}"] = _points(value["total"], last_step)
                continue
            for key, sub in value.items():
                pts = _points(sub, last_step)
                if pts:
                    out[f"{RUN_NAME}/{name}/{key}"] = pts
            continue
        pts = _points(value, last_step)
        if pts:
            out[f"{RUN_NAME}/{name}"] = pts
    return out


def _points(value: Any, last_step: int) -> list[tuple[int, float]]:
    if isinstance(value, bool) or value is None:
        return []
    if isinstance(value, (int, float)):
        return [(last_step, float(value))]
    pts = series_values(value)
    merged: dict[int, float] = {}
    for x, y in pts:
        merged[int(round(x))] = y  # TensorBoard keeps one value per step: the latest wins
    return sorted(merged.items())


class TensorBoardRenderer:
    def __init__(self, logdir: str | os.PathLike[str]) -> None:
        self.logdir = os.fspath(logdir)
        self.run_dir = os.path.join(self.logdir, RUN_NAME)

    def render(self, report: "Report") -> str:
        points = scalar_points(report)
        os.makedirs(self.run_dir, exist_ok=True)
        import tensorflow as tf

        if tf.executing_eagerly():
            self._write_summary(tf, points)
        else:
            self._write_events(tf, points)
        return self.run_dir

    def _write_summary(self, tf: Any, points: dict[str, list[tuple[int, float]]]) -> None:
        writer = tf.summary.create_file_writer(self.run_dir)
        try:
            with writer.as_default():
                for tag, pts in points.items():
                    for step, value in pts:
                        tf.summary.scalar(tag, value, step=step)
            writer.flush()
        finally:
            writer.close()

    def _write_events(self, tf: Any, points: dict[str, list[tuple[int, float]]]) -> None:
        from tensorflow.core.framework import summary_pb2
        from tensorflow.core.util import event_pb2

        now = time.time()
        name = f"events.out.tfevents.{int(now)}.{os.uname().nodename}.{os.getpid()}.tflint"
        with tf.io.TFRecordWriter(os.path.join(self.run_dir, name)) as w:
            w.write(event_pb2.Event(wall_time=now, file_version="brain.Event:2").SerializeToString())
            for tag, pts in points.items():
                for step, value in pts:
                    summary = summary_pb2.Summary(
                        value=[summary_pb2.Summary.Value(tag=tag, simple_value=value)]
                    )
                    event = event_pb2.Event(wall_time=now, step=step, summary=summary)
                    w.write(event.SerializeToString())
