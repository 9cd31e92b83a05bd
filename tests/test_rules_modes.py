"""TFL6xx on realistic code: serving functions, loss/model pairing, log-softmax, layer modes."""

from __future__ import annotations

import ast
import textwrap

from tests.rule_harness import run_rules
from tflint.rules.modes import (
    HardCodedTrainingInCall,
    LogitsProbabilitiesMismatch,
    LogOfSoftmax,
    TrainingTrueInServing,
)


def lines(src: str, rule) -> list[int]:
    return [f.line for f in run_rules(textwrap.dedent(src), [rule])]


def test_tfl601_serving_functions_found_through_signatures_and_input_signature():
    src = """
    import tensorflow as tf

    class Exporter(tf.Module):
        def __init__(self, model):
            self.model = model

        @tf.function
        def serve(self, x):
            return self.model(x, training=True)

        @tf.function
        def debug(self, x):
            return self.model(x, training=True)

    @tf.function(input_signature=[tf.TensorSpec([None, 3])])
    def infer(x):
        return model(x, training=False)

    @tf.function(input_signature=[tf.TensorSpec([None, 3])])
    def train(x):
        with tf.GradientTape() as tape:
            y = model(x, training=True)
        return tape.gradient(y, model.trainable_variables)

    exporter = Exporter(model)
    sigs = {"serving_default": exporter.serve.get_concrete_function(tf.TensorSpec([None, 3]))}
    tf.saved_model.save(exporter, "/tmp/out", signatures=sigs)
    """
    assert lines(src, TrainingTrueInServing) == [10]


def test_tfl601_model_save_with_signatures_keyword():
    src = """
    import tensorflow as tf

    def serve_fn(x):
        return {"y": model(x, training=True)}

    serve = tf.function(serve_fn)
    model.save("out", signatures=serve.get_concrete_function(tf.TensorSpec([None, 3])))
    """
    assert lines(src, TrainingTrueInServing) == [5]


def test_tfl602_pairs_each_loss_spelling_with_the_last_layer():
    src = textwrap.dedent(
        """
        import tensorflow as tf
        from tensorflow import keras
        from tensorflow.keras import layers

        a = keras.Sequential([layers.Dense(4, activation="relu"), layers.Dense(3, activation=None)])
        a.compile(loss=keras.losses.categorical_crossentropy)

        b = keras.Sequential([layers.Dense(3), layers.Activation("softmax")])
        b.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))

        c = keras.Sequential([layers.Dense(3, activation=tf.nn.softmax)])
        c.compile(loss="categorical_crossentropy")

        d = keras.Sequential([layers.Dense(3, activation="relu")])
        d.compile(loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))

        e = keras.Sequential([layers.Dense(3)])
        e.compile(loss=keras.losses.SparseCategoricalCrossentropy(from_logits=use_logits))

        f = keras.Sequential([layers.Dense(3)])
        f.compile(loss={"out": "sparse_categorical_crossentropy"})
        """
    )
    # Keras 3 (the default target) takes the logits behind a softmax output itself: only the
    # raw-logits case is reported (tests/premises/test_modes.py); for Keras 2 both are.
    found = run_rules(src, [LogitsProbabilitiesMismatch])
    assert [(x.line, x.col) for x in found] == [(7, 15)]
    assert "line 6" in found[0].message and "raw logits" in found[0].message
    from tflint.analysis import Analysis
    from tflint.analysis.version import TargetVersion
    from tflint.rules.base import RuleContext

    tree = ast.parse(src)
    ctx = RuleContext("m.py", src, tree, Analysis(tree, src, TargetVersion((2, 15), 2)))
    LogitsProbabilitiesMismatch().run(ctx)
    found = sorted(ctx.findings, key=lambda f: f.sort_key())
    assert [(x.line, x.col) for x in found] == [(7, 15), (10, 18)]
    assert "line 9" in found[1].message and "softmax" in found[1].message


def test_tfl602_unknown_models_stay_silent():
    src = """
    from tensorflow import keras

    def fit(model):
        model.compile(loss="sparse_categorical_crossentropy")

    m = keras.models.load_model("x.keras")
    m.compile(loss="sparse_categorical_crossentropy")
    """
    assert lines(src, LogitsProbabilitiesMismatch) == []


def test_tfl603_variants():
    src = """
    import tensorflow as tf
    import keras
    a = tf.math.log(tf.nn.softmax(x, axis=1))
    b = keras.ops.log(keras.activations.sigmoid(x))
    c = tf.math.log(tf.nn.softmax(x) + 1e-7)
    d = tf.math.log(tf.nn.relu(x))
    e = tf.nn.log_softmax(x)
    """
    assert lines(src, LogOfSoftmax) == [4, 5]


def test_tfl603_axis_that_cannot_be_kept_has_no_fix():
    src = textwrap.dedent(
        """
        import keras
        import tensorflow as tf
        a = tf.math.log(tf.nn.softmax(x, axis=[1, 2]))
        """
    )
    (f,) = run_rules(src, [LogOfSoftmax])
    assert f.fix is None


def test_tfl604_only_dropout_and_batchnorm_in_layer_call():
    src = """
    import tensorflow as tf
    from tensorflow.keras import layers

    class Block(layers.Layer):
        def __init__(self):
            super().__init__()
            self.drop = layers.SpatialDropout2D(0.1)
            self.inner = layers.Dense(3)
            self.noise = layers.GaussianNoise(0.1)

        def call(self, x, training=None):
            x = self.inner(x, training=True)
            x = self.drop(x, training=True)
            x = self.noise(x, training=training)
            return x

        def warmup(self, x):
            return self.drop(x, training=True)

    class Plain:
        def __init__(self):
            self.drop = layers.Dropout(0.1)

        def call(self, x):
            return self.drop(x, training=True)
    """
    assert lines(src, HardCodedTrainingInCall) == [14]


def test_tfl609_keras_2_targets_and_explicit_seeds_stay_silent():
    from tflint.analysis import Analysis
    from tflint.analysis.version import TargetVersion
    from tflint.rules.base import RuleContext
    from tflint.rules.modes import TfSeedDoesNotSeedKeras3

    src = textwrap.dedent(
        """
        import tensorflow as tf

        tf.random.set_seed(42)
        model = tf.keras.Sequential([tf.keras.layers.Dense(10)])
        """
    )
    assert len(run_rules(src, [TfSeedDoesNotSeedKeras3])) == 1  # Keras 3, the default target
    tree = ast.parse(src)
    ctx = RuleContext("m.py", src, tree, Analysis(tree, src, TargetVersion((2, 15), 2)))
    TfSeedDoesNotSeedKeras3().run(ctx)
    assert ctx.findings == []  # TensorFlow 2.15's Keras 2 reads TensorFlow's global seed
    only_seeded = "import tensorflow as tf\n\ndef f():\n    tf.random.set_seed(1)\n    return tf.keras.initializers.Orthogonal(seed=1)\n"
    assert run_rules(only_seeded, [TfSeedDoesNotSeedKeras3]) == []
