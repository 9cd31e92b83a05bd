"""Targeted cases for TFL201-TFL203: what changes per call, where functions are created, and
which loops iterate data rather than epochs."""

from __future__ import annotations

import textwrap

import pytest

from tflint.rules import get_rule
from tests.rule_harness import run_rules


def findings(code: str, source: str):
    return run_rules(textwrap.dedent(source), [get_rule(code)])


def lines(code: str, source: str) -> list[int]:
    return [f.line for f in findings(code, source)]


HEADER = """
import tensorflow as tf

@tf.function
def step(x, k):
    return x * k
"""


# -- TFL201 --------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "loop,call,fires",
    [
        ("for i in range(10):", "step(1.0, i)", True),
        ("for i in range(10):", "step(1.0, i % 3)", True),
        ("for i in range(10):", "step(1.0, float(i))", True),
        ("for i in range(10):", "step(1.0, k=i + 1)", True),
        ("for i, x in enumerate(ds):", "step(x, i)", True),
        ("for i, x in zip(range(5), ds):", "step(x, i)", True),
        ("for lr in [0.1, 0.01]:", "step(1.0, lr)", True),
        ("for i in range(10):", "step(1.0, tf.constant(i))", False),
        ("for i in range(10):", "step(1.0, tf.convert_to_tensor(i))", False),
        ("for i in range(10):", "step(xs[i], 2.0)", False),
        ("for i, x in enumerate(ds):", "step(x, 2.0)", False),
        ("for x in ds:", "step(x, x)", False),
        ("for i in tf.range(10):", "step(1.0, i)", False),
    ],
)
def test_tfl201_what_counts_as_a_changing_python_number(loop, call, fires):
    src = HEADER + f"ds = tf.data.Dataset.range(4)\nxs = tf.ones([10])\n{loop}\n    {call}\n"
    got = lines("TFL201", src)
    assert bool(got) is fires, got


def test_tfl201_counter_and_value_computed_from_the_index():
    src = HEADER + textwrap.dedent("""
    n = 0
    v = tf.Variable(0)
    for epoch in range(3):
        n += 1
        v.assign_add(1)
        scale = 0.5 ** epoch
        step(1.0, n)
        step(1.0, scale)
        step(1.0, v)
    """)
    got = findings("TFL201", src)
    assert [f.line for f in got] == [14, 15]
    assert "counter incremented on line 11" in got[0].message
    assert "`scale`" in got[1].message


def test_tfl201_counter_initialised_from_a_tensor_is_not_python():
    src = HEADER + "n = tf.constant(0)\nwhile n < 5:\n    n += 1\n    step(1.0, n)\n"
    assert lines("TFL201", src) == []


def test_tfl201_plain_function_input_signature_and_traced_caller():
    src = """
    import tensorflow as tf
    from tensorflow import function

    def plain(x, k):
        return x * k

    @function(input_signature=[tf.TensorSpec([], tf.float32), tf.TensorSpec([], tf.int32)])
    def signed(x, k):
        return x * tf.cast(k, tf.float32)

    @tf.function
    def inner(x, k):
        return x * k

    @tf.function
    def outer(x):
        for i in range(3):          # unrolled while tracing: one trace of `inner` per value, once
            x = inner(x, i)
        return x

    for i in range(10):
        plain(1.0, i)
        signed(1.0, i)
    """
    assert lines("TFL201", src) == []


def test_tfl201_wrapped_attribute_and_alias():
    src = """
    import tensorflow as tensorflow_lib

    def body(x, k):
        return x * k

    fast = tensorflow_lib.function(body, jit_compile=True)

    class Loop:
        def __init__(self):
            self.fn = tensorflow_lib.function(body)

        def run(self):
            for k in range(4):
                self.fn(1.0, k)
                fast(1.0, k)
    """
    assert lines("TFL201", src) == [15, 16]


# -- TFL202 --------------------------------------------------------------------------------

def test_tfl202_module_level_and_setup_creations_are_fine():
    src = """
    import tensorflow as tf

    @tf.function
    def step(x):
        return x

    double = tf.function(lambda x: x * 2)

    class Layerish(tf.keras.layers.Layer):
        def build(self, shape):
            self.fn = tf.function(self._f)
        def _f(self, x):
            return x

    for x in tf.data.Dataset.range(3):
        step(x)
        double(x)
    """
    assert lines("TFL202", src) == []


