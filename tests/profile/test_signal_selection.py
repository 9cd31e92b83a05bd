"""`tflint profile --signals KINDS`: the kinds left out are not collected, are marked "off" in
the report, and (training health) leave no ops of their own in the user's graphs."""

from __future__ import annotations

import textwrap

from tests.profile.conftest import run_profile

HEALTH_KINDS = ("nan-inf", "dead-parameter", "exploding-gradient", "vanishing-gradient", "loss-stall",
                "loss-broadcast")

# a custom loop whose loss is -log(0) = +inf at step 7; it prints how many of the traced step's
# ops are tflint's training-health probe
SCRIPT = textwrap.dedent(
    """
    import tensorflow as tf

    w = tf.Variable(1.0)
    opt = tf.keras.optimizers.SGD(0.01)


    @tf.function
    def step(x):
        with tf.GradientTape() as tape:
            loss = -tf.math.log(w * x)
        grads = tape.gradient(loss, [w])
        opt.apply_gradients(zip(grads, [w]))
        return loss


    for i in range(12):
        step(tf.constant(0.0 if i == 6 else 1.0))
    graph = step.get_concrete_function(tf.TensorSpec([], tf.float32)).graph
    print("probe ops:", sum(op.name.startswith("tflint_health") for op in graph.get_operations()))
    """
)


def _probe_ops(run) -> int:
    line = next(x for x in run.stdout.splitlines() if x.startswith("probe ops:"))
    return int(line.split(":")[1])


def test_leaving_out_training_health_collects_none_of_it_and_adds_no_ops(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    full = run_profile(script, json_path=tmp_path / "all.json")
    assert full.returncode == 0, full.explain()
    assert [s["details"]["tensor"] for s in full.signals("nan-inf")] == ["the loss"], full.explain()
    assert _probe_ops(full) > 0

    run = run_profile(script, options=("--signals", "retrace,none-gradient,input-stall"),
                      json_path=tmp_path / "some.json")
    assert run.returncode == 0, run.explain()
    assert _probe_ops(run) == 0, run.explain()
    assert not any(run.signals(k) for k in HEALTH_KINDS), run.explain()
    hooks = run.report["metrics"]["hooks"]
    for kind in (*HEALTH_KINDS, "soft-placement", "memory-growth"):
        assert hooks[kind]["status"] == "off", (kind, hooks[kind])
    for kind in ("retrace", "none-gradient", "input-stall"):
        assert hooks[kind]["status"] == "ok", (kind, hooks[kind])
    # the terminal says so instead of showing them as passed
    nan_line = next(x for x in run.stderr.splitlines() if x.startswith("nan-inf"))
    assert "off" in nan_line and "OK" not in nan_line, run.stderr


def test_training_health_alone_with_fail_on(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    run = run_profile(script, options=("--signals", "training-health", "--fail-on", "nan-inf"),
                      json_path=tmp_path / "r.json")
    assert run.returncode == 3, run.explain()  # the script exited 0; nan-inf fired
    assert run.signals("nan-inf") and _probe_ops(run) > 0
    hooks = run.report["metrics"]["hooks"]
    assert all(hooks[k]["status"] == "ok" for k in HEALTH_KINDS), hooks
    assert all(hooks[k]["status"] == "off" for k in ("retrace", "none-gradient", "soft-placement", "input-stall",
                                                     "memory-growth")), hooks
