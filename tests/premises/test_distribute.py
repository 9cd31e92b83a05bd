"""Premises of the tf.distribute rules (TFL505-TFL508), shown on TensorFlow 2.21.

The programs run in one fresh interpreter whose CPU is split into two logical devices before
TensorFlow starts, so ``MirroredStrategy`` has two real replicas; the multi-worker rule runs a
two-worker ``MultiWorkerMirroredStrategy`` job on loopback.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.premises._probe import ROOT, codes, findings as findings_of, run_isolated_many

pytest.importorskip("tensorflow")
pytestmark = pytest.mark.timeout(420)

HEAD = """
import tensorflow as tf

strategy = tf.distribute.MirroredStrategy([d.name for d in tf.config.list_logical_devices("CPU")])
"""

# -- TFL505 -------------------------------------------------------------------------------

BAD_505 = HEAD + """
model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(1)])
with strategy.scope():
    model.compile(optimizer="sgd", loss="mse")
try:
    model.fit(tf.ones([8, 4]), tf.ones([8, 1]), batch_size=8, epochs=1, verbose=0)
    outcome = "trained"
except Exception as e:
    outcome = type(e).__name__ + ": " + str(e)
RESULT = [strategy.num_replicas_in_sync, type(model.weights[0].value).__name__, outcome]
"""
GOOD_505 = HEAD + """
with strategy.scope():
    model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
model.fit(tf.ones([8, 4]), tf.ones([8, 1]), batch_size=8, epochs=1, verbose=0)
RESULT = [strategy.num_replicas_in_sync, type(model.weights[0].value).__name__, "trained"]
"""

# a metric made outside the scope and updated in the replica function, and a counter made
# outside it and updated by the eager loop: the same values as made inside it
OWN_METHODS_505 = HEAD + """
import keras
loss_metric = keras.metrics.Mean()
steps = tf.Variable(0, trainable=False)

def replica_step(x):
    loss_metric.update_state(x)
    return x

@tf.function
def train_step(x):
    return strategy.run(replica_step, args=(x,))

with strategy.scope():
    for x in strategy.experimental_distribute_dataset(tf.data.Dataset.range(8).map(lambda i: tf.cast(i, tf.float32)).batch(4)):
        train_step(x)
        steps.assign_add(1)
RESULT = [strategy.num_replicas_in_sync, float(loss_metric.result()), int(steps.numpy())]
"""
# a counter updated in the replica function: made outside the scope it counts every replica's
# step, made inside it (a mirrored variable) every step once
COUNTER_505 = HEAD + """
outside = tf.Variable(0, trainable=False)
with strategy.scope():
    inside = tf.Variable(0, trainable=False)

def replica_step(x):
    outside.assign_add(1)
    inside.assign_add(1)
    return x

@tf.function
def train_step(x):
    return strategy.run(replica_step, args=(x,))

for x in strategy.experimental_distribute_dataset(tf.data.Dataset.range(8).batch(4)):
    train_step(x)
RESULT = [int(outside.numpy()), int(inside.numpy())]
"""
# a variable made outside the scope and trained by an optimizer made inside it
TRAINED_505 = HEAD + """
import keras
temperature = tf.Variable(1.0)
with strategy.scope():
    optimizer = keras.optimizers.SGD(0.1)

def replica_step(x):
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(temperature * x) / 8.0
    grads = tape.gradient(loss, [temperature])
    optimizer.apply_gradients(zip(grads, [temperature]))
    return loss

@tf.function
def train_step(x):
    return strategy.run(replica_step, args=(x,))

for x in strategy.experimental_distribute_dataset(tf.data.Dataset.from_tensor_slices(tf.ones(8)).batch(8)):
    train_step(x)
RESULT = float(temperature.numpy())
"""

# -- TFL506 -------------------------------------------------------------------------------

LOOP_506 = HEAD + """
ds = tf.data.Dataset.range(16).batch(8)

def replica_fn(x):
    return tf.shape(x)[0]

sizes = []
for x in {source}:
    out = strategy.run(replica_fn, args=(x,))
    sizes.append([int(v) for v in strategy.experimental_local_results(out)])
RESULT = sizes
"""
BAD_506 = LOOP_506.format(source="ds")
GOOD_506 = LOOP_506.format(source="strategy.experimental_distribute_dataset(ds)")

# -- TFL508 -------------------------------------------------------------------------------

STEP_508 = HEAD + """
GLOBAL_BATCH = 8
with strategy.scope():
    w = tf.Variable(1.0)
    optimizer = tf.keras.optimizers.SGD(learning_rate=0.01)
x = tf.range(8, dtype=tf.float32)
ds = tf.data.Dataset.from_tensor_slices((x, 3.0 * x)).batch(GLOBAL_BATCH)

def replica_step(x, y):
    with tf.GradientTape() as tape:
        {loss}
    grads = tape.gradient(loss, [w])
    optimizer.apply_gradients(zip(grads, [w]))

@tf.function
def train_step(x, y):
    strategy.run(replica_step, args=(x, y))

for bx, by in strategy.experimental_distribute_dataset(ds):
    train_step(bx, by)