def test_tfl202_factory_called_in_a_loop_reports_the_decorator_and_the_call():
    src = """
    import tensorflow as tf

    def make(m):
        @tf.function
        def fwd(x):
            return m(x)
        return fwd

    for x in tf.data.Dataset.range(3):
        f = make(None)
        f(x)
    """
    (f,) = findings("TFL202", src)
    assert f.line == 5 and "line 11" in f.message and "line 10" in f.message


def test_tfl202_sweep_loop_reusing_the_function_in_an_inner_loop_is_fine():
    src = """
    import tensorflow as tf

    def body(x):
        return x

    for lr in [0.1, 0.01]:
        step = tf.function(body)
        for x in tf.data.Dataset.range(3):
            step(x)
    """
    assert lines("TFL202", src) == []


def test_tfl202_create_once_cache_in_a_loop_is_fine():
    src = """
    import tensorflow as tf
    cache = {}
    def body(x):
        return x
    for shape in [(1,), (2,)]:
        if shape not in cache:
            cache[shape] = tf.function(body)
        cache[shape](tf.zeros(shape))
    """
    assert lines("TFL202", src) == []


def test_tfl202_per_call_creation_in_helper_called_twice_and_test_bodies():
    src = """
    import tensorflow as tf

    def run_once(model, x):
        return tf.function(model)(x)

    a = run_once(None, 1.0)
    b = run_once(None, 2.0)

    class Tests:
        def test_fn(self):
            @tf.function
            def f(x):
                return x
            return f(1.0)
    """
    assert lines("TFL202", src) == [5]


def test_tfl202_inside_traced_code_is_fine():
    src = """
    import tensorflow as tf
    @tf.function
    def outer(x):
        inner = tf.function(lambda v: v + 1)
        for i in range(3):
            x = inner(x)
        return x
    """
    assert lines("TFL202", src) == []


# -- TFL203 --------------------------------------------------------------------------------

KERAS = "import keras\nmodel = keras.Sequential([keras.layers.Dense(1)])\n"


