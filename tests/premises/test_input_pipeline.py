"""Premises of the tf.data rules (TFL401-TFL405), shown on TensorFlow 2.21.

Each test runs a small pipeline that shows what the rule claims, the rule's "Use instead" that
removes it, and checks that tflint flags the first text and not the second. Timings are only
compared with each other (ratios, generous margins); slow stages are `time.sleep` inside
`tf.py_function`, so the effects are large even on a loaded machine. Where timing would be
fragile, the pipeline tf.data really runs (its node kinds after the graph rewrites) is read.
"""

from __future__ import annotations

import textwrap

import pytest

from tests.premises._probe import codes, findings, pipeline_nodes, run, run_isolated, run_isolated_many

tf = pytest.importorskip("tensorflow")
pytestmark = pytest.mark.timeout(240)


# -- TFL401 -------------------------------------------------------------------------------

PIPELINE_401 = """
import time
import tensorflow as tf

STEP = 0.03

def read(i):
    time.sleep(STEP)  # reading and decoding one batch
    return i

{options}
ds = tf.data.Dataset.range(14).map(lambda i: tf.py_function(read, [i], tf.int64))
ds = ds{tail}

start = time.perf_counter()
for batch in ds:
    time.sleep(STEP)  # the training step
ELAPSED = time.perf_counter() - start
"""
OFF = "options = tf.data.Options()\noptions.experimental_optimization.inject_prefetch = False"
BAD_401 = PIPELINE_401.format(options=OFF, tail=".with_options(options)")
GOOD_401 = PIPELINE_401.format(options=OFF, tail=".with_options(options).prefetch(tf.data.AUTOTUNE)")
DEFAULT_401 = PIPELINE_401.format(options="", tail="")


def test_tfl401_pipeline_without_prefetch_waits_only_when_injection_is_off():
    bad, good, default = (run(src)["ELAPSED"] for src in (BAD_401, GOOD_401, DEFAULT_401))
    # Producer and consumer of equal cost: run one after the other they take about twice as
    # long as overlapped.
    assert bad > 1.35 * good, (bad, good)
    # TensorFlow's default `inject_prefetch` overlaps a pipeline without `.prefetch()` too.
    assert bad > 1.35 * default, (bad, default)
    assert ("TFL401" in codes(BAD_401)) and ("TFL401" not in codes(GOOD_401))
    assert "TFL401" not in codes(DEFAULT_401)  # narrowed: nothing to report on TF >= 2.9
    assert "TFL401" in codes(DEFAULT_401, target="2.8")  # no injection before 2.9
    line = next(n for n, c in findings(BAD_401) if c == "TFL401")
    assert BAD_401.strip("\n").splitlines()[line - 2].startswith("for batch in ds")


@pytest.mark.parametrize(
    "setting",
    [
        "experimental_optimization.inject_prefetch = False",
        "experimental_optimization.apply_default_optimizations = False",
        "autotune.enabled = False",
    ],
)
def test_tfl401_options_that_switch_the_injected_prefetch_off(setting):
    src = f"""
    import tensorflow as tf
    options = tf.data.Options()
    options.{setting}
    ds = tf.data.Dataset.range(8).batch(2).with_options(options)
    for x in ds:
        pass
    """
    ns = run(src)
    if setting.startswith("autotune"):
        # No autotuning model to read: the injected prefetch shows in the timing instead.
        timed = PIPELINE_401.format(options=f"options = tf.data.Options()\noptions.{setting}",
                                    tail=".with_options(options)")
        assert run(timed)["ELAPSED"] > 1.35 * run(GOOD_401)["ELAPSED"]
    else:
        assert "Prefetch" not in pipeline_nodes(ns["ds"])
        assert "Prefetch" in pipeline_nodes(tf.data.Dataset.range(8).batch(2))
    assert "TFL401" in codes(src)


