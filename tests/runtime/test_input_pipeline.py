"""What tf.data really runs, on TensorFlow 2.21: the prefetch it injects, Keras' own pipeline
for NumPy arrays, and how tflint describes them (so it never suggests what is already there)."""

from __future__ import annotations

import time

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from tflint.runtime import watch  # noqa: E402
from tflint.runtime.input import describe_dataset  # noqa: E402

DELAY = 0.01


def _slow(x):
    time.sleep(DELAY)
    return x


def _pipeline(inject: bool | None):
    ds = tf.data.Dataset.range(12).map(lambda x: tf.py_function(_slow, [x], tf.int64))
    if inject is not None:
        opts = tf.data.Options()
        opts.experimental_optimization.inject_prefetch = inject
        ds = ds.with_options(opts)
    return ds


def _mean_wait(ds) -> float:
    """Mean time next() waits while a 10 ms step runs between fetches (first fetch excluded)."""
    it = iter(ds)
    next(it)
    waits = []
    for _ in range(10):
        time.sleep(DELAY)  # the step
        t0 = time.perf_counter()
        next(it)
        waits.append(time.perf_counter() - t0)
    return sorted(waits)[len(waits) // 2]


def test_premise_tf_injects_a_final_prefetch_unless_options_turn_it_off():
    # a synchronous last transformation gets a prefetch: the producer runs during the step
    injected = _mean_wait(_pipeline(None))
    off = _mean_wait(_pipeline(False))
    assert off > 0.6 * DELAY  # nothing overlaps: each fetch runs the 10 ms map
    assert injected < 0.5 * off


def test_description_knows_the_injected_prefetch():
    d = describe_dataset(_pipeline(None))
    assert d["injected_prefetch"] is True and d["final_prefetch"] is False
    d = describe_dataset(_pipeline(False))
    assert d["injected_prefetch"] is False and "inject_prefetch = False" in d["prefetch_note"]
    d = describe_dataset(_pipeline(None).prefetch(2))
    assert d["final_prefetch"] is True and d["injected_prefetch"] is False


def test_description_names_the_python_function_and_the_shuffle_it_fills():
    def decode(x):
        return tf.py_function(_slow, [x], tf.int64)

    ds = tf.data.Dataset.range(8).map(decode).shuffle(8).batch(2)
    d = describe_dataset(ds)
    assert d["py_function"] is True
    assert d["map_functions"][0]["function"].endswith("decode")
    assert d["map_functions"][0]["py_function"] == ["_slow"]
    assert d["shuffle"]["buffer_size"] == 8 and d["shuffle"]["filled_by"][0].endswith("decode")


def test_fit_on_numpy_arrays_is_described_as_keras_prefetched_pipeline():
    model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    x = np.zeros((64, 4), np.float32)
    y = np.zeros((64, 1), np.float32)
    with watch(signals={"input-stall"}) as s:
        model.fit(x, y, batch_size=16, epochs=1, verbose=0)
    summary = s.input.summary()
    d = summary["dataset"]
    assert d["final_prefetch"] is True and d.get("keras_adapter") is True
    assert d["sequential_map"] is False  # Keras' own permutation map is not the user's to change
    assert summary["steps"] == 4