@pytest.mark.parametrize(
    "body,fires",
    [
        ("for x in ds:\n    model.predict(x)", True),
        ("for x, y in ds:\n    model.evaluate(x, y)", True),
        ("for x, y in ds:\n    model.evaluate(x=x, y=y)", True),
        ("for i in range(0, len(data), 32):\n    model.predict(data[i:i + 32])", True),
        ("for i in range(0, len(data), 32):\n    model.predict_on_batch(data[i:i + 32])", False),
        ("it = iter(ds)\nwhile True:\n    b = next(it)\n    model.predict(b)", True),
        ("for path in files:\n    img = load(path)\n    model.predict(img[None])", True),
        ("for epoch in range(5):\n    model.fit(ds)\n    model.evaluate(val)", False),
        ("for epoch in range(5):\n    model.predict(data[epoch])", False),
        ("for fold in range(5):\n    model.evaluate(folds[fold])", False),
        ("for ckpt in ckpts:\n    model.load_weights(ckpt)\n    model.evaluate(val)", False),
        ("for m in [model, model]:\n    m.predict(val)", False),
        ("for name, d in sets.items():\n    model.evaluate(d)", False),
        ("for x in ds:\n    model(x, training=False)", False),
        # an environment loop: each step's observation is a new sample
        ("s = env.reset()\ndone = False\nwhile not done:\n    q = model.predict(s[None], verbose=0)\n"
         "    s, r, done, info = env.step(q.argmax())", True),
        ("s = self.env.reset()\nfor t in range(max_steps):\n    a = model.predict(np.reshape(s, [1, 4]))\n"
         "    nxt, r, done, _ = self.env.step(a)\n    s = nxt", True),
        # a step of something else, or the same input every iteration
        ("while not done:\n    p = model.predict(x)\n    x = scheduler.step(p)", False),
        ("while not done:\n    p = model.predict(x)\n    x = inventory.step(p)", False),
        ("s = train_env.reset()\nwhile True:\n    a = model.predict(s[None])\n    s, r, d, i = train_env.step(a)", True),
        # a step loop whose target reads like an episode counter still steps the environment
        ("for episode in range(500):\n    s = env.reset()\n    for ep in range(200):\n"
         "        a = model.predict(s[None])\n        s, r, d, i = env.step(a)", True),
        ("while not done:\n    p = model.predict(x_val)\n    s, r, done, info = env.step(0)", False),
        # every k-th step: a periodic update, not a per-sample predict
        ("s = env.reset()\nfor t in range(100000):\n    s, r, done, info = env.step(0)\n"
         "    if t % 500 == 0:\n        v = model.predict(s[None])", False),
        ("s = env.reset()\nbatch = []\nwhile True:\n    s, r, done, info = env.step(0)\n    batch.append(s)\n"
         "    if len(batch) >= 5 or done:\n        v = model.predict(s[None])\n        batch = []", False),
        # a replay loop that predicts each transition's targets and fits on the transition: it
        # trains per sample, it is not a fold that trains and then evaluates
        ("for s, a, r, s2, done in random.sample(memory, 32):\n    t = model.predict(s)\n"
         "    model.fit(s, t, epochs=1, verbose=0)", True),
        ("for fold in range(5):\n    model.fit(x[idx[fold]], y[idx[fold]])\n    model.evaluate(x_val[fold], y_val[fold])", False),
        # at the end of an episode (done unpacked from the environment's step), not every step
        ("s = env.reset()\nwhile True:\n    s, r, done, info = env.step(0)\n    if done:\n"
         "        v = model.predict(s[None])\n        s = env.reset()", False),
        ("s = env.reset()\nwhile True:\n    s, r, done, info = env.step(0)\n    if not done:\n"
         "        v = model.predict(s[None])", True),
        # a warm-up guard is not periodic: once the memory is full it holds every step
        ("s = env.reset()\nwhile True:\n    s, r, done, info = env.step(0)\n    memory.append(s)\n"
         "    if len(memory) > 32:\n        v = model.predict(s[None])", True),
    ],
)
def test_tfl203_data_loops_versus_run_loops(body, fires):
    got = lines("TFL203", KERAS + body + "\n")
    assert bool(got) is fires, got


def test_tfl203_other_libraries_and_callbacks():
    src = """
    import keras
    import tensorflow as tf
    from sklearn.linear_model import LogisticRegression
    clf = LogisticRegression()
    for x in rows:
        clf.predict(x)

    class C(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            self.model.evaluate(self.val)
        def on_batch_end(self, batch, logs=None):
            self.model.predict(self.val)

    class DatasetTest(tf.test.TestCase):
        def test_elements(self, dataset, n):
            for i in range(n):
                self.assertEqual(i, self.evaluate(dataset[i]))

    class Net(keras.Model):
        def score_each(self, rows):
            for row in rows:
                self.predict(row)
    """
    assert lines("TFL203", src) == [13, 23]


ACTOR = """
import numpy as np
import keras


class Agent:
    def __init__(self):
        self.model = keras.Sequential([keras.layers.Dense(2)])

    def act(self, state):
        {act}


agent = Agent()
{loop}
"""

ENV_LOOP = """for episode in range(500):
    state, done = env.reset(), False
    while not done:
        action = agent.act(state)
        state, reward, done, info = env.step(action)"""


def test_tfl203_predict_through_a_method_the_environment_loop_calls():
    # the DQN agent's act(): one observation per call, once per environment step
    act = "state = np.reshape(state, [1, 4])\n        return np.argmax(self.model.predict(state, verbose=0)[0])"
    (f,) = findings("TFL203", ACTOR.format(act=act, loop=ENV_LOOP))
    assert f.line == 12 and f.fix is None  # other callers may pass the method a whole dataset
    assert "one sample per call of `act()`: line 19 passes it `state`, a batch or sample of the loop on line 18" in f.message
    assert "use `model.predict_on_batch(x)`" in f.message


