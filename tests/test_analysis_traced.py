"""What counts as traced code, and the scope/value/guard facts rules build on."""

from __future__ import annotations

import ast
import textwrap

import pytest

from tflint.analysis import Analysis


def analyse(source: str) -> Analysis:
    source = textwrap.dedent(source)
    return Analysis(ast.parse(source), source)


def func(a: Analysis, name: str) -> ast.AST:
    (f,) = a.functions[name]
    return f


def traced_names(source: str) -> set[str]:
    a = analyse(source)
    return {getattr(f, "name", "<lambda>") for f in a.traced.reasons}


@pytest.mark.parametrize(
    "imports,decorator",
    [
        ("import tensorflow as tf", "@tf.function"),
        ("import tensorflow as tf", "@tf.function(jit_compile=True, reduce_retracing=True)"),
        ("import tensorflow as tensorflow_lib", "@tensorflow_lib.function"),
        ("import tensorflow", "@tensorflow.function()"),
        ("from tensorflow import function", "@function"),
        ("from tensorflow import function as tf_fn", "@tf_fn(input_signature=None)"),
        ("import tensorflow.compat.v2 as tf", "@tf.function"),
    ],
)
def test_decorator_spellings(imports, decorator):
    assert traced_names(f"{imports}\n{decorator}\ndef f(x):\n    return x\n") == {"f"}


def test_lookalike_decorators_are_not_tf_function():
    src = """
    import functools
    from mylib import function
    @function
    def a(x):
        return x
    @functools.lru_cache
    def b(x):
        return x
    """
    assert traced_names(src) == set()


def test_wrapping_keras_methods_dataset_functions_and_callees():
    src = """
    import tensorflow as tf
    from tensorflow import keras

    def body(x):
        return helper(x)

    def helper(x):
        return x

    step = tf.function(body)

    class Net(keras.Model):
        def call(self, x):
            return self.project(x)
        def project(self, x):
            return x
        def train_step(self, data):
            return {}
        def summary_text(self):
            return "eager"

    class Plain:
        def call(self, x):
            return x

    def parse(x):
        return x

    ds = tf.data.Dataset.range(3).map(parse, num_parallel_calls=tf.data.AUTOTUNE)
    ds2 = tf.data.Dataset.range(3).filter(lambda x: x > 0)
    """
    names = traced_names(src)
    assert {"body", "helper", "call", "project", "train_step", "parse", "<lambda>"} <= names
    assert "summary_text" not in names
    a = analyse(src)
    plain_call = [f for f in a.functions["call"] if a.parent(f).name == "Plain"][0]
    assert not a.traced.is_traced_function(plain_call)


def test_keras_subclass_through_module_bases_and_layers_import():
    src = """
    from tensorflow.keras import layers

    class Base(layers.Layer):
        pass

    class Child(Base):
        def call(self, x):
            return x
    """
    assert traced_names(src) == {"call"}


def test_py_function_bodies_run_eagerly():
    src = """
    import tensorflow as tf
    @tf.function
    def f(x):
        def eager_part(v):
            return v.numpy()
        return tf.py_function(eager_part, [x], tf.float32)
    """
    a = analyse(src)
    ret = func(a, "eager_part").body[0]
    assert a.traced.traced_function_of(ret) is None
    assert a.is_traced(func(a, "f").body[-1])


def test_functions_handed_to_graph_building_calls_are_traced():
    src = """
    import tensorflow as tf
    strategy = tf.distribute.MirroredStrategy()

    def true_fn():
        return 1
    def false_fn():
        return 0
    def body(i):
        return i + 1
    def replica_step(x):
        return x
    def never(x):
        return x

    @tf.function
    def f(x, p):
        y = tf.cond(p, true_fn, false_fn)
        z = tf.while_loop(lambda i: i < 3, body, [0])
        return strategy.run(replica_step, args=(x,))
    """
    names = traced_names(src)
    assert {"true_fn", "false_fn", "body", "replica_step", "f"} <= names
    assert "never" not in names


def test_reason_names_the_line():
    a = analyse("import tensorflow as tf\n\n@tf.function\ndef f(x):\n    return x\n")
    assert "line 3" in a.traced.reason(func(a, "f"))


# -- scopes --------------------------------------------------------------------------------

def test_defining_scope_and_bindings():
    src = """
    import tensorflow as tf
    items = []
    def outer():
        local = {}
        def inner(x):
            global items
            items = [x]
            return local, x
        return inner
    """
    a = analyse(src)
    inner = func(a, "inner")
    ret = inner.body[-1]
    assert a.traced.defining_scope("local", ret) is func(a, "outer")
    assert a.traced.defining_scope("x", ret) is inner
    assert a.traced.defining_scope("items", ret) is a.tree
    assert a.traced.defining_scope("len", ret) is None
    assert "items" in a.traced.declared_outer(inner)
    assert isinstance(a.traced.bindings("local", func(a, "outer"))[0], ast.Dict)


def test_self_attribute_values_include_base_classes():
    src = """
    class A:
        def __init__(self):
            self.n = 0
    class B(A):
        def reset(self):
            self.n, self.m = 1, 2
    """
    a = analyse(src)
    cls_b = [n for n in a.tree.body if isinstance(n, ast.ClassDef) and n.name == "B"][0]
    assert len(a.traced.self_attr_values(cls_b, "n")) == 2


