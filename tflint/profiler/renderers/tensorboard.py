"""``--logdir DIR``: the run's time series as TensorBoard scalars in ``DIR/tflint``.

Tags (all under ``tflint/``): ``step_time_s``, ``input_wait_share``, ``retraces`` (cumulative
count), ``host_rss_bytes`` and ``device_memory_bytes`` (TensorFlow's allocator; one tag per
device when there are several, ``device_memory_bytes/GPU:0``), ``loss`` (the training loss as
the in-graph probe saw it) and ``grad_norm`` (global gradient norm; ``grad_norm/<layer>`` per
layer); where gradient calls at different lines train different models (a GAN's players), each
line's own ``loss/<file>:<line>`` and ``grad_norm/<file>:<line>`` instead of the two shared ones. Series are written point by point at their step; a single
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

from tflint.profiler.renderers import (
    device_memory,
    metric_scalar,
    metric_series,
    series_values,
)

if TYPE_CHECKING:
    from tflint.profiler.report import Report

RUN_NAME = "tflint"


def scalar_points(report: Report) -> dict[str, list[tuple[int, float]]]:
    """``{tag: [(step, value), ...]}`` for every metric that has data."""
    m = report.metrics
    last_step = max(int(report.steps or 0), 0)
    out: dict[str, list[tuple[int, float]]] = {}

    def put(tag: str, pts: list[tuple[float, float]], scalar: float | None = None) -> None:
        merged: dict[int, float] = {}
        for x, y in pts:
            merged[int(round(x))] = y  # TensorBoard keeps one value per step: the latest wins
        if not merged and scalar is not None:
            merged[last_step] = scalar
        if merged:
            out[f"{RUN_NAME}/{tag}"] = sorted(merged.items())

    put("step_time_s", metric_series(m.get("step_time_s")))
    put("input_wait_share", metric_series(m.get("input_wait_share")),
        metric_scalar(m.get("input_wait_share")))
    put("retraces", series_values(m.get("retraces_series")), metric_scalar(m.get("retraces"), ("total",)))
    put("host_rss_bytes", metric_series(m.get("host_rss_bytes")))
    # training health: the loss and the gradient norms (global, and per layer)
    gn = m.get("grad_norm") if isinstance(m.get("grad_norm"), dict) else {}
    separate = [e for e in m.get("losses") or [] if isinstance(e, dict)]
    if separate:  # a GAN's players: one loss and one norm each (the shared series interleave them)
        for e in separate:
            loc = e.get("location") if isinstance(e.get("location"), dict) else {}
            at = f"{os.path.basename(str(loc.get('file')))}:{loc.get('line')}" if loc else "unknown"
            put(f"loss/{at}", metric_series(e.get("loss")))
            put(f"grad_norm/{at}", metric_series(e.get("grad_norm")))
    else:
        put("loss", metric_series(m.get("loss")))
        put("grad_norm", metric_series(gn.get("global")))
    layers = gn.get("layers") if isinstance(gn.get("layers"), dict) else {}
    for layer, series in layers.items():
        put(f"grad_norm/{layer}", metric_series(series))
    devices = device_memory(m.get("device_memory_bytes"))
    for dev, entry in devices.items():
        tag = "device_memory_bytes" if len(devices) == 1 else f"device_memory_bytes/{dev}"
        put(tag, entry["series"], entry["current"])
    return out


class TensorBoardRenderer:
    def __init__(self, logdir: str | os.PathLike[str]) -> None:
        self.logdir = os.fspath(logdir)
        self.run_dir = os.path.join(self.logdir, RUN_NAME)

    def render(self, report: Report) -> str:
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