@pytest.mark.parametrize(
    "act,loop",
    [
        # the method predicts on something else than what it is given
        ("return self.model.predict(self.x_val)", ENV_LOOP),
        # it transforms its input first (not only a batch dimension)
        ("state = preprocess(state)\n        return self.model.predict(state)", ENV_LOOP),
        # called once, or with the same input every iteration
        ("return self.model.predict(state)", "agent.act(x_test)"),
        ("return self.model.predict(state)", "for step in range(1000):\n    agent.act(x_test)"),
        # a few calls
        ("return self.model.predict(state)", "for x in ds.take(3):\n    agent.act(x)"),
    ],
)
def test_tfl203_predict_through_a_method_controls(act, loop):
    assert lines("TFL203", ACTOR.format(act=act, loop=loop)) == []


def test_tfl203_message_names_the_loop():
    (f,) = findings("TFL203", KERAS + "\nfor batch in ds:\n    model.predict(batch)\n")
    assert "line 4" in f.message and "`batch`" in f.message


# -- TFL204 --------------------------------------------------------------------------------

TF_DS = KERAS + "import tensorflow as tf\nds = tf.data.Dataset.from_tensor_slices((x, y)).batch(32)\n"


@pytest.mark.parametrize(
    "body,fires",
    [
        ("for xb, yb in ds:\n    model.fit(xb, yb, verbose=0)", True),
        ("for step, (xb, yb) in enumerate(ds):\n    model.fit(xb, yb)", True),
        ("for xb, yb in ds.take(3):\n    model.fit(xb, yb)", False),  # a look at three batches
        ("for i in range(0, len(x), 32):\n    model.fit(x[i:i + 32], y[i:i + 32])", True),
        ("for i in range(n):\n    b = idx[i * 32:(i + 1) * 32]\n    model.fit(x[b], y[b])", True),
        ("for i in range(n):\n    xb = x[i * 32:(i + 1) * 32]\n    model.fit(xb, y[i * 32:(i + 1) * 32])", True),
        ("for i in range(len(x)):\n    model.fit(x[i][None], y[i][None])", True),
        ("for i in range(len(x)):\n    model.fit(np.array([x[i]]), y[i:i + 1])", True),
        ("for i in range(n_clients):\n    model.fit(client_x[i], client_y[i])", False),  # whole arrays
        ("for x_chunk, y_chunk in load_chunks(files):\n    model.fit(x_chunk, y_chunk)", False),
        ("for epoch in range(20):\n    model.fit(x[perm[epoch]], y, epochs=1)", False),
        ("for i in range(5):\n    model = build()\n    model.fit(x[i:i + 100], y[i:i + 100])", False),
        ("for xb, yb in ds:\n    model.train_on_batch(xb, yb)", False),
        ("import random\nfor s, a, r, s2, done in random.sample(memory, 32):\n    model.fit(s, r)", True),
        ("import random\nfor d in random.sample(client_sets, 4):\n    model.fit(d, epochs=1)", False),
        ("import random\nfor s in random.sample(self.replay_buffer, 32):\n    model.fit(s, t)", True),
        ("for s, a, r, s2, done in replay_memory:\n    model.fit(s, r)", True),
        ("for s, a, r in rows:\n    model.fit(s, r)", False),
        ("for i in range(0, len(x), 100000):\n    model.fit(x[i:i + 100000], y[i:i + 100000])", False),
        ("CHUNK = 50000\nfor i in range(0, n, CHUNK):\n    model.fit(x[i:i + CHUNK], y[i:i + CHUNK])", False),
        ("for i in range(0, n, 512):\n    model.fit(x[i:i + 512], y[i:i + 512])", True),
        ("for xb, yb in datagen.flow(x, y, batch_size=32):\n    model.fit(xb, yb)", True),
        ("for item in ds:\n    imgs = item[0]\n    model.fit([imgs], item[1], verbose=0)", True),
        ("import random\nwhile not done:\n    batch = random.sample(memory, 32)\n"
         "    states = np.array([t[0] for t in batch])\n    model.fit(states, q, epochs=1, verbose=0)", True),
        ("while not done:\n    idx = np.random.choice(len(self.buffer), 64)\n"
         "    model.fit(self.states[idx], q, verbose=0)", True),
        ("while not done:\n    idx = np.random.choice(len(x_train), 64)\n"
         "    model.fit(x_train[idx], y_train[idx], verbose=0)", False),
    ],
)
def test_tfl204_batches_and_samples_versus_whole_datasets(body, fires):
    got = lines("TFL204", TF_DS + "import numpy as np\n" + body + "\n")
    assert bool(got) is fires, got


