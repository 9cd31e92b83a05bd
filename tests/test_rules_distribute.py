"""TFL505-TFL508 (tf.distribute rules): fixtures, tricky look-alikes, and the strategy analysis."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.rule_harness import expected, run_rules
from tflint.analysis import Analysis
from tflint.rules import get_rule

ROOT = Path(__file__).resolve().parents[1]
CODES = ("TFL505", "TFL506", "TFL507", "TFL508")
FIXTURES = sorted((ROOT / "fixtures" / "check").glob("distribute_*.py")) + sorted(
    (ROOT / "fixtures" / "distributed").glob("*.py")
)
RULES = [get_rule(c) for c in CODES]


def _run(src: str, code: str | None = None):
    rules = [get_rule(code)] if code else RULES
    return [(f.line, f.code) for f in run_rules(src, rules)]


@pytest.mark.parametrize("path", FIXTURES, ids=[p.name for p in FIXTURES])
def test_fixture_findings_match_expect_markers(path):
    src = path.read_text(encoding="utf-8")
    want = [(line, code) for line, code in expected(src) if code in CODES]
    assert sorted(_run(src)) == want


def test_every_code_fires_at_least_twice_on_fixtures():
    counts = {c: 0 for c in CODES}
    for path in FIXTURES:
        for _, code in _run(path.read_text(encoding="utf-8")):
            counts[code] += 1
    assert all(n >= 2 for n in counts.values()), counts


def test_clean_fixtures_are_clean_and_exist():
    clean = [p for p in FIXTURES if "clean" in p.name]
    assert len(clean) >= 2
    for path in clean:
        assert _run(path.read_text(encoding="utf-8")) == [], path.name


def test_severities():
    sev = {r.code: r.severity.value for r in RULES}
    assert sev == {"TFL505": "error", "TFL506": "warning", "TFL507": "error", "TFL508": "error"}


# -- TFL505 ------------------------------------------------------------------------------
def test_505_function_called_both_inside_and_outside_scope_is_reported():
    src = (
        "import tensorflow as tf\n\n"
        "def make():\n    return tf.keras.optimizers.Adam()\n\n"
        "strategy = tf.distribute.MirroredStrategy()\n"
        "with strategy.scope():\n    a = make()\n"
        "b = make()\n"
        "strategy.run(lambda: b.apply_gradients([]))\n"
    )
    assert _run(src, "TFL505") == [(4, "TFL505")]


def test_505_silent_without_scope_or_run():
    # a strategy that is only inspected (no scope, no run) is not "used for training"
    src = (
        "import tensorflow as tf\n\nstrategy = tf.distribute.MirroredStrategy()\n"
        "print(strategy.num_replicas_in_sync)\nmodel = tf.keras.Sequential()\n"
    )
    assert _run(src, "TFL505") == []


def test_505_strategy_from_factory_and_conditional():
    src = (
        "import tensorflow as tf\n\n"
        "def get_strategy(multi):\n"
        "    return tf.distribute.MultiWorkerMirroredStrategy() if multi else tf.distribute.MirroredStrategy()\n\n"
        "strategy = get_strategy(True)\n"
        "opt = tf.keras.optimizers.SGD()\n"
        "with strategy.scope():\n    model = tf.keras.Sequential()\n"
        "    model.compile(optimizer=opt)\n"
    )
    assert _run(src, "TFL505") == [(7, "TFL505")]


def test_505_methods_and_uncalled_functions_are_not_judged():
    src = (
        "import tensorflow as tf\n\nstrategy = tf.distribute.MirroredStrategy()\n"
        "class Trainer:\n    def __init__(self):\n        self.opt = tf.keras.optimizers.Adam()\n"
        "def unused_helper():\n    return tf.Variable(0)\n"
        "with strategy.scope():\n    t = Trainer()\n"
    )
    assert _run(src, "TFL505") == []


# -- TFL506 ------------------------------------------------------------------------------
def test_506_while_loop_with_next_on_plain_iterator():
    src = (
        "import tensorflow as tf\n\nstrategy = tf.distribute.MirroredStrategy()\n"
        "ds = tf.data.Dataset.range(10).batch(2)\nit = iter(ds)\n"
        "def step(x):\n    return x\n"
        "while True:\n    strategy.run(step, args=(next(it),))\n"
    )
    assert _run(src, "TFL506") == [(5, "TFL506")]


def test_506_distributed_iterator_is_fine():
    src = (
        "import tensorflow as tf\n\nstrategy = tf.distribute.MirroredStrategy()\n"
        "ds = tf.data.Dataset.range(10).batch(2)\n"
        "it = iter(strategy.experimental_distribute_dataset(ds))\n"
        "def step(x):\n    return x\n"
        "for _ in range(3):\n    strategy.run(step, args=(next(it),))\n"
    )
    assert _run(src, "TFL506") == []


# -- TFL507 ------------------------------------------------------------------------------
def test_507_guarded_by_if_on_task_type():
    src = (
        "import tensorflow as tf\n\nstrategy = tf.distribute.MultiWorkerMirroredStrategy()\n"
        "with strategy.scope():\n    model = tf.keras.Sequential()\n"
        "if strategy.cluster_resolver.task_type == 'chief':\n    model.save('/m.keras')\n"
        "else:\n    model.save('/tmp/m.keras')\n"
    )
    # the else-branch is still under the role test: the path is chosen per role
    assert _run(src, "TFL507") == []


def test_507_only_under_multi_worker():
    src = (
        "import tensorflow as tf\n\nstrategy = tf.distribute.MirroredStrategy()\n"
        "writer = tf.summary.create_file_writer('/logs')\n"
    )
    assert _run(src, "TFL507") == []


def test_507_numpy_and_plot_saves_are_not_model_saves():
    src = (
        "import numpy as np\nimport tensorflow as tf\n\n"
        "strategy = tf.distribute.MultiWorkerMirroredStrategy()\n"
        "np.save('/x.npy', np.zeros(2))\nfig.savefig('/plot.png')\nresults.save('/r')\n"
    )
    assert _run(src, "TFL507") == []


# -- TFL508 ------------------------------------------------------------------------------
def test_508_reduce_mean_over_features_is_per_example():
    src = (
        "import tensorflow as tf\n\nstrategy = tf.distribute.MirroredStrategy()\n"
        "def step(x, y):\n    with tf.GradientTape() as tape:\n"
        "        per_example = tf.reduce_mean(tf.square(model(x) - y), axis=1)\n"
        "        loss = tf.reduce_sum(per_example) * (1.0 / GLOBAL)\n"
        "    return tape.gradient(loss, model.trainable_variables)\n"
        "strategy.run(step, args=(1, 2))\n"
    )
    assert _run(src, "TFL508") == []


def test_508_reduce_mean_over_batch_axis_zero():
    src = (
        "import tensorflow as tf\n\nstrategy = tf.distribute.MirroredStrategy()\n"
        "def step(x, y):\n    with tf.GradientTape() as tape:\n"
        "        loss = tf.reduce_mean(tf.square(model(x) - y), axis=0)\n"
        "    return tape.gradient(loss, model.trainable_variables)\n"
        "strategy.run(step, args=(1, 2))\n"
    )
    assert _run(src, "TFL508") == [(6, "TFL508")]


def test_508_loss_object_with_sum_reduction_not_flagged():
    src = (
        "import tensorflow as tf\n\nstrategy = tf.distribute.MirroredStrategy()\n"
        "loss_obj = tf.keras.losses.MeanSquaredError(reduction=tf.keras.losses.Reduction.NONE)\n"
        "def step(x, y):\n    with tf.GradientTape() as tape:\n"
        "        loss = tf.nn.compute_average_loss(loss_obj(y, model(x)))\n"
        "    return tape.gradient(loss, model.trainable_variables)\n"
        "strategy.run(step, args=(1, 2))\n"
    )
    assert _run(src, "TFL508") == []


# -- analysis --------------------------------------------------------------------------
def test_strategy_facts_on_fixture():
    src = (ROOT / "fixtures" / "check" / "distribute_clean_custom_loop.py").read_text()
    tree = ast.parse(src)
    facts = Analysis(tree, src).strategies
    assert facts.kinds == {"MirroredStrategy"}
    assert len(facts.scope_blocks) == 1
    assert [f.name for f in facts.replica_functions] == ["replica_step"]
    assert len(facts.run_calls) == 1
    assert not facts.multi_worker


def test_tfl505_a_loss_metric_updated_outside_the_replica_function():
    # BERT-NER's trainer: the metric is made in the function that drives strategy.run and fed the
    # reduced loss in the eager loop (inside a scope block); only its own methods are called, so
    # it counts the same as one made in the scope (tests/premises/test_distribute.py)
    src = '''
import tensorflow as tf

def main(ner, optimizer, dist_dataset):
    strategy = tf.distribute.MirroredStrategy()
    loss_metric = tf.keras.metrics.Mean()

    def train_step(x):
        def step_fn(x):
            return ner(x)
        per_example = strategy.run(step_fn, args=(x,))
        return strategy.reduce(tf.distribute.ReduceOp.MEAN, per_example, axis=0)

    with strategy.scope():
        for x in dist_dataset:
            loss = train_step(x)
            loss_metric(loss)
            print(f"loss: {loss_metric.result()}")
    loss_metric.reset_states()
    {extra}


main(load_model(), None, [])
'''
    assert [f for f in _run(src.replace("{extra}", ""), "TFL505")] == []
    # passed to something the strategy runs (compile's metrics): reported
    compiled = src.replace("{extra}", "with strategy.scope():\n        ner.compile(metrics=[loss_metric])")
    assert _run(compiled, "TFL505") == [(6, "TFL505")]