RESULT = float(w.numpy())
"""
BAD_508 = STEP_508.format(loss="loss = tf.reduce_mean(tf.square(w * x - y))")
GOOD_508 = STEP_508.format(
    loss="loss = tf.nn.compute_average_loss(tf.square(w * x - y), global_batch_size=GLOBAL_BATCH)"
)


@pytest.fixture(scope="module")
def mirrored():
    # TFL508 in its own interpreter: collectives launched by the strategies of the others would
    # share instance keys with its own.
    first, second, third = run_isolated_many([
        ({"bad505": BAD_505, "good505": GOOD_505, "bad506": BAD_506, "good506": GOOD_506}, 2),
        ({"bad508": BAD_508, "good508": GOOD_508}, 2),
        ({"own505": OWN_METHODS_505, "counter505": COUNTER_505, "trained505": TRAINED_505}, 2),
    ])
    return {**first, **second, **third}


def test_tfl505_model_built_outside_the_scope_is_not_mirrored(mirrored):
    bad, good = mirrored["bad505"], mirrored["good505"]
    assert good["result"] == [2, "MirroredVariable", "trained"], good
    if "result" in bad:  # built outside: one ordinary variable, not one copy per replica
        replicas, kind, outcome = bad["result"]
        assert replicas == 2 and kind != "MirroredVariable", bad
    else:  # or Keras refuses to train it
        assert "scope" in bad["error"], bad
    assert "TFL505" in codes(BAD_505) and "TFL505" not in codes(GOOD_505)


def test_tfl505_what_needs_the_scope_and_what_does_not(mirrored):
    """Made outside the scope, a metric updated in the replica function ends with the value it
    would have inside it (the mean of 0..7), and so does a counter the eager loop updates;
    a counter updated in the replica function counts each replica's step (4 for 2 steps on 2
    replicas, against 2 made inside the scope), and a variable trained by the strategy's
    optimizer fails."""
    assert mirrored["own505"]["result"] == [2, 3.5, 2], mirrored["own505"]
    assert mirrored["counter505"]["result"] == [4, 2], mirrored["counter505"]
    assert "error" in mirrored["trained505"], mirrored["trained505"]
    assert "TFL505" not in codes(OWN_METHODS_505)
    for src, made in ((COUNTER_505, "outside = tf.Variable(0, trainable=False)"),
                      (TRAINED_505, "temperature = tf.Variable(1.0)")):
        line = src.splitlines().index(made) + 1
        assert [f for f in findings_of(src) if f[1] == "TFL505"] == [(line, "TFL505")]


def test_tfl506_undistributed_batch_is_given_whole_to_every_replica(mirrored):
    assert mirrored["bad506"]["result"] == [[8, 8], [8, 8]], mirrored["bad506"]
    assert mirrored["good506"]["result"] == [[4, 4], [4, 4]], mirrored["good506"]
    assert "TFL506" in codes(BAD_506) and "TFL506" not in codes(GOOD_506)


def test_tfl508_per_replica_mean_doubles_the_gradient_with_two_replicas(mirrored):
    x = [float(i) for i in range(8)]
    grad = sum(2 * (1.0 * xi - 3.0 * xi) * xi for xi in x) / len(x)  # d/dw of the global mean
    expected = 1.0 - 0.01 * grad
    bad, good = mirrored["bad508"]["result"], mirrored["good508"]["result"]
    assert good == pytest.approx(expected, rel=1e-5), mirrored["good508"]
    assert bad == pytest.approx(1.0 - 0.01 * 2 * grad, rel=1e-5), mirrored["bad508"]  # N = 2 times
    assert "TFL508" in codes(BAD_508) and "TFL508" not in codes(GOOD_508)


# -- TFL507 -------------------------------------------------------------------------------

WRITE_507 = """
import json
import os
import tensorflow as tf

strategy = tf.distribute.MultiWorkerMirroredStrategy()
logdir = os.environ["LOGDIR"]
{path}
writer = tf.summary.create_file_writer(path)
with writer.as_default():
    tf.summary.scalar("loss", 1.0, step=0)
writer.flush()
"""
BAD_507 = WRITE_507.format(path="path = logdir")
GOOD_507 = WRITE_507.format(
    path=(
        "resolver = strategy.cluster_resolver\n"
        "is_chief = resolver.task_type in (None, 'chief') or resolver.task_id == 0\n"
        "path = logdir if is_chief else os.path.join(os.environ['SCRATCH'], f'worker{resolver.task_id}')"
    )
)


def _start_job(tmp_path, src: str, name: str):
    """Start ``src`` as both workers of a two-worker job writing under ``tmp_path/name``."""
    from tests.distributed.cluster import base_env, free_ports, tf_config

    logdir, scratch = tmp_path / name / "logs", tmp_path / name / "scratch"
    logdir.mkdir(parents=True)
    scratch.mkdir()
    ports = free_ports(2)
    procs = []
    for i in range(2):
        env = base_env()
        env.update(TF_CONFIG=tf_config(ports, i), LOGDIR=str(logdir), SCRATCH=str(scratch),
                   TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=str(ROOT))
        procs.append(subprocess.Popen([sys.executable, "-c", src], env=env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
    return logdir, procs


def _event_files(logdir, procs) -> list[str]:
    """Wait for the job's workers; the event files they left in ``logdir``."""
    try:
        errs = [p.communicate(timeout=180)[1] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert all(p.returncode == 0 for p in procs), [e[-1500:] for e in errs]
    return sorted(f for f in os.listdir(logdir) if "tfevents" in f)


def test_tfl507_every_worker_writes_the_shared_directory(tmp_path):
    jobs = [_start_job(tmp_path, BAD_507, "bad"), _start_job(tmp_path, GOOD_507, "good")]  # side by side
    bad, good = (_event_files(*job) for job in jobs)
    assert len(bad) == 2, json.dumps(bad)  # two interleaved runs in one TensorBoard directory
    assert len(good) == 1, json.dumps(good)
    assert "TFL507" in codes(BAD_507) and "TFL507" not in codes(GOOD_507)