def test_tfl204_fix_only_where_train_on_batch_means_the_same():
    from tflint.check.fix import fix_file

    def fixed(call: str) -> str:
        src = TF_DS + f"for xb, yb in ds:\n    {call}\n"
        assert lines("TFL204", src), call
        out = fix_file("example.py", src.encode(), frozenset({"TFL204"}), unsafe=True)
        return (out.new_text if out.new_raw is not None else src).splitlines()[-1].strip()

    assert fixed("model.fit(xb, yb, epochs=1, verbose=0)") == "model.train_on_batch(xb, yb)"
    assert fixed("model.fit(x=xb, y=yb, sample_weight=w)") == "model.train_on_batch(xb, yb, sample_weight=w)"
    assert fixed("h = model.fit(xb, yb)") == "h = model.fit(xb, yb)"  # the History is used
    assert fixed("model.fit(xb, yb, epochs=5)") == "model.fit(xb, yb, epochs=5)"  # five steps
    assert fixed("model.fit(xb, yb, callbacks=[cb])") == "model.fit(xb, yb, callbacks=[cb])"
    src = TF_DS + "for batch in ds:\n    model.fit(batch, verbose=0)\n"  # `batch` may be an (x, y) pair
    assert lines("TFL204", src)
    out = fix_file("example.py", src.encode(), frozenset({"TFL204"}), unsafe=True)
    assert out.new_raw is None


AGENT = """
import random
import numpy as np
import keras


class Agent:
    def __init__(self):
        self.memory = []
        self.model = keras.Sequential([keras.layers.Dense(2)])

    def replay(self, n):
        {draw}
        self.model.fit(states, targets, epochs=1, verbose=0)

    def run(self, steps):
        for _ in range(steps):
            self.replay(32)


agent = Agent()
{caller}
"""


@pytest.mark.parametrize(
    "draw,caller,fires",
    [
        # a minibatch per call, the method called from a loop: of this class or of the module
        ("minibatch = random.sample(self.memory, n)\n        states = np.array([t[0] for t in minibatch])\n"
         "        targets = self.model.predict(states)", "", True),
        ("states, actions, targets, nxt, done = self.replay_buffer.sample(n)", "", True),
        ("mb = random.sample(self.memory, n)\n        states = np.zeros((n, 4))\n        targets = states\n"
         "        for i in range(n):\n            states[i] = mb[i][0]", "", True),
        ("mb = random.sample(self.memory, n)\n        states, targets = [], []\n"
         "        for state, action, reward in mb:\n            states.append(state)\n"
         "            targets.append(reward)", "", True),
        # the whole memory each call, or a sample of something else: many steps per fit
        ("states = np.array([t[0] for t in self.memory])\n        targets = states", "", False),
        ("states = random.sample(self.images, n)\n        targets = states", "", False),
    ],
)
def test_tfl204_a_replay_method_that_a_loop_calls(draw, caller, fires):
    got = lines("TFL204", AGENT.format(draw=draw, caller=caller))
    assert bool(got) is fires, got


def test_tfl204_replay_method_callers_outside_the_class():
    draw = "states, actions, targets, nxt, done = self.memory.sample(n)"
    plain = AGENT.replace("        for _ in range(steps):\n            self.replay(32)\n", "        pass\n")
    assert not lines("TFL204", plain.format(draw=draw, caller="agent.replay(32)"))  # called once
    assert not lines("TFL204", plain.format(draw=draw, caller="for e in range(4):\n    agent.replay(32)"))
    (f,) = findings("TFL204", plain.format(draw=draw, caller="for e in range(500):\n    agent.replay(32)"))
    assert "`replay()`" in f.message and "replay memory" in f.message
    other = plain.format(draw=draw, caller="agent = Other()\nfor e in range(500):\n    agent.replay(32)")
    assert not lines("TFL204", other)  # an instance of another class