# -- values --------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "expr,tensor",
    [
        ("tf.reduce_sum(x)", True),
        ("tf.shape(x)[0]", True),
        ("tf.shape(x)[0] * 2 + 1", True),
        ("tf.nn.relu(x)", True),
        ("keras.ops.mean(x)", True),
        ("y", True),
        ("y > 0", True),
        ("x.shape[0]", False),
        ("keras.ops.shape(x)[0]", False),
        ("len(x)", False),
        ("3.0", False),
        ("n", False),
        ("tf.executing_eagerly()", False),
        ("tf.TensorShape([1])", False),
        ("model(x)", True),
    ],
)
def test_is_tensor(expr, tensor):
    src = f"""
    import keras
    import tensorflow as tf
    model = keras.Sequential([])
    @tf.function
    def f(x, n=2):
        y = tf.square(x)
        probe = {expr}
        return probe
    """
    a = analyse(src)
    probe = func(a, "f").body[1].value
    assert a.traced.is_tensor(probe) is tensor


def test_keras_call_inputs_and_input_signature_parameters_are_tensors():
    src = """
    import keras
    import tensorflow as tf
    class L(keras.layers.Layer):
        def call(self, inputs, training=None):
            return inputs, training
    @tf.function(input_signature=[tf.TensorSpec([], tf.float32)])
    def g(v):
        return v
    """
    a = analyse(src)
    ret = func(a, "call").body[0].value
    assert a.traced.is_tensor(ret.elts[0]) and not a.traced.is_tensor(ret.elts[1])
    assert a.traced.is_tensor(func(a, "g").body[0].value)


# -- guards and tf.function objects ----------------------------------------------------------

def test_guards():
    src = """
    import tensorflow as tf
    def f(self, x, key, cache):
        if self.v is None:
            a = 1
        if key not in cache:
            b = 2
        if not self.built:
            c = 3
        if x > 0:
            d = 4
        if tf.executing_eagerly():
            e = 5
        g = 6 if self.w is None else 7
    """
    a = analyse(src)
    body = func(a, "f").body
    once = [a.traced.guard_of(stmt.body[0]) is not None for stmt in body[:5]]
    assert once == [True, True, True, False, False]
    assert a.traced.guard_of(body[4].body[0], kind="eager") is not None
    assert a.traced.guard_of(body[3].body[0], kind="eager") is None
    assert a.traced.guard_of(body[5].value.body) is not None


def test_tf_function_creation_and_call_sites():
    src = """
    import tensorflow as tf
    @tf.function(input_signature=[tf.TensorSpec([])])
    def a(x):
        return x
    def plain(x):
        return x
    b = tf.function(plain)
    class T:
        def __init__(self):
            self.c = tf.function(self.run)
        def run(self, x):
            return x
        def use(self):
            return a(1.0), b(1.0), self.c(1.0), plain(2.0), self.run(3.0)
    """
    a = analyse(src)
    calls = func(a, "use").body[0].value.elts
    created = [a.traced.tf_function_creation(c.func, c) for c in calls]
    assert [type(c).__name__ for c in created] == ["Call", "Call", "Call", "NoneType", "NoneType"]
    assert a.traced.has_input_signature(created[0]) and not a.traced.has_input_signature(created[1])
    sites = a.traced.call_sites(func(a, "run"))
    assert len(sites) == 1 and isinstance(sites[0].args[0], ast.Constant)
    assert len(sites[0].args) == 2  # the placeholder for `self` lines arguments up with parameters


# -- project-wide facts ------------------------------------------------------------------------

def test_project_facts_seed_traced_functions_and_name_the_entry():
    src = textwrap.dedent(
        """
        import time

        def helper(x):
            return _inner(x)

        def _inner(x):
            return time.time()

        class Log:
            def write(self, x):
                return x

        def untouched():
            pass
        """
    )
    facts = {"helper": ["train_step", "train.py", 41], "Log.write": ["train_step", "train.py", 41]}
    a = Analysis(ast.parse(src), src, project=facts)
    names = {getattr(f, "name", "?") for f in a.traced.reasons}
    assert names == {"helper", "_inner", "write"}
    inner = func(a, "_inner")
    assert a.traced.entry_note(inner) == "`helper` is traced through `train_step` in train.py:41"
    # traced only through the project: not a step of this module
    assert not a.traced.is_module_traced(inner) and a.traced.is_traced_function(inner)
    assert Analysis(ast.parse(src), src).traced.reasons == {}


def test_project_facts_do_not_override_local_reasons():
    src = textwrap.dedent(
        """
        import tensorflow as tf

        @tf.function
        def step(x):
            return helper(x)

        def helper(x):
            return x
        """
    )
    a = Analysis(ast.parse(src), src, project={"step": ["other", "o.py", 1], "helper": ["other", "o.py", 1]})
    assert a.traced.entry_note(func(a, "step")) is None
    assert a.traced.entry_note(func(a, "helper")) is None
    assert a.traced.is_module_traced(func(a, "helper"))


def test_summary_records_calls_and_skips_guarded_ones():
    from tflint.analysis.project import summarise

    src = textwrap.dedent(
        """
        import tensorflow as tf
        from pkg import util
        from pkg.models import Net

        class Step:
            @tf.function
            def run(self, x):
                if self.cache is None:
                    util.build_once()
                if tf.executing_eagerly():
                    util.eager_only()
                Net().call(x)
                return self.helper(util.f(x))

            def helper(self, x):
                return x
        """
    )
    a = Analysis(ast.parse(src), src)
    s = summarise(a, a.traced)
    # (`Net()` is kept as written: the index does not follow constructors)
    assert sorted(s["calls"]["Step.run"]) == ["L:Step.helper", "X:Net", "X:Net().call", "X:util.f"]
    assert s["traced"] == {"Step.run": ["Step.run", 8], "Step.helper": ["Step.run", 8]}
    assert "Step.run" in s["aware"]
