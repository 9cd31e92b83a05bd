"""Retrace detection on real TensorFlow (CPU): causes, call sites, and nothing on clean code."""

from __future__ import annotations

import sys

import pytest

tf = pytest.importorskip("tensorflow")

from tflint.runtime import watch  # noqa: E402

HERE = __file__


def here() -> int:
    return sys._getframe(1).f_lineno


def retraces(report):
    return report.signals_of("retrace")


def test_python_int_argument_retraces_with_cause_and_call_site():
    @tf.function
    def step_fn(x, step):
        return x * 2.0 + step

    x = tf.zeros([4])
    with watch(signals={"retrace"}) as s:
        for i in range(3, 8):
            line = here() + 1
            step_fn(x, i)
    rep = s.report()
    sigs = retraces(rep)
    assert len(sigs) == 1
    sig = sigs[0]
    assert sig.details["function"] == "step_fn"
    assert sig.details["retraces"] == 4
    assert sig.details["causes"] == ["step: Python int 3 -> 4"]
    assert sig.location.file == HERE and sig.location.line == line
    assert "tf.constant" in sig.message
    assert rep.metrics["retraces"] == 4


def test_shape_and_dtype_changes_are_named():
    @tf.function
    def f(x):
        return tf.reduce_sum(x)

    with watch(signals={"retrace"}) as s:
        f(tf.zeros([32, 17]))
        line = here() + 1
        f(tf.zeros([32, 18]))
        f(tf.zeros([32, 18], tf.float64))
    sig = retraces(s.report())[0]
    assert sig.location.line == line and sig.location.file == HERE
    causes = [c for e in sig.details["examples"] for c in e["causes"]]
    assert "x: TensorSpec(shape=(32, 17)) -> (32, 18)" in causes
    assert "x: dtype float32 -> float64" in causes
    assert "input_signature" in sig.message


def test_new_python_object_is_reported():
    class Cfg:  # no __eq__/__hash__: matched by identity
        def __init__(self, scale):
            self.scale = scale

    @tf.function
    def g(x, cfg):
        return x * cfg.scale

    keep = []
    with watch(signals={"retrace"}) as s:
        for _ in range(3):
            keep.append(Cfg(2.0))
            g(tf.ones([2]), keep[-1])
    sig = retraces(s.report())[0]
    assert sig.details["retraces"] == 2
    assert any("cfg: new Python object (Cfg)" in c for c in sig.details["causes"])


def test_variable_creation_double_trace_and_stable_calls_are_clean():
    holder = {}

    @tf.function
    def with_var(x):
        if "v" not in holder:
            holder["v"] = tf.Variable(1.0)
        return x + holder["v"]

    @tf.function
    def plain(x):
        return x * 3.0

    ds = tf.data.Dataset.range(8).map(lambda i: tf.cast(i, tf.float32) * 2.0).batch(4)
    with watch(signals={"retrace"}) as s:
        for _ in range(5):
            with_var(tf.ones([3]))
            plain(tf.ones([4]))
        for b in ds:
            plain(b)
    rep = s.report()
    assert retraces(rep) == []
    assert rep.metrics["retraces"] == 0
    assert rep.metrics["traces"] >= 3  # with_var twice (variable creation), plain once per shape


def test_tf_function_created_in_a_loop():
    with watch(signals={"retrace"}) as s:
        for i in range(6):
            line = here() + 1
            fn = tf.function(lambda x: x + 1.0)
            fn(tf.ones([2]))
    sigs = retraces(s.report())
    assert len(sigs) == 1
    assert sigs[0].details["function_objects"] == 6
    assert "outside the loop" in sigs[0].message
    assert sigs[0].location.file == HERE
    assert sigs[0].location.line == line + 1


def test_hook_removed_after_exit():
    from tensorflow.python.eager.polymorphic_function import transform

    before = list(transform.CONCRETE_FUNCTION_CALLBACKS)
    with watch(signals={"retrace"}):
        assert len(transform.CONCRETE_FUNCTION_CALLBACKS) == len(before) + 1
    assert transform.CONCRETE_FUNCTION_CALLBACKS == before


def test_traces_made_while_saving_a_savedmodel_are_not_retraces(tmp_path):
    """``tf.saved_model.save`` traces the functions it exports again, once, after training (here
    four more traces of the model's ``__call__``). Counted as retraces they turned a final partial
    batch's one retrace (info, "drop_remainder") into "4 retraces" of mixed causes (a warning)."""

    class Dense(tf.Module):
        def __init__(self):
            self.w = tf.Variable(tf.ones([8, 2]))

        @tf.function
        def __call__(self, x):
            return tf.matmul(x, self.w)

    class Export(tf.Module):
        def __init__(self, model):
            self.model = model

        @tf.function(input_signature=[tf.TensorSpec([None, 8], tf.float32)])
        def __call__(self, x):
            return tf.argmax(self.model(x), axis=1)

    model = Dense()
    with watch(signals={"retrace"}) as s:
        for batch in [32, 32, 32, 20]:  # the last batch is partial
            model(tf.zeros([batch, 8]))
        before = model.__call__.experimental_get_tracing_count()
        tf.saved_model.save(Export(model), str(tmp_path / "export"))
    assert model.__call__.experimental_get_tracing_count() > before + 1  # saving traced it again
    (sig,) = [x for x in retraces(s.report()) if x.details["function"] == "__call__" and x.details["traces"] > 1]
    assert sig.details["traces"] == 2 and sig.details["retraces"] == 1, sig.message
    assert sig.details["partial_batch"] == {"args": ["x"], "full": 32, "partial": 20, "partials": [20]}
    assert sig.severity == "info"
    assert s.store.counters.get("retrace.export_traces", 0) >= 2