def test_tfl204_an_agent_from_an_alternate_constructor_of_its_class():
    # an agent made fresh or loaded from disk by a static/class method that returns an instance
    draw = "states, actions, targets, nxt, done = self.memory.sample(n)"
    plain = AGENT.replace("        for _ in range(steps):\n            self.replay(32)\n", "        pass\n")
    loaders = {
        "static": "    @staticmethod\n    def load(path):\n        a = Agent()\n        a.model = keras.models.load_model(path)\n"
                  "        return a\n",
        "class": "    @classmethod\n    def load(cls, path):\n        return cls()\n",
        # not an instance of Agent: a model, or a plain method
        "model": "    @staticmethod\n    def load(path):\n        return keras.models.load_model(path)\n",
        "method": "    def load(self, path):\n        a = Agent()\n        return a\n",
    }
    for kind, loader in loaders.items():
        src = plain.replace("    def run(self, steps):", loader + "\n    def run(self, steps):").format(
            draw=draw, caller="agent = Agent.load('a.keras')\nfor e in range(500):\n    agent.replay(32)")
        assert bool(lines("TFL204", src)) == (kind in ("static", "class")), kind


WRAPPED = """
import random
import numpy as np
import keras


class QNetwork:
    def __init__(self):
        self.model = keras.Sequential([keras.layers.Dense(2)])

    def predict(self, states):
        return self.model.predict(states, verbose=0)

    def train(self, states, targets):
        {train}


class Agent:
    def __init__(self):
        self.buffer = []
        self.model = {net}
        self.target = QNetwork()

    def replay(self):
        {replay}

    def run(self, episodes):
        for ep in range(episodes):
            self.replay()
"""

FIT = "self.model.fit(states, targets, epochs=1, verbose=0)"
SAMPLED = """for _ in range(10):
            states, actions, rewards, nxt, done = self.replay_buffer.sample(32)
            targets = self.target.predict(states)
            self.model.train(states, targets)"""


def test_tfl204_fit_through_a_method_that_passes_its_arguments_on():
    # the DeepRL-TensorFlow2 DQN: `self.model.train(states, targets)` on a sampled minibatch, ten
    # times per call of replay(), once per episode; QNetwork.train runs fit on what it is given
    (f,) = findings("TFL204", WRAPPED.format(train=FIT, net="QNetwork()", replay=SAMPLED))
    assert f.line == 15 and f.fix is None  # a method the caller may also use on a whole dataset
    assert "one batch per call of `train()`: line 28 passes it `states`" in f.message
    assert "replay memory, once per call of `replay()`, which the loop on line 31" in f.message
    # the same through a keyword argument, and from a loop over a dataset's batches
    src = WRAPPED.format(train=FIT, net="QNetwork()",
                         replay="for xb, yb in tf.data.Dataset.range(9).batch(3):\n"
                                "            self.model.train(targets=yb, states=xb)")
    assert lines("TFL204", src.replace("import keras", "import keras\nimport tensorflow as tf")) == [16]


@pytest.mark.parametrize(
    "train,net,replay",
    [
        # the whole memory each call: fit runs many steps
        (FIT, "QNetwork()", "states = np.array(self.buffer)\n        self.model.train(states, states)"),
        # the wrapper does more than pass the batch on: it builds what it fits
        ("states = np.concatenate([states, self.extra])\n        " + FIT, "QNetwork()", SAMPLED),
        ("for _ in range(100):\n            " + FIT, "QNetwork()", SAMPLED),
        # self.model is not (only) a QNetwork
        (FIT, "keras.Sequential([keras.layers.Dense(2)])", SAMPLED),
        # fit on something other than the parameter
        ("self.model.fit(self.all_states, targets, epochs=1, verbose=0)", "QNetwork()", SAMPLED),
    ],
)
def test_tfl204_fit_through_a_method_controls(train, net, replay):
    assert lines("TFL204", WRAPPED.format(train=train, net=net, replay=replay)) == []


def test_tfl204_online_learning_on_each_environment_step():
    src = KERAS + """
state = env.reset()
for t in range(10000):
    target = model.predict_on_batch(state[None])
    next_state, reward, done, info = env.step(int(target.argmax()))
    model.fit(state[None], target, epochs=1, verbose=0)
    state = next_state
"""
    (f,) = findings("TFL204", src)
    assert "`state`, one batch or sample of the loop on line 5" in f.message
    # the observations gathered into a list and fitted once per episode: many steps per fit
    batched = src.replace("    model.fit(state[None], target, epochs=1, verbose=0)\n", "    seen.append(state)\n")
    assert lines("TFL204", batched + "model.fit(np.array(seen), targets)\n") == []