def test_tfl401_sources_that_prefetch_themselves(tmp_path):
    import keras
    import numpy as np

    for cls in ("a", "b"):
        (tmp_path / "img" / cls).mkdir(parents=True)
        keras.utils.save_img(str(tmp_path / "img" / cls / "x.png"), np.zeros((8, 8, 3)))
        (tmp_path / "txt" / cls).mkdir(parents=True)
        (tmp_path / "txt" / cls / "x.txt").write_text("some text")
    (tmp_path / "t.csv").write_text("a,b\n1,2\n3,4\n")
    src = f"""
    import numpy as np
    import tensorflow as tf
    from tensorflow import keras

    options = tf.data.Options()
    options.experimental_optimization.inject_prefetch = False
    images = keras.utils.image_dataset_from_directory({str(tmp_path / 'img')!r}, image_size=(8, 8), batch_size=1)
    images = images.with_options(options)
    texts = keras.utils.text_dataset_from_directory({str(tmp_path / 'txt')!r}, batch_size=1).with_options(options)
    series = keras.utils.timeseries_dataset_from_array(np.arange(50), None, 5, batch_size=4).with_options(options)
    rows = tf.data.experimental.make_csv_dataset({str(tmp_path / 't.csv')!r}, batch_size=1, num_epochs=1)
    rows = rows.with_options(options)
    for ds in (images, texts, series, rows):
        for batch in ds:
            pass
    """
    ns = run(src)
    for name in ("images", "texts", "series", "rows"):
        assert "Prefetch" in pipeline_nodes(ns[name]), name
    assert "TFL401" not in codes(src) and "TFL401" not in codes(src, target="2.8")


# -- TFL402 -------------------------------------------------------------------------------

STATEFUL_402 = """
import tensorflow as tf

def augment(x):
    noise = tf.random.uniform([8, 8])
    return tf.reduce_sum(tf.cast(x, tf.float32) + noise)

ds = tf.data.Dataset.range(16).map(augment{calls})
"""
STATELESS_402 = """
import tensorflow as tf

def scale(x):
    return tf.reduce_sum(tf.cast(x, tf.float32) * tf.ones([8, 8]))

{options}
ds = tf.data.Dataset.range(16).map(scale){tail}
"""


def test_tfl402_stateful_map_stays_sequential_stateless_map_is_parallelized():
    bad = STATEFUL_402.format(calls="")
    good = STATEFUL_402.format(calls=", num_parallel_calls=tf.data.AUTOTUNE")
    bad_nodes, good_nodes = pipeline_nodes(run(bad)["ds"]), pipeline_nodes(run(good)["ds"])
    assert "Map" in bad_nodes and "ParallelMapV2" not in bad_nodes
    assert "ParallelMapV2" in good_nodes
    assert "TFL402" in codes(bad) and "TFL402" not in codes(good)
    # The premise as the rule used to state it does not hold: a stateless map is parallel.
    plain = STATELESS_402.format(options="", tail="")
    assert "ParallelMapV2" in pipeline_nodes(run(plain)["ds"])
    assert "TFL402" not in codes(plain)
    assert "TFL402" in codes(plain, target="2.5")  # before map_parallelization was default
    # ... unless the pipeline's options switch map parallelization off.
    for setting in ("map_parallelization", "apply_default_optimizations"):
        off = STATELESS_402.format(
            options=f"options = tf.data.Options()\noptions.experimental_optimization.{setting} = False",
            tail=".with_options(options)",
        )
        nodes = pipeline_nodes(run(off)["ds"])
        assert "Map" in nodes and "ParallelMapV2" not in nodes, setting
        assert "TFL402" in codes(off), setting


@pytest.mark.parametrize(
    "op",
    [
        "x + tf.cast(tf.random.uniform([]) * 0, tf.int64)",
        "x + counter",
        "table.lookup(x)",
        "tf.py_function(lambda v: v, [x], tf.int64)",
        "(tf.print(x), x)[1]",
    ],
)
def test_tfl402_what_makes_a_map_function_stateful(op):
    src = f"""
    import tensorflow as tf
    counter = tf.Variable(0, dtype=tf.int64)
    table = tf.lookup.StaticHashTable(
        tf.lookup.KeyValueTensorInitializer(tf.constant([0], tf.int64), tf.constant([1], tf.int64)), 0)

    def fn(x):
        return {op}

    ds = tf.data.Dataset.range(4).map(fn)
    """
    nodes = pipeline_nodes(run(src)["ds"])
    assert "Map" in nodes and "ParallelMapV2" not in nodes
    assert "TFL402" in codes(src)


