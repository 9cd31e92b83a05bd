"""Training-health fixtures under the real profiler: the right step, tensor, op, line, variable,
cause and rule code for each kind (the kind/line contract itself is in test_fixtures_profile.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.profile.conftest import expected_signals
from tflint.runtime.health import HEALTH_KINDS


def _only(run, kind):
    found = run.signals(kind)
    assert len(found) == 1, (kind, [s["message"] for s in run.signals()], run.explain()[-3000:])
    return found[0]


def _line(name, kind):
    return expected_signals(name)[kind][0]


def test_late_nan_is_localised_to_the_log_op_and_its_line(profiled):
    name = "nan_inf_late.py"
    s = _only(profiled(name), "nan-inf")
    d = s["details"]
    # scale starts at 3.0 and SGD(0.01) removes 0.01 per step: log(0) near step 300
    assert 280 <= d["step"] <= 320, d
    assert d["tensor"] == "the loss"
    assert d["localised"] is True and d["op"] == "Log" and d["backward"] is False
    assert "log of zero" in d["cause"]
    assert Path(s["location"]["file"]).name == name and s["location"]["line"] == _line(name, "nan-inf")
    assert f"at step {d['step']}" in s["message"] and "`Log`" in s["message"]
    # the loss series stops at the NaN (non-finite points are left out of the JSON)
    loss = profiled(name).report["metrics"]["loss"]
    assert loss and max(x for x, _ in loss) < d["step"] + 8


def test_nan_under_mirrored_strategy_counts_steps_once_and_finds_the_line(profiled):
    """Two replicas make two gradient calls per step, traced in threads of their own."""
    name = "nan_inf_mirrored.py"
    s = _only(profiled(name), "nan-inf")
    d = s["details"]
    assert 280 <= d["step"] <= 320, d  # not ~600: one step per run of the step function
    assert d["op"] == "Log" and d["localised"] and "log of zero" in d["cause"]
    assert s["location"]["line"] == _line(name, "nan-inf")
    assert d["gradient_call"][1] == _line(name, "nan-inf") + 1
    # one loss point per read, the replicas' shares added up: the labels are sums of 8 standard
    # normals, so the untrained MSE of the whole batch is ~8 (each replica's share is ~4)
    loss = profiled(name).report["metrics"]["loss"]
    assert len({x for x, _ in loss}) == len(loss)
    assert loss[0][1] > 5.5, loss[:3]


def test_nan_in_a_fit_loss_function_is_localised_to_the_users_line(profiled):
    name = "nan_inf_fit.py"
    s = _only(profiled(name), "nan-inf")
    d = s["details"]
    assert d["op"] == "Log" and d["localised"] and "log of zero" in d["cause"]
    assert s["location"]["line"] == _line(name, "nan-inf")
    assert d["step"] >= 1


def test_eager_nan_names_step_and_tensor_without_an_op(profiled):
    s = _only(profiled("nan_inf_eager.py"), "nan-inf")
    d = s["details"]
    assert d["localised"] is False and d["op"] is None
    assert d["tensor"] == "the loss" and d["step"] >= 1


def test_untracked_tf_variables_on_a_keras3_model_are_named(profiled):
    name = "dead_parameter_fit.py"
    run = profiled(name)
    s = _only(run, "dead-parameter")
    d = s["details"]
    assert d["reason"] == "no-trainable-variables" and d["model"] == "Linear"
    assert [u["attribute"] for u in d["untracked"]] == ["w", "b"]
    assert d["rule"] == "TFL608"
    assert "add_weight" in s["message"] and "`self.w`" in s["message"]
    # the loss really did not move: the premise of the finding
    losses = [float(x) for x in run.stdout.split("[", 1)[1].rstrip().rstrip("]").split(",")]
    assert len(set(losses)) == 1, losses


def test_untracked_model_in_a_custom_loop(profiled):
    s = _only(profiled("dead_parameter_untracked_loop.py"), "dead-parameter")
    assert s["details"]["reason"] == "no-trainable-variables"
    assert "empty list of variables" in s["message"]


def test_gradient_always_zero_names_the_variable(profiled):
    run = profiled("dead_parameter_loop.py")
    s = _only(run, "dead-parameter")
    d = s["details"]
    assert d["variables"] == ["gate"] and d["reason"] == "gradient-zero"
    assert "gate -5.0" in run.stdout  # it really never moved


def test_one_unit_softmax_stall_and_dead_parameters(profiled):
    """The stall and its cause hold on every CPU; the gradients are exactly zero only where the
    softmax gives exactly 1.0 (see the fixture): then, and only then, every gradient is reported
    zero and the four weights dead."""
    run = profiled("loss_stall_fit.py")
    stall = _only(run, "loss-stall")
    kinds = {c["kind"] for c in stall["details"]["causes"]}
    assert "one-unit-softmax" in kinds
    assert stall["details"]["relative_change"] < 0.01
    norms = [v for _, v in run.report["metrics"]["grad_norm"]["global"]]
    assert norms and max(norms) < 1e-5, norms[:5]  # zero, or the softmax's rounding error
    if max(norms) == 0:
        assert "all-zero" in kinds
        dead = _only(run, "dead-parameter")
        assert dead["details"]["reason"] == "gradient-zero" and len(dead["details"]["variables"]) == 4
    else:
        assert "all-zero" not in kinds and not run.signals("dead-parameter")


def test_tiny_learning_rate_stall(profiled):
    s = _only(profiled("loss_stall_loop.py"), "loss-stall")
    assert {c["kind"] for c in s["details"]["causes"]} == {"lr-tiny"}
    assert s["details"]["steps"] >= 100
    assert "learning rate" in s["message"]


@pytest.mark.parametrize("name", ["loss_stall_labels_fit.py", "loss_stall_labels_loop.py",
                                  "loss_stall_labels_mirrored_fit.py"])
def test_constant_labels_are_the_cause_even_when_the_loss_falls(profiled, name):
    run = profiled(name)
    s = _only(run, "loss-stall")
    causes = {c["kind"]: c for c in s["details"]["causes"]}
    assert set(causes) == {"labels-constant"}, causes
    assert causes["labels-constant"]["value"] == 1.0
    assert s["details"]["end"] < 0.1 * s["details"]["start"]  # it looks converged
    assert s["message"].startswith("Labels are constant: every label the loss saw in ")
    assert "is 1, so the model can only learn to output 1" in s["message"]
    assert s["location"]["line"] == _line(name, "loss-stall")


@pytest.mark.parametrize("name,shapes", [("loss_broadcast_loop.py", [[64, 1], [64]]),
                                         ("loss_broadcast_eager.py", [[64], [64, 1]])])
def test_loss_broadcast_names_op_shapes_and_line(profiled, name, shapes):
    s = _only(profiled(name), "loss-broadcast")
    d = s["details"]
    assert d["op"] == "Sub" and d["shapes"] == shapes and d["result_shape"] == [64, 64]
    assert d["rule"] == "TFL606" and d["eager"] is (name.endswith("eager.py"))
    assert s["location"]["line"] == _line(name, "loss-broadcast")


@pytest.mark.parametrize("name,layer", [("exploding_gradient_loop.py", "dense"),
                                        ("exploding_gradient_fit.py", "sequential/dense")])
def test_exploding_gradient_step_and_layer(profiled, name, layer):
    s = _only(profiled(name), "exploding-gradient")
    d = s["details"]
    assert d["norm"] > 1e4 and d["layer"] == layer
    assert 8 <= d["step"] <= 40
    assert d["growth"] is None or d["growth"] > 1e3


@pytest.mark.parametrize("name", ["vanishing_gradient_loop.py", "vanishing_gradient_fit.py"])
def test_vanishing_gradient_names_first_and_last_layer(profiled, name):
    s = _only(profiled(name), "vanishing-gradient")
    d = s["details"]
    assert d["first_layer"] == "sequential/dense" and d["last_layer"] == "sequential/dense_12"
    assert d["median_ratio"] < 1e-3 and d["share_below"] >= 0.8


def test_grad_norm_series_in_the_report(profiled):
    m = profiled("vanishing_gradient_loop.py").report["metrics"]
    assert len(m["grad_norm"]["global"]) >= 4
    assert "sequential/dense" in m["grad_norm"]["layers"] and "sequential/dense_12" in m["grad_norm"]["layers"]



def test_fail_on_a_training_health_kind(profiled):
    assert profiled("nan_inf_eager.py").returncode == 3  # --fail-on nan-inf, the script exited 0
    assert profiled("loss_broadcast_clean.py").returncode == 0  # --fail-on all, nothing found


def test_terminal_groups_training_health(profiled):
    err = profiled("loss_broadcast_loop.py").stderr
    lines = err.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("Training health"))
    after = [line.split()[0] for line in lines[head + 1:head + 7] if line.strip()]
    assert after == ["nan-inf", "dead-parameter", "exploding-gradient", "vanishing-gradient", "loss-stall",
                     "loss-broadcast"], lines[head:head + 8]
    assert "Training health: loss broadcasting" in err
    assert any(line.startswith("loss ") for line in lines) and any(line.startswith("gradient norm") for line in lines)


def test_tensorboard_loss_and_gradient_norms(profiled):
    import os

    from tests.profile.test_tensorboard import _logdir, _read_scalars

    run = profiled("vanishing_gradient_loop.py")
    scalars = _read_scalars(os.path.join(_logdir(run), "tflint"))
    m = run.report["metrics"]
    assert "tflint/loss" in scalars and "tflint/grad_norm" in scalars, sorted(scalars)
    for x, y in m["loss"]:
        assert scalars["tflint/loss"][int(x)] == pytest.approx(y, rel=1e-6)
    assert "tflint/grad_norm/sequential/dense" in scalars


# On a machine with a GPU, Keras 3 compiles `fit`'s step with XLA by default (`jit_compile="auto"`
# turns it on wherever a non-CPU device exists); the probes then run inside the XLA cluster. These
# CPU runs compile the same fixtures with XLA explicitly.
XLA_RUNS = {"nan_inf_fit.py": "nan-inf", "exploding_gradient_fit.py": "exploding-gradient",
            "clean_fit.py": None, "clean_fit.py:wide": None}


@pytest.fixture(scope="module")
def profiled_xla(tmp_path_factory):
    from tests.profile.conftest import FIXTURES, run_profile

    out = tmp_path_factory.mktemp("profile-xla")
    runs = {}

    def get(name):
        if name not in runs:
            fixture, _, variant = name.partition(":")
            text = (FIXTURES / fixture).read_text(encoding="utf-8")
            line = next(ln for ln in text.splitlines() if ln.startswith("model.compile("))
            if variant == "wide":  # 296k gradient elements: the sampled probe, its cond inside XLA too
                text = text.replace("Dense(256", "Dense(512")
            # one line changed in place: the fixture's expected lines still hold
            script = out / (fixture.replace(".py", f"_{variant}.py") if variant else fixture)
            script.write_text(text.replace(line, line[:-1] + ", jit_compile=True)\n"
                                           "assert model.jit_compile is True"), encoding="utf-8")
            runs[name] = run_profile(script, options=("--fail-on", "all"), json_path=out / f"{script.stem}.json")
        return runs[name]

    return get


@pytest.mark.parametrize("name", sorted(XLA_RUNS))
def test_training_health_under_an_xla_compiled_fit(profiled_xla, name):
    run = profiled_xla(name)
    report = run.report
    assert report["exit_code"] == 0, run.explain()
    health = {k: v for k, v in report["metrics"]["hooks"].items() if k in HEALTH_KINDS}
    assert len(health) == len(HEALTH_KINDS) and all(v["status"] == "ok" for v in health.values()), health
    kind = XLA_RUNS[name]
    assert [s["kind"] for s in run.signals()] == ([kind] if kind else []), [s["message"] for s in run.signals()]
    if kind == "nan-inf":
        s = run.signals(kind)[0]
        assert s["details"]["op"] == "Log" and s["details"]["localised"]
        assert s["location"]["line"] == _line(name, kind)
    if kind is None:  # the clean run: its loss and gradient norms were read from the compiled step
        loss, norms = report["metrics"]["loss"], report["metrics"]["grad_norm"]["global"]
        assert len(loss) >= 2 and len(norms) >= 2
        if name.endswith(":wide"):  # norms every 32nd step, the loss at every read (every 8th)
            assert 2 <= len(norms) <= len(loss) // 3, (len(norms), len(loss))
        else:
            assert len(norms) == len(loss)
        assert run.returncode == 0
