"""Rule-level fixes (TFL101, TFL401, TFL402, TFL603): exact text, comments kept, imports only
when needed, the result parses, and a second run finds nothing left to fix."""

from __future__ import annotations

import ast
import textwrap

import pytest

from tflint.analysis import Analysis
from tflint.analysis.version import make_target
from tflint.check.fix import apply_fixes, parses
from tflint.rules.base import RuleContext
from tflint.rules.input_pipeline import DatasetWithoutPrefetch, MapWithoutParallelCalls
from tflint.rules.modes import LogOfSoftmax
from tflint.rules.side_effects import PrintInTracedCode

FIX_RULES = [PrintInTracedCode, DatasetWithoutPrefetch, MapWithoutParallelCalls, LogOfSoftmax]
# TensorFlow 2.5 neither injects a prefetch nor parallelizes a map on its own: TFL401 and TFL402
# then fire on every unprefetched pipeline and every map without `num_parallel_calls`, which is
# what these fix tests need (on newer targets they fire for narrower cases; see
# tests/test_rules_input.py).
TARGET = make_target("2.5")


def run_rules(source: str, rules):
    tree = ast.parse(source)
    ctx = RuleContext("example.py", source, tree, Analysis(tree, source, TARGET))
    for rule in rules:
        rule().run(ctx)
    return sorted(ctx.findings, key=lambda f: f.sort_key())


def fix(source: str, rules=FIX_RULES, passes: int = 5) -> str:
    """Apply safe fixes until nothing changes, the way `--fix` does."""
    text = source
    for _ in range(passes):
        fixes = [f.fix for f in run_rules(text, rules) if f.fix and f.fix.applicability == "safe"]
        new, applied = apply_fixes(text, fixes)
        if not applied or new == text:
            break
        text = new
    return text


def assert_fixed_and_stable(fixed: str, rules=FIX_RULES) -> None:
    ast.parse(fixed)
    assert parses(fixed) is None
    left = [f for f in run_rules(fixed, rules) if f.fix]
    assert left == [], left
    # idempotence: fixing the fixed text changes nothing
    assert fix(fixed, rules) == fixed


def test_prefetch_appended_to_last_transformation_keeping_comments():
    src = textwrap.dedent(
        '''\
        """Train."""
        import tensorflow as tf


        def make(files):
            ds = (
                tf.data.TFRecordDataset(files)  # raw records
                .map(parse, num_parallel_calls=tf.data.AUTOTUNE)
                .batch(64)  # big batches
            )
            return ds


        for batch in make(["a"]):
            pass
        '''
    )
    out = fix(src, [DatasetWithoutPrefetch])
    assert out == src.replace(".batch(64)  # big", ".batch(64).prefetch(tf.data.AUTOTUNE)  # big")
    assert out.count("import tensorflow") == 1
    assert_fixed_and_stable(out, [DatasetWithoutPrefetch])


def test_prefetch_fix_uses_the_module_alias_and_adds_an_import_only_when_missing():
    with_alias = "import tensorflow as tensorflow_lib\n\nds = tensorflow_lib.data.Dataset.range(8).batch(2)\nfor x in ds:\n    pass\n"
    out = fix(with_alias, [DatasetWithoutPrefetch])
    assert "ds = tensorflow_lib.data.Dataset.range(8).batch(2).prefetch(tensorflow_lib.data.AUTOTUNE)\n" in out
    assert out.count("import ") == 1

    no_module_import = (
        '"""Doc."""\nfrom __future__ import annotations\n'
        "from tensorflow.data import Dataset\n\nds = Dataset.range(8).batch(2)\nfor x in ds:\n    pass\n"
    )
    out = fix(no_module_import, [DatasetWithoutPrefetch])
    assert out == (
        '"""Doc."""\nfrom __future__ import annotations\nimport tensorflow as tf\n'
        "from tensorflow.data import Dataset\n\nds = Dataset.range(8).batch(2).prefetch(tf.data.AUTOTUNE)\n"
        "for x in ds:\n    pass\n"
    )
    assert_fixed_and_stable(out, [DatasetWithoutPrefetch])


def test_one_prefetch_for_a_dataset_consumed_twice():
    src = "import tensorflow as tf\nds = tf.data.Dataset.range(8).batch(2)\nmodel.fit(ds)\nmodel.evaluate(ds)\n"
    findings = run_rules(src, [DatasetWithoutPrefetch])
    assert [f.line for f in findings] == [3, 4]
    out = fix(src, [DatasetWithoutPrefetch])
    assert out.count(".prefetch(") == 1
    assert_fixed_and_stable(out, [DatasetWithoutPrefetch])