def test_tfl402_a_random_keras_layer_is_stateful_only_where_it_draws():
    """Calling a Keras random layer (or its get_random_transformation) in a map draws random
    numbers, and tf.data keeps the map sequential; its transform_* methods given a
    transformation only apply it, and the map is parallelized by itself."""
    src = """
    import numpy as np
    import tensorflow as tf
    from tensorflow import keras

    flip = keras.layers.RandomFlip("horizontal", seed=1)
    images = tf.data.Dataset.from_tensor_slices(np.zeros((4, 8, 8, 3), "float32")).batch(2)
    called = images.map(lambda x: flip(x, training=True))
    drawn = images.map(lambda x: flip.get_random_transformation(x, training=True)["flips"])
    transformation = {"flips": np.asarray([[[[True]]], [[[False]]]]), "input_shape": (2, 8, 8, 3)}
    applied = images.map(lambda x: flip.transform_images(x, transformation=transformation, training=True))
    for ds in (called, drawn, applied):
        for batch in ds:
            pass
    """
    ns = run(src)
    for name in ("called", "drawn"):
        nodes = pipeline_nodes(ns[name])
        assert "Map" in nodes and "ParallelMapV2" not in nodes, name
    assert "ParallelMapV2" in pipeline_nodes(ns["applied"])
    lines = {line for line, code in findings(src) if code == "TFL402"}
    assert lines == {8, 9}, lines  # the two maps that draw, not the one that applies


def test_tfl402_a_random_branch_a_python_flag_turns_off_draws_nothing():
    """Hands-On ML's ``preprocess(image, label, randomize=False)``: the ``if randomize:`` branch
    is decided while tracing, so the validation map (the default, False) has no random op and
    tf.data parallelizes it, and ``keras.applications.xception.preprocess_input`` is stateless;
    the training map (``partial(preprocess, randomize=True)``) stays sequential."""
    src = """
    import functools

    import keras
    import tensorflow as tf

    def preprocess(image, label, randomize=False):
        if randomize:
            image = tf.image.random_flip_left_right(image)
        image = tf.image.resize(image, [32, 32])
        return keras.applications.xception.preprocess_input(image), label

    raw = tf.data.Dataset.from_tensor_slices((tf.zeros([8, 40, 40, 3]), tf.zeros([8])))
    train = raw.map(functools.partial(preprocess, randomize=True))
    valid = raw.map(preprocess)
    """
    ns = run(src)
    assert "ParallelMapV2" in pipeline_nodes(ns["valid"])
    nodes = pipeline_nodes(ns["train"])
    assert "Map" in nodes and "ParallelMapV2" not in nodes
    lines = {line for line, code in findings(src) if code == "TFL402"}
    assert lines == {14}, lines  # the training map only


def test_tfl402_num_parallel_calls_speeds_up_a_slow_stateful_map():
    src = """
    import time
    import tensorflow as tf

    def load(i):
        time.sleep(0.03)  # reading one example
        return i

    ds = tf.data.Dataset.range(24).map(lambda i: tf.py_function(load, [i], tf.int64){calls})
    start = time.perf_counter()
    for x in ds:
        pass
    ELAPSED = time.perf_counter() - start
    """
    bad, good = src.format(calls=""), src.format(calls=", num_parallel_calls=tf.data.AUTOTUNE")
    assert run(bad)["ELAPSED"] > 1.35 * run(good)["ELAPSED"]
    assert "TFL402" in codes(bad) and "TFL402" not in codes(good)


# -- TFL403 -------------------------------------------------------------------------------

def test_tfl403_shuffle_after_batch_keeps_each_batch_together():
    bad = """
    import tensorflow as tf
    ds = tf.data.Dataset.range(32).batch(4).shuffle(8, seed=1)
    EPOCHS = [[sorted(b.numpy().tolist()) for b in ds] for _ in range(3)]
    """
    good = """
    import tensorflow as tf
    ds = tf.data.Dataset.range(32).shuffle(32, seed=1).batch(4)
    EPOCHS = [[sorted(b.numpy().tolist()) for b in ds] for _ in range(3)]
    """
    fixed_groups = [list(range(k, k + 4)) for k in range(0, 32, 4)]
    for epoch in run(bad)["EPOCHS"]:
        assert sorted(epoch) == fixed_groups  # the same examples together, every epoch
    mixed = [e for e in run(good)["EPOCHS"] if sorted(e) != fixed_groups]
    assert len(mixed) == 3
    assert "TFL403" in codes(bad) and "TFL403" not in codes(good)