def test_tfl204_a_short_sample_and_fit_loop_in_a_method_called_per_episode():
    # replay() fits 1, 2 or 5 sampled minibatches per call (a bound read from a name bound only
    # to int literals), and a loop over episodes calls it
    replay = """if ep < 64:
            times = 1
        elif ep < 112:
            times = 2
        else:
            times = 5
        for _ in range(times):
            minibatch = random.sample(self.memory, 32)
            states = np.array([t[0] for t in minibatch])
            targets = self.model.predict(states)
            self.model.fit(states, targets, epochs=1, verbose=0)"""
    src = AGENT.replace("def replay(self, n):", "def replay(self, ep):").format(draw=replay, caller="")
    src = src.replace("        self.model.fit(states, targets, epochs=1, verbose=0)\n\n    def run", "\n    def run")
    (f,) = findings("TFL204", src)
    assert "once per call of `replay()`, which the loop on line" in f.message
    # the same method, never called from a loop: not reported
    assert lines("TFL204", src.replace("            self.replay(32)", "            pass")) == []


def test_tfl204_a_nested_functions_loop_target_is_not_the_methods_argument():
    # `states` of the nested preview() is its own loop target, drawn from the memory; the
    # `states` that train() fits is its argument, the whole data set on every call
    src = """
    import random

    import numpy as np
    from tensorflow import keras


    class Agent:
        def __init__(self):
            self.model = keras.Sequential([keras.layers.Dense(2)])
            self.model.compile(optimizer="adam", loss="mse")
            self.memory = []

        def train(self, states, targets):
            def preview():
                for states in random.sample(self.memory, 4):
                    print(states)

            self.model.fit(states, targets, epochs=1, verbose=0)


    agent = Agent()
    for episode in range(1000):
        agent.train(np.zeros((10000, 4)), np.zeros((10000, 2)))
    """
    assert lines("TFL204", src) == []
    # a nested function that fills the method's own list with draws from the memory does count
    fills = src.replace("        def train(self, states, targets):\n",
                        "        def train(self, targets):\n            states = []\n")
    fills = fills.replace("for states in random.sample(self.memory, 4):\n                    print(states)\n",
                          "states.extend(random.sample(self.memory, 4))\n\n            preview()\n")
    fills = fills.replace("agent.train(np.zeros((10000, 4)), ", "agent.train(")
    (f,) = findings("TFL204", fills)
    assert "a minibatch drawn from a replay memory, once per call of `train()`" in f.message


# -- real-code false positives ---------------------------------------------------------------

def test_tfl202_tf_function_built_only_for_get_concrete_function_is_not_reported():
    # tensorflow/python/ops/parallel_for/pfor.py, saved_model/save.py, trace_saveable_util.py
    src = """
    import tensorflow as tf

    def concrete(fn, specs):
        return tf.function(fn).get_concrete_function(*specs)

    def traced_shapes(fn, spec):
        @tf.function
        def wrapper(x):
            return fn(x)
        return wrapper.get_concrete_function(spec).structured_outputs

    for spec in specs:
        concrete(abs, [spec])
        traced_shapes(abs, spec)

    for op in ops:
        grad_fn = tf.function(op.grad).get_concrete_function(None)
    """
    assert lines("TFL202", src) == []


def test_tfl202_still_reported_when_the_traced_function_is_also_called():
    src = """
    import tensorflow as tf

    def per_call(fn, x):
        @tf.function
        def wrapper(x):
            return fn(x)
        wrapper.get_concrete_function(x)
        return wrapper(x)

    for x in xs:
        per_call(abs, x)
    """
    assert lines("TFL202", src) == [5]


def test_tfl202_function_reused_by_a_comprehension_is_not_used_once():
    # official/projects/nhnet/models_test.py
    src = """
    import tensorflow as tf

    def forward(model, dataset):
        @tf.function
        def test_step(inputs):
            return model(inputs)
        return [test_step(inputs) for inputs in dataset]

    forward(None, [])
    forward(None, [])
    """
    assert lines("TFL202", src) == []