def test_num_parallel_calls_added_after_the_last_argument():
    src = textwrap.dedent(
        """\
        import tensorflow as tf
        ds = tf.data.Dataset.range(8)
        ds = ds.map(lambda x: x + 1)
        ds = ds.map(
            lambda x: x * 2,  # double
            deterministic=False,
        )
        """
    )
    out = fix(src, [MapWithoutParallelCalls])
    assert out == textwrap.dedent(
        """\
        import tensorflow as tf
        ds = tf.data.Dataset.range(8)
        ds = ds.map(lambda x: x + 1, num_parallel_calls=tf.data.AUTOTUNE)
        ds = ds.map(
            lambda x: x * 2,  # double
            deterministic=False, num_parallel_calls=tf.data.AUTOTUNE,
        )
        """
    )
    assert_fixed_and_stable(out, [MapWithoutParallelCalls])


@pytest.mark.parametrize(
    "before, after",
    [
        ("tf.math.log(tf.nn.softmax(logits, axis=1))", "tf.nn.log_softmax(logits, axis=1)"),
        ("tf.math.log(tf.nn.softmax(logits, -1))", "tf.nn.log_softmax(logits, -1)"),
        ("tf.math.log(tf.sigmoid(z))", "tf.math.log_sigmoid(z)"),
        ("tf.math.log(keras.activations.softmax(logits))", "tf.nn.log_softmax(logits)"),
        ("keras.ops.log(keras.ops.softmax(logits, axis=-1))", "keras.ops.log_softmax(logits, axis=-1)"),
        ("ops.log(ops.sigmoid(z))", "ops.log_sigmoid(z)"),
    ],
)
def test_log_softmax_rewrites(before, after):
    src = f"import keras\nfrom keras import ops\nimport tensorflow as tf\n\nloss = -{before}  # per class\n"
    out = fix(src, [LogOfSoftmax])
    assert out == f"import keras\nfrom keras import ops\nimport tensorflow as tf\n\nloss = -{after}  # per class\n"
    assert_fixed_and_stable(out, [LogOfSoftmax])


def test_log_softmax_fix_adds_tensorflow_import_for_keras_activations():
    src = "from tensorflow import keras\n\ny = keras.ops.log(keras.activations.sigmoid(z))\n"
    out = fix(src, [LogOfSoftmax])
    assert out == "import tensorflow as tf\nfrom tensorflow import keras\n\ny = tf.math.log_sigmoid(z)\n"
    assert_fixed_and_stable(out, [LogOfSoftmax])


def test_log_softmax_with_a_comment_between_the_calls_is_not_fixed():
    src = "import tensorflow as tf\ny = tf.math.log(  # probs\n    tf.nn.softmax(x))\n"
    (finding,) = run_rules(src, [LogOfSoftmax])
    assert finding.fix is None


def test_print_fix_with_and_without_a_tensorflow_import():
    src = textwrap.dedent(
        """\
        from tensorflow import function


        @function
        def step(x):
            print("x", x)  # debug
            return x
        """
    )
    out = fix(src, [PrintInTracedCode])
    assert out == "import tensorflow as tf\n" + src.replace('    print("x"', '    tf.print("x"')
    assert_fixed_and_stable(out, [PrintInTracedCode])

    aliased = "import tensorflow as tensorflow_lib\n\n@tensorflow_lib.function\ndef step(x):\n    print(x)\n    return x\n"
    out = fix(aliased, [PrintInTracedCode])
    assert out == aliased.replace("    print(x)", "    tensorflow_lib.print(x)")
    assert_fixed_and_stable(out, [PrintInTracedCode])


def test_all_fixes_together_on_a_training_script():
    src = textwrap.dedent(
        '''\
        """Script with several fixable findings at once."""
        import tensorflow as tf


        def parse(x):
            return tf.cast(x, tf.float32)


        ds = tf.data.Dataset.range(100).map(parse).batch(10)  # pipeline


        @tf.function
        def step(x):
            print("batch")  # trace-time only
            return -tf.reduce_sum(tf.math.log(tf.nn.softmax(x)))


        for batch in ds:
            step(batch)
        '''
    )
    out = fix(src)
    assert "ds = tf.data.Dataset.range(100).map(parse, num_parallel_calls=tf.data.AUTOTUNE).batch(10).prefetch(tf.data.AUTOTUNE)  # pipeline" in out
    assert '    tf.print("batch")  # trace-time only' in out
    assert "tf.reduce_sum(tf.nn.log_softmax(x))" in out
    assert out.count("import tensorflow") == 1
    assert_fixed_and_stable(out)


def test_log_softmax_fix_stays_in_keras_when_the_module_does_not_use_tensorflow():
    src = "import keras\n\ny = keras.ops.log(keras.activations.softmax(z, axis=-1))\n"
    out = fix(src, [LogOfSoftmax])
    assert out == "import keras\n\ny = keras.activations.log_softmax(z, axis=-1)\n"
    assert_fixed_and_stable(out, [LogOfSoftmax])