def test_tfl403_a_shuffle_between_two_batches_mixes_the_examples_of_the_second():
    """Why a shuffle between two batches is not reported (the text-generation pattern: batch
    tokens into sequences, shuffle the sequences, batch them): the elements the shuffle moves
    are the examples of the final batches, which are made of other sequences every epoch."""
    src = """
    import tensorflow as tf
    sequences = tf.data.Dataset.range(64).batch(4, drop_remainder=True)
    ds = sequences.shuffle(16).batch(4)
    EPOCHS = [[sorted(int(s[0]) for s in b) for b in ds] for _ in range(3)]
    """
    e = run(src)["EPOCHS"]
    assert sorted(e[0]) != sorted(e[1]) and sorted(e[1]) != sorted(e[2])  # new groupings each epoch
    assert "TFL403" not in codes(src)
    one = """
    import tensorflow as tf
    ds = tf.data.Dataset.range(32).batch(1).shuffle(32)
    EPOCHS = [[int(b[0]) for b in ds] for _ in range(2)]
    """
    e = run(one)["EPOCHS"]  # batches of one: shuffling them shuffles the examples
    assert e[0] != e[1] and sorted(e[0]) == list(range(32))
    assert "TFL403" not in codes(one)


# -- TFL404 -------------------------------------------------------------------------------

TFL404_SRC = """
import tensorflow as tf

tf.random.set_seed({seed})  # None: no global seed (programs here share one process)
generator = tf.random.Generator.from_seed(1)

def augment(x):
    return x * 1000 + {draw}

ds = tf.data.Dataset.range(16){pipeline}
EPOCHS = [sorted(int(v) % 1000 for v in ds) for _ in range(3)]
"""
UNSEEDED = "tf.random.uniform([], maxval=1000, dtype=tf.int64)"
FROM_GENERATOR = "generator.uniform([], maxval=1000, dtype=tf.int64)"
CACHE_AFTER = ".map(augment, num_parallel_calls=tf.data.AUTOTUNE).cache()"
CACHE_FIRST = ".cache().map(augment, num_parallel_calls=tf.data.AUTOTUNE)"


def _tfl404_epochs(seed, draw, pipeline):
    return run(TFL404_SRC.format(seed=seed, draw=draw, pipeline=pipeline))["EPOCHS"]


def test_tfl404_cache_after_random_map_replays_the_first_epoch():
    bad = TFL404_SRC.format(seed=None, draw=UNSEEDED, pipeline=CACHE_AFTER)
    good = TFL404_SRC.format(seed=None, draw=UNSEEDED, pipeline=CACHE_FIRST)
    e = run(bad)["EPOCHS"]
    assert e[0] == e[1] == e[2]  # augmentation frozen after the first epoch
    e = run(good)["EPOCHS"]
    assert e[0] != e[1] and e[1] != e[2]
    assert "TFL404" in codes(bad) and "TFL404" not in codes(good)


def test_tfl404_with_a_global_seed_only_a_generator_draws_new_values_each_epoch():
    """The caveat in TFL404's fix safety: under a global seed every epoch's iterator starts an
    unseeded random op from the same seed, so moving `cache` first is not enough; a
    `tf.random.Generator` carries its state over from epoch to epoch."""
    e = _tfl404_epochs(0, UNSEEDED, CACHE_FIRST)
    assert e[0] == e[1] == e[2]  # the same draws every epoch (their order may differ)
    e = _tfl404_epochs(0, FROM_GENERATOR, CACHE_FIRST)
    assert e[0] != e[1] and e[1] != e[2]
    e = _tfl404_epochs(0, FROM_GENERATOR, CACHE_AFTER)
    assert e[0] == e[1] == e[2]  # and cache after the map still freezes it