def test_last_batches_of_the_training_and_validation_sets_are_partial_batch_retraces():
    """A model's forward ``tf.function`` called on a training set (last batch 20 of 32) and a
    validation set (last batch 6): two retraces, one per batch size, not one per step (info)."""
    w = tf.Variable(tf.ones([8, 2]))
    forward = tf.function(lambda x: tf.matmul(x, w))
    train = tf.data.Dataset.from_tensor_slices(tf.zeros([84, 8])).batch(32)
    val = tf.data.Dataset.from_tensor_slices(tf.zeros([38, 8])).batch(32)
    with watch(signals={"retrace"}) as s:
        for _ in range(3):
            for x in train:
                forward(x)
            for x in val:
                forward(x)
    (sig,) = retraces(s.report())
    assert (sig.details["traces"], sig.details["retraces"]) == (3, 2)
    assert sig.severity == "info"
    assert sig.details["partial_batch"]["partials"] == [20, 6] and sig.details["partial_batch"]["full"] == 32
    assert "final partial batches (20 and 6 instead of 32) give `x`" in sig.message


def test_a_shrinking_batch_on_every_call_is_not_a_partial_batch():
    w = tf.Variable(tf.ones([8, 2]))
    forward = tf.function(lambda x: tf.matmul(x, w), reduce_retracing=False)
    with watch(signals={"retrace"}) as s:
        for n in range(20, 12, -1):
            forward(tf.zeros([n, 8]))
    (sig,) = retraces(s.report())
    assert sig.severity == "warning" and sig.details["partial_batch"] is None


def test_the_initializer_of_a_first_traces_variables_is_not_a_trace_of_the_function():
    """A step whose first trace creates variables (an optimizer's slots) is traced twice, and
    TensorFlow traces an initializer for those variables on its behalf: two traces of the step's
    body, not three."""
    keras = pytest.importorskip("keras")
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(1)])
    opt = keras.optimizers.Adam(1e-2)
    body_runs = []

    @tf.function
    def train_step(x):
        body_runs.append(x.shape)
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(model(x) ** 2)
        opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))

    with watch(signals={"retrace"}) as s:
        for batch in [32, 32, 32, 4]:
            train_step(tf.ones([batch, 8]))
    assert len(body_runs) == train_step.experimental_get_tracing_count() == 3
    (sig,) = retraces(s.report())
    assert (sig.details["traces"], sig.details["retraces"]) == (3, 1), sig.message


def test_one_function_called_from_two_places_with_two_structures_is_traced_once_per_place():
    """keras-io's DDPG: one soft-update function for two target networks of 4 and 6 variables,
    called from two places every step. TensorFlow traces it once per place and reuses each trace:
    an info, with nothing to fix."""
    actor = [tf.Variable(tf.zeros([3])) for _ in range(4)]
    critic = [tf.Variable(tf.zeros([3])) for _ in range(6)]

    @tf.function
    def update_target(targets, tau):
        for v in targets:
            v.assign(v * (1.0 - tau) + tau)

    w = tf.Variable(1.0)

    @tf.function
    def update():  # the training step
        with tf.GradientTape() as tape:
            loss = w * w
        w.assign_sub(0.1 * tape.gradient(loss, w))

    tau = tf.constant(0.1)
    with watch(signals={"retrace"}) as s:
        for _ in range(30):
            update()
            update_target(actor, tau)
            line = here() + 1
            update_target(critic, tau)
    (sig,) = retraces(s.report())
    assert sig.severity == "info" and sig.details["call_sites"] == 2
    assert sig.location.line == line
    assert "once for each of the 2 places" in sig.message and "nothing is needed" in sig.message


def test_a_second_place_whose_argument_keeps_changing_still_warns():
    @tf.function
    def f(x, k):
        return x + k

    x = tf.zeros([2])
    w = tf.Variable(1.0)

    @tf.function
    def update():
        with tf.GradientTape() as tape:
            loss = w * w
        w.assign_sub(0.1 * tape.gradient(loss, w))

    with watch(signals={"retrace"}) as s:
        for k in range(12):
            update()
            f(x, 0)
            f(x, k + 1)  # a new Python int every step
    (sig,) = retraces(s.report())
    assert sig.severity == "warning" and sig.details["call_sites"] is None


def test_a_tf_function_method_of_several_instances_is_not_created_in_a_loop():
    """keras-io's Barlow Twins: five augmentation layers share a ``tf.function`` method. Each
    instance gets a tf.function object of its own, traced once: nothing is re-created."""

    class Aug:
        @tf.function
        def random_execute(self, prob):
            return tf.random.uniform([]) < prob

    augs = [Aug() for _ in range(5)]
    with watch(signals={"retrace"}) as s:
        for _ in range(20):
            for a in augs:
                a.random_execute(0.5)
    assert retraces(s.report()) == []


def test_a_tuple_then_a_list_is_named_as_a_container_change_with_its_fix():
    """``reduce_retracing`` and an input_signature do not help here (checked: a tuple, then a
    list, of the same tensors still traces twice with reduce_retracing=True); the fix is to pass
    one container type."""

    def add(batch):
        return batch[0] + batch[1]

    x = tf.ones([4])
    relaxed = tf.function(add, reduce_retracing=True)
    for batch in [(x, x), [x, x], (x, x), [x, x]]:
        relaxed(batch)
    assert relaxed.experimental_get_tracing_count() == 2
    step = tf.function(add)
    with watch(signals={"retrace"}) as s:
        step((x, x))
        step([x, x])
        step((x, x))
    assert step.experimental_get_tracing_count() == 2
    (sig,) = retraces(s.report())
    assert sig.details["causes"] == ["batch: container type tuple -> list (another container type is another trace)"]
    assert sig.details["fix"] == "pass the same container type on every call (a tuple each time, or a list each time)"