def test_tfl404_cache_after_shuffle_replays_the_first_order():
    src = """
    import tensorflow as tf
    ds = tf.data.Dataset.range(32){pipeline}
    EPOCHS = [[int(v) for v in ds] for _ in range(3)]
    """
    bad, good = src.format(pipeline=".shuffle(32).cache()"), src.format(pipeline=".cache().shuffle(32)")
    e = run(bad)["EPOCHS"]
    assert e[0] == e[1] == e[2] and e[0] != sorted(e[0])
    e = run(good)["EPOCHS"]
    assert e[0] != e[1] or e[1] != e[2]
    assert "TFL404" in codes(bad) and "TFL404" not in codes(good)


def test_tfl404_a_shuffle_after_the_cache_reshuffles_the_replayed_order():
    """Why a cache between two shuffles is not reported: the later shuffle draws a new order of
    the cached elements every epoch (the earlier one is wasted, not harmful); a later shuffle
    with a much smaller buffer keeps most of the first epoch's order, and is still reported."""
    src = """
    import tensorflow as tf
    ds = tf.data.Dataset.range(256).shuffle(256).cache(){after}
    EPOCHS = [[int(v) for v in ds] for _ in range(3)]
    """
    e = run(src.format(after=".shuffle(256)"))["EPOCHS"]
    assert e[0] != e[1] and e[1] != e[2]
    assert "TFL404" not in codes(src.format(after=".shuffle(256)"))
    e = run(src.format(after=".shuffle(2)"))["EPOCHS"]
    # each element moves only a few places from where the first epoch had it
    shift = [abs(e[1].index(v) - i) for i, v in enumerate(e[0])]
    assert sum(shift) / len(shift) < 8
    assert "TFL404" in codes(src.format(after=".shuffle(2)"))


# -- TFL406 -------------------------------------------------------------------------------

SPLIT_406 = """
import tensorflow as tf
ds = tf.data.Dataset.range(100).shuffle({shuffle})
train = ds.take(80){train}
test = ds.skip(80)
EPOCHS = [{{int(v) for v in train}} for _ in range(2)]
TEST = {{int(v) for v in test}}
"""


def test_tfl406_a_take_skip_split_of_a_reshuffled_dataset_leaks():
    """``take``/``skip`` of a dataset that reshuffles every iteration read two different orders:
    most test elements are in the training part, which changes every epoch; a seed and a cached
    training part still leak; ``reshuffle_each_iteration=False`` gives two disjoint, fixed parts."""
    bad = SPLIT_406.format(shuffle="100", train="")
    ns = run(bad)
    assert ns["EPOCHS"][0] != ns["EPOCHS"][1]
    assert len(ns["EPOCHS"][0] & ns["TEST"]) > 0
    seeded = SPLIT_406.format(shuffle="100, seed=1", train=".cache()")
    ns = run(seeded)
    assert ns["EPOCHS"][0] == ns["EPOCHS"][1] and len(ns["EPOCHS"][0] & ns["TEST"]) > 0
    good = SPLIT_406.format(shuffle="100, seed=1, reshuffle_each_iteration=False", train="")
    ns = run(good)
    assert ns["EPOCHS"][0] == ns["EPOCHS"][1] and not ns["EPOCHS"][0] & ns["TEST"]
    assert "TFL406" in codes(bad) and "TFL406" in codes(seeded) and "TFL406" not in codes(good)


# -- TFL408 -------------------------------------------------------------------------------

ZIP_408 = """
import os
import keras
import tensorflow as tf

images = {images}
masks = {masks}
PAIRS = [(os.path.basename(a.numpy().decode()), os.path.basename(b.numpy().decode()))
         for a, b in tf.data.Dataset.zip((images, masks))]
"""


def test_tfl408_zipped_listings_that_shuffle_on_their_own_pair_the_wrong_files(tmp_path):
    """``list_files`` shuffles by default, each call with a seed of its own: zipping the listing
    of 20 images with the listing of their 20 masks (the same names) pairs few of them; with
    ``shuffle=False``, or one ``seed`` on both, every pair matches."""
    for folder in ("images", "masks"):
        (tmp_path / folder).mkdir()
        for i in range(20):
            (tmp_path / folder / f"{i:02d}.png").write_bytes(b"")

    def listing(folder: str, args: str = "") -> str:
        return f"tf.data.Dataset.list_files({str(tmp_path / folder / '*.png')!r}{args})"

    def matched(src: str) -> int:
        return sum(a == b for a, b in run(src)["PAIRS"])

    bad = ZIP_408.format(images=listing("images"), masks=listing("masks"))
    one_side = ZIP_408.format(images=listing("images"), masks=listing("masks", ", shuffle=False"))
    unshuffled = ZIP_408.format(images=listing("images", ", shuffle=False"), masks=listing("masks", ", shuffle=False"))
    seeded = ZIP_408.format(images=listing("images", ", seed=7"), masks=listing("masks", ", seed=7"))
    assert matched(bad) < 10 and matched(one_side) < 10  # 1 expected by chance
    assert matched(unshuffled) == 20 and matched(seeded) == 20
    assert "TFL408" in codes(bad) and "TFL408" in codes(one_side)
    assert "TFL408" not in codes(unshuffled) and "TFL408" not in codes(seeded)
    # one listing read by both sides of the zip: each side iterates it anew, in a new order
    twice = ZIP_408.format(images=listing("images"), masks="images.map(lambda p: p)")
    assert matched(twice) < 10 and "TFL408" in codes(twice)
    once = ZIP_408.format(images=listing("images", ", shuffle=False"), masks="images.map(lambda p: p)")
    assert matched(once) == 20 and "TFL408" not in codes(once)


DIRECTORY_408 = """
import numpy as np
import keras
import tensorflow as tf

def load(folder):
    return keras.utils.image_dataset_from_directory(
        folder, labels=None, image_size=(4, 4), color_mode="grayscale", batch_size=8, verbose=False{args})

MATCHED = sum(int(np.sum(a.numpy()[:, 0, 0, 0] == b.numpy()[:, 0, 0, 0]))
              for a, b in tf.data.Dataset.zip((load(IMAGES), load(MASKS))))
"""


def test_tfl408_image_dataset_from_directory_shuffles_each_folder_its_own_way(tmp_path):
    """Two folders of 40 one-colour images, image ``i`` of value ``5 i`` in both: zipped with
    the default ``shuffle=True`` and no seed almost no pair matches; with ``shuffle=False`` or
    the same ``seed`` all 40 do."""
    for folder in ("images", "masks"):
        (tmp_path / folder).mkdir()
        for i in range(40):
            data = tf.io.encode_png(tf.fill([4, 4, 1], tf.constant(i * 5, tf.uint8))).numpy()
            (tmp_path / folder / f"{i:02d}.png").write_bytes(data)
    names = dict(IMAGES=str(tmp_path / "images"), MASKS=str(tmp_path / "masks"))
    bad = DIRECTORY_408.format(args="")
    assert run(bad, **names)["MATCHED"] < 20
    for good in (", shuffle=False", ", seed=3"):
        assert run(DIRECTORY_408.format(args=good), **names)["MATCHED"] == 40
        assert "TFL408" not in codes(DIRECTORY_408.format(args=good))
    assert "TFL408" in codes(bad)


# -- TFL407 -------------------------------------------------------------------------------

SEEDED_407 = """
import numpy as np
import tensorflow as tf
import keras

{seed}
{generator}

def noise():
    return {draw}

x = np.ones((16, 4), "float32")
y = np.zeros((16, 1), "float32")
ds = tf.data.Dataset.from_tensor_slices((x, y)).map(lambda a, b: (a + noise(), b)).batch(4)
model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1, trainable=False)])
model.compile(optimizer="sgd", loss="mse")
LOSSES = model.fit(ds{repeat}, epochs=3, verbose=0{steps}).history["loss"]
"""


def test_tfl407_a_fixed_seed_makes_a_random_map_draw_the_same_values_every_epoch():
    """With its weights frozen, the model's loss in each epoch of ``fit`` depends only on the
    noise the map adds: under ``tf.random.set_seed`` (or an op ``seed=``) the three epochs have
    the same loss, the same draws; without a fixed seed, or drawing from a
    ``tf.random.Generator``, they differ. Each program runs in a fresh interpreter (a global
    seed stays set for the process)."""
    uniform = "tf.random.uniform([4], maxval=10.0)"
    plain = dict(repeat="", steps="")
    variants = {
        "global": dict(seed="tf.random.set_seed(0)", draw=uniform, generator="", **plain),
        "op_seed": dict(seed="", draw="tf.random.uniform([4], maxval=10.0, seed=7)", generator="", **plain),
        "free": dict(seed="", draw=uniform, generator="", **plain),
        "generator": dict(seed="tf.random.set_seed(0)", draw="rng.uniform([4], maxval=10.0)",
                          generator="rng = tf.random.Generator.from_seed(1)", **plain),
        # with steps_per_epoch Keras keeps one iterator across epochs: the stream goes on
        "steps": dict(seed="tf.random.set_seed(0)", draw=uniform, generator="", repeat=".repeat()",
                      steps=", steps_per_epoch=4"),
    }
    sources = {k: SEEDED_407.format(**v) for k, v in variants.items()}
    out = run_isolated_many([({k: src + "RESULT = LOSSES\n"}, 1) for k, src in sources.items()])
    losses = {k: o[k]["result"] for k, o in zip(sources, out)}
    assert len(set(losses["global"])) == 1 and len(set(losses["op_seed"])) == 1
    assert len(set(losses["free"])) == 3 and len(set(losses["generator"])) == 3
    assert len(set(losses["steps"])) == 3
    assert "TFL407" in codes(sources["global"]) and "TFL407" in codes(sources["op_seed"])
    assert "TFL407" not in codes(sources["free"]) and "TFL407" not in codes(sources["generator"])
    assert "TFL407" not in codes(sources["steps"])


def test_tfl407_one_iterator_repeated_keeps_drawing_new_values():
    src = """
    import tensorflow as tf
    tf.random.set_seed(0)
    ds = tf.data.Dataset.range(8).map(lambda x: tf.random.uniform([], maxval=1000, dtype=tf.int64))
    EPOCHS = [[int(v) for v in ds] for _ in range(2)]
    REPEATED = [int(v) for v in ds.repeat(2)]
    """
    epochs, repeated = run_isolated({"p": textwrap.dedent(src) + "RESULT = [EPOCHS, REPEATED]\n"})["p"]["result"]
    assert epochs[0] == epochs[1]
    assert repeated[:8] != repeated[8:]


# -- TFL405 -------------------------------------------------------------------------------

PY_405 = """
import time
import numpy as np
import tensorflow as tf

def python_work(x):
    total = 0
    for i in range(60_000):  # pure-Python computing: holds the GIL
        total += i % 7
    return np.float32(total + x)

def load(x):
    return tf.numpy_function(python_work, [x], tf.float32)

ds = tf.data.Dataset.range(24).map(load, num_parallel_calls={calls})
start = time.perf_counter()
for v in ds:
    pass
ELAPSED = time.perf_counter() - start
"""
TF_405 = """
import tensorflow as tf

def load(x):
    r = tf.range(60_000, dtype=tf.int64)
    return tf.cast(tf.reduce_sum(r % 7) + x, tf.float32)

ds = tf.data.Dataset.range(24).map(load, num_parallel_calls=tf.data.AUTOTUNE)
"""


def test_tfl405_python_in_map_gains_nothing_from_parallel_calls_and_cannot_be_serialized():
    from tensorflow.python.data.ops.options import ExternalStatePolicy

    # Alternate the two, three times each, and compare the fastest runs: the first run of a
    # process pays for thread pools and tracing, and a busy machine slows single runs.
    runs = {"parallel": [], "sequential": []}
    for _ in range(3):
        runs["parallel"].append(run(PY_405.format(calls="tf.data.AUTOTUNE")))
        runs["sequential"].append(run(PY_405.format(calls="1")))
    fastest = {k: min(ns["ELAPSED"] for ns in v) for k, v in runs.items()}
    parallel = runs["parallel"][-1]
    # The GIL serializes the Python work: parallel calls do not make it (much) faster.
    assert fastest["parallel"] > fastest["sequential"] / 1.6, fastest
    with pytest.raises(tf.errors.FailedPreconditionError):
        parallel["ds"]._as_serialized_graph(external_state_policy=ExternalStatePolicy.FAIL)
    ns = run(TF_405)
    ns["ds"]._as_serialized_graph(external_state_policy=ExternalStatePolicy.FAIL)  # serializable
    assert [int(v) for v in ns["ds"].take(2)] == [int(v) for v in parallel["ds"].take(2)]
    assert "TFL405" in codes(PY_405.format(calls="tf.data.AUTOTUNE")) and "TFL405" not in codes(TF_405)
