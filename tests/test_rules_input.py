"""tf.data chain facts and the TFL4xx rules on realistic code."""

from __future__ import annotations

import ast
import textwrap

from tests.rule_harness import run_rules
from tflint.analysis import Analysis
from tflint.analysis.version import make_target
from tflint.rules.base import RuleContext
from tflint.rules.input_pipeline import (
    RandomMapWithFixedSeed,
    CacheAfterRandomness,
    DatasetWithoutPrefetch,
    MapWithoutParallelCalls,
    PyFunctionInDatasetMap,
    ShuffleAfterBatch,
    ZipOfShuffledFileListings,
)


def facts(src: str):
    src = textwrap.dedent(src)
    tree = ast.parse(src)
    return Analysis(tree, src).datasets, tree


def lines(src: str, rule) -> list[int]:
    return [f.line for f in run_rules(textwrap.dedent(src), [rule])]


def run_at(src: str, rules, version: str):
    """The findings of ``rules`` on ``src`` for code targeting TensorFlow ``version``."""
    src = textwrap.dedent(src)
    tree = ast.parse(src)
    ctx = RuleContext("example.py", src, tree, Analysis(tree, src, make_target(version)))
    for rule in rules:
        rule().run(ctx)
    return sorted(ctx.findings, key=lambda f: f.sort_key())


def lines_at(src: str, rule, version: str) -> list[int]:
    return [f.line for f in run_at(src, [rule], version)]


# -- the analysis -------------------------------------------------------------------------

def test_chain_followed_across_statements_and_functions():
    d, _tree = facts(
        """
        import tensorflow as tf

        def make(files, training):
            ds = tf.data.TFRecordDataset(files)
            ds = ds.map(parse, num_parallel_calls=4)
            if training:
                ds = ds.shuffle(100)
            ds = ds.batch(8)
            return ds

        train = make(["a"], True)
        for step, batch in enumerate(train):
            pass
        """
    )
    (cons,) = d.consumptions
    assert cons.kind == "for"
    got = sorted(c.methods() for c in cons.chains)
    assert got == [["map", "batch"], ["map", "shuffle", "batch"]]
    assert {c.line for c in cons.chains} == {5}
    assert all(not c.has_prefetch() for c in cons.chains)


def test_consumption_kinds_and_roles():
    d, _ = facts(
        """
        import tensorflow as tf
        ds = tf.data.Dataset.range(10).batch(2)
        val = tf.data.Dataset.range(4).batch(2).prefetch(1)
        model.fit(ds, validation_data=val)
        model.evaluate(x=ds)
        model.predict(ds)
        it = iter(ds)
        for x in ds.as_numpy_iterator():
            pass
        """
    )
    got = sorted((c.kind, c.role, c.node.lineno) for c in d.consumptions)
    assert got == [
        ("evaluate", "x", 6),
        ("fit", "validation_data", 5),
        ("fit", "x", 5),
        ("for", "iterable", 9),
        ("iter", "iterable", 8),
        ("predict", "x", 7),
    ]


def test_is_dataset_only_for_tf_data_values():
    d, tree = facts(
        """
        import pandas as pd
        import tensorflow as tf

        def f(ds: tf.data.Dataset, other):
            a = ds.map(g)
            b = other.map(g)
            return a, b

        s = pd.Series([1]).map(str)
        m = map(str, [1])
        t = tf.data.Dataset.range(3).map(g)
        """
    )
    maps = {n.lineno: n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "map"}
    assert d.is_dataset(maps[6])  # annotated parameter
    assert not d.is_dataset(maps[7])  # unknown receiver
    assert not d.is_dataset(maps[10])  # pandas
    assert d.is_dataset(maps[12])


def test_method_position_on_multiline_chain():
    d, _tree = facts(
        """
        import tensorflow as tf
        ds = (tf.data.Dataset.range(10)
              .shuffle(10)
              .map(lambda x: x)  # comment
              .batch(2))
        """
    )
    (t,) = [t for t in d.transformations if t.method == "map"]
    assert d.method_position(t.node) == (5, 7)


# -- TFL401 ---------------------------------------------------------------------------------

def test_prefetch_on_later_line_does_not_fire():
    src = """
    import tensorflow as tf
    ds = tf.data.Dataset.range(100).batch(4)
    ds = ds.map(lambda x: x, num_parallel_calls=2)
    ds = ds.prefetch(tf.data.AUTOTUNE)
    for x in ds:
        pass
    """
    assert lines(src, DatasetWithoutPrefetch) == []


def test_tfl401_reported_at_consumption_naming_the_build_line():
    src = textwrap.dedent(
        """
        import tensorflow as tf

        def make():
            ds = tf.data.Dataset.range(100)
            return ds.batch(4)

        def train(model):
            data = make()
            model.fit(data, epochs=2)
        """
    )
    assert run_rules(src, [DatasetWithoutPrefetch]) == []  # TF 2.21 injects the prefetch
    (f,) = run_at(src, [DatasetWithoutPrefetch], "2.8")
    assert (f.line, f.code) == (10, "TFL401")
    assert "built on line 5" in f.message and "fit()" in f.message
    assert "TensorFlow 2.8 (the target version) adds no prefetch" in f.message


def test_tfl401_prefetch_only_on_one_branch_still_fires_without_fix():
    src = textwrap.dedent(
        """
        import tensorflow as tf
        ds = tf.data.Dataset.range(10)
        if flag:
            ds = ds.batch(2)
        else:
            ds = ds.batch(4)
        for x in ds:
            pass
        """
    )
    (f,) = run_at(src, [DatasetWithoutPrefetch], "2.8")
    assert f.line == 8 and f.fix is None


def test_tfl401_silent_for_distributed_and_unknown_datasets():
    src = """
    import tensorflow as tf
    strategy = tf.distribute.MirroredStrategy()
    ds = tf.data.Dataset.range(10).batch(2)
    dist = strategy.experimental_distribute_dataset(ds)
    for x in dist:
        pass

    def loop(dataset):
        for x in dataset:
            pass
    """
    assert lines_at(src, DatasetWithoutPrefetch, "2.8") == []


def test_tfl401_never_for_sources_that_prefetch_themselves():
    src = """
    import tensorflow as tf
    from tensorflow import keras
    options = tf.data.Options()
    options.experimental_optimization.inject_prefetch = False
    ds = keras.utils.image_dataset_from_directory("d/")
    ds = ds.take(100).with_options(options)
    keras.Model().fit(ds)
    ds2 = keras.utils.image_dataset_from_directory("d/").map(lambda x, y: (x, y), num_parallel_calls=2)
    keras.Model().fit(ds2.with_options(options))
    ds3 = keras.utils.text_dataset_from_directory("t/").with_options(options)
    keras.Model().fit(ds3)
    ds4 = tf.data.experimental.make_csv_dataset("a.csv", batch_size=4).with_options(options)
    for x in ds4:
        pass
    ds5 = keras.utils.timeseries_dataset_from_array(data, None, 10).with_options(options)
    keras.Model().fit(ds5)
    """
    assert lines_at(src, DatasetWithoutPrefetch, "2.8") == []
    assert lines_at(src, DatasetWithoutPrefetch, "2.21") == []


def test_tfl401_by_target_version_and_options():
    src = """
    import tensorflow as tf
    ds = tf.data.Dataset.range(100).batch(4)
    for x in ds:
        pass
    """
    assert lines_at(src, DatasetWithoutPrefetch, "2.8") == [4]
    assert lines_at(src, DatasetWithoutPrefetch, "2.9") == []
    assert lines_at(src, DatasetWithoutPrefetch, "2.21") == []
    for setting in (
        "experimental_optimization.inject_prefetch = False",
        "experimental_optimization.apply_default_optimizations = False",
        "autotune.enabled = False",
    ):
        off = f"""
        import tensorflow as tf
        opts = tf.data.Options()
        opts.{setting}
        ds = tf.data.Dataset.range(100).batch(4).with_options(opts)
        for x in ds:
            pass
        """
        (f,) = run_at(off, [DatasetWithoutPrefetch], "2.21")
        assert f.line == 6 and "options switch off" in f.message, setting
        assert f.fix is not None
    for harmless in (
        "experimental_optimization.inject_prefetch = True",
        "experimental_optimization.map_parallelization = False",
        "deterministic = False",
    ):
        on = f"""
        import tensorflow as tf
        opts = tf.data.Options()
        opts.{harmless}
        ds = tf.data.Dataset.range(100).batch(4).with_options(opts)
        for x in ds:
            pass
        """
        assert lines_at(on, DatasetWithoutPrefetch, "2.21") == [], harmless
    unknown = """
    import tensorflow as tf
    def make(opts):
        return tf.data.Dataset.range(100).batch(4).with_options(opts)
    for x in make(get_options()):
        pass
    """
    assert lines_at(unknown, DatasetWithoutPrefetch, "2.21") == []


# -- TFL402 ---------------------------------------------------------------------------------

def test_tfl402_reported_on_the_map_line_of_a_chain():
    src = """
    import tensorflow as tf
    ds = (
        tf.data.Dataset.range(10)
        .map(lambda x: x + tf.random.uniform([], dtype=tf.int64, maxval=3))
        .map(lambda x: x, 2)
        .map(lambda x: x, num_parallel_calls=None)
        .map(lambda x: x, **opts)
        .map(lambda x: x)
    )
    """
    assert lines(src, MapWithoutParallelCalls) == [5]
    assert lines_at(src, MapWithoutParallelCalls, "2.5") == [5, 9]


def test_tfl402_names_the_call_that_reads_state_not_an_attribute_read_before_it():
    src = """
    import keras
    import tensorflow as tf

    tokenizer = keras.layers.StringLookup(vocabulary=["a", "b"])

    def preprocess(text, label):
        start = tokenizer.vocabulary_size
        return tokenizer(text), label

    def constants_only(text, label):
        return text, tokenizer.vocabulary_size

    ds = tf.data.Dataset.from_tensor_slices((["a"], [1]))
    ds.map(preprocess)
    ds.map(constants_only)
    """
    found = run_rules(textwrap.dedent(src), [MapWithoutParallelCalls])
    assert [f.line for f in found] == [15, 16]
    # the call, line 9, not the attribute read on line 8; an attribute read alone still counts
    assert "line 9)" in found[0].message and "line 12)" in found[1].message


def test_tfl402_only_stateful_functions_or_parallelization_off():
    stateful = {
        "tf.random.uniform([])": True,
        "tf.image.random_flip_left_right(x)": True,
        "tf.py_function(f, [x], tf.float32)": True,
        "tf.numpy_function(f, [x], tf.float32)": True,
        "tf.numpy_function(f, [x], tf.float32, stateful=False)": False,
        "tf.print(x)": True,
        "tf.nn.dropout(x, 0.5)": True,
        "tf.random.stateless_uniform([], seed=[1, 2])": False,
        "tf.image.stateless_random_flip_left_right(x, seed=[1, 2])": False,
        "tf.image.resize(x, [8, 8])": False,
        "counter + x": True,
        "table.lookup(x)": True,
        "flip(x)": True,
        "norm(x)": True,
        "scale(x)": False,
    }
    for expr, fires in stateful.items():
        src = f"""
        import tensorflow as tf
        from tensorflow import keras
        counter = tf.Variable(0.0)
        table = tf.lookup.StaticHashTable(init, -1)
        flip = keras.layers.RandomFlip()
        norm = keras.layers.Normalization()
        scale = keras.layers.Rescaling(1 / 255)

        def helper(x):
            return {expr}

        def fn(x):
            return helper(x)

        ds = tf.data.Dataset.from_tensor_slices(tf.zeros([4, 8, 8, 3])).map(fn)
        """
        got = run_at(src, [MapWithoutParallelCalls], "2.21")
        assert bool(got) == fires, expr
        if fires:
            assert "stateful" in got[0].message and got[0].fix is not None, expr


def test_tfl402_map_parallelization_switched_off_upstream_or_downstream():
    for setting in ("map_parallelization", "apply_default_optimizations"):
        src = f"""
        import tensorflow as tf
        o = tf.data.Options()
        o.experimental_optimization.{setting} = False
        ds = tf.data.Dataset.range(10).map(lambda x: x * 2)
        ds = ds.batch(2).with_options(o)
        ds2 = tf.data.Dataset.range(10).with_options(o).map(lambda x: x + 1)
        """
        (a, b) = run_at(src, [MapWithoutParallelCalls], "2.21")
        assert (a.line, b.line) == (5, 7) and "switch off" in a.message
    src = """
    import tensorflow as tf
    o = tf.data.Options()
    o.experimental_optimization.inject_prefetch = False
    ds = tf.data.Dataset.range(10).map(lambda x: x * 2).with_options(o)
    """
    assert lines_at(src, MapWithoutParallelCalls, "2.21") == []


def test_tfl402_ignores_non_datasets():
    src = """
    import tensorflow as tf
    import pandas as pd
    df = pd.DataFrame({"a": [1]})
    df["a"].map(str)
    list(map(str, [1, 2]))
    executor.map(fn, items)
    """
    assert lines(src, MapWithoutParallelCalls) == []


# -- TFL403 / TFL404 ------------------------------------------------------------------------

def test_tfl403_names_the_batching_step_and_resets_after_unbatch():
    src = textwrap.dedent(
        """
        import tensorflow as tf
        a = tf.data.Dataset.range(10).padded_batch(2)
        a = a.shuffle(4)
        b = tf.data.Dataset.range(10).batch(2).unbatch().shuffle(4)
        """
    )
    (f,) = run_rules(src, [ShuffleAfterBatch])
    assert f.line == 4 and "`.padded_batch()` (line 3)" in f.message


def test_tfl404_random_map_through_helpers_and_layers():
    src = """
    import tensorflow as tf
    from tensorflow.keras import layers

    def flip(x):
        return tf.image.stateless_random_flip_left_right(x, seed=(1, 2))

    def augment(x, y):
        return flip(x), y

    class Pipeline:
        def __init__(self):
            self.aug = layers.RandomZoom(0.1)

        def build(self, ds):
            ds = ds.map(lambda x, y: (self.aug(x), y), num_parallel_calls=2)
            return ds.cache()

    def scale(x, y):
        return x / 255.0, y

    ds = tf.data.Dataset.from_tensor_slices((tf.zeros([2, 4, 4, 3]), tf.zeros([2])))
    a = ds.map(augment, num_parallel_calls=2).cache()
    b = ds.map(scale, num_parallel_calls=2).cache()
    """
    # The method's `ds` is an unannotated parameter: not known to be a dataset.
    assert lines(src, CacheAfterRandomness) == [23]


def test_tfl404_shuffle_then_cache_but_not_cache_then_shuffle():
    src = """
    import tensorflow as tf
    ds = tf.data.Dataset.range(10)
    a = ds.cache().shuffle(10).batch(2)
    b = ds.shuffle(10).batch(2)
    b = b.cache()
    """
    assert lines(src, CacheAfterRandomness) == [6]


# -- TFL405 ---------------------------------------------------------------------------------

def test_tfl405_only_inside_dataset_map_functions():
    src = """
    import tensorflow as tf

    def slow(x):
        return x

    def parse(x):
        return tf.py_function(slow, [x], tf.int64)

    @tf.function
    def step(x):
        return tf.py_function(slow, [x], tf.int64)

    ds = tf.data.Dataset.range(3).map(parse, num_parallel_calls=2)
    values = [slow(v) for v in range(3)]
    """
    assert lines(src, PyFunctionInDatasetMap) == [8]


def test_datasets_passed_to_functions_and_stored_on_self_are_followed():
    src = textwrap.dedent(
        """
        import tensorflow as tf

        def train_loop(model, dataset):
            for batch in dataset:
                model.train_on_batch(*batch)

        class Trainer:
            def __init__(self, files):
                self.train_ds = tf.data.TFRecordDataset(files).batch(8)

            def run(self, model):
                model.fit(self.train_ds)

        def main(model):
            ds = tf.data.Dataset.range(10).batch(2)
            train_loop(model, ds)
            good = tf.data.Dataset.range(10).batch(2).prefetch(1)
            train_loop(model, good)
        """
    )
    # train_loop gets one prefetched and one plain dataset: not reported (either may be meant).
    found = run_at(src, [DatasetWithoutPrefetch], "2.8")
    assert [(f.line, "line 10" in f.message) for f in found] == [(13, True)]


def test_dataset_parameter_from_the_only_call_site():
    src = """
    import tensorflow as tf

    def loop(dataset):
        for batch in dataset:
            pass

    loop(tf.data.Dataset.range(10).batch(2))
    """
    assert lines_at(src, DatasetWithoutPrefetch, "2.8") == [5]


def test_tfl401_module_level_options_applied_in_a_function():
    src = """
    import tensorflow as tf

    OPTIONS = tf.data.Options()
    OPTIONS.experimental_optimization.inject_prefetch = False

    def make():
        return tf.data.Dataset.range(8).batch(2).with_options(OPTIONS)

    def local():
        OPTIONS = tf.data.Options()
        return tf.data.Dataset.range(8).batch(2).with_options(OPTIONS)

    for x in make():
        pass
    for x in local():
        pass
    """
    assert lines_at(src, DatasetWithoutPrefetch, "2.21") == [14]


def test_tfl402_map_function_passed_in_as_a_parameter():
    """``make(parser)`` maps a function its callers pass in: the callers' functions count."""
    src = """
    import tensorflow as tf

    def make(files, parser):
        return tf.data.TFRecordDataset(files).map(parser)

    def train(files):
        def augment(record):
            return tf.image.random_flip_left_right(tf.io.parse_tensor(record, tf.float32))
        return make(files, parser=augment)

    def evaluate(files):
        def decode(record):
            return tf.io.parse_tensor(record, tf.float32)
        return make(files, decode)
    """
    assert lines_at(src, MapWithoutParallelCalls, "2.21") == [5]
    stateless_only = src.replace("tf.image.random_flip_left_right(", "tf.identity(")
    assert lines_at(stateless_only, MapWithoutParallelCalls, "2.21") == []


def test_a_helper_returns_to_each_caller_the_pipeline_it_was_given():
    """``train = prepare(raw)`` with ``def prepare(ds): return ds.map(f).batch(32)``: the caller
    reads the returned pipeline (its fit is the consumption TFL407 judges); another caller's
    dataset does not come back to this one."""
    src = """
    import tensorflow as tf

    tf.random.set_seed(1)

    def augment(x):
        return tf.image.random_flip_left_right(x)

    def prepare(ds):
        return ds.map(augment, num_parallel_calls=tf.data.AUTOTUNE).batch(32)

    train = prepare(tf.data.Dataset.from_tensor_slices(tf.zeros([64, 8, 8, 3])))
    other = prepare(tf.data.Dataset.range(10))
    model.fit(train, epochs=10)
    """
    a = Analysis(ast.parse(textwrap.dedent(src)), textwrap.dedent(src))
    train = next(n for n in ast.walk(a.tree) if isinstance(n, ast.Name) and n.id == "train"
                 and isinstance(n.ctx, ast.Load))
    roots = {getattr(c.root.func, "attr", None) for c in a.datasets.chains_of(train)}
    assert roots == {"from_tensor_slices"}
    assert lines(src, RandomMapWithFixedSeed) == [10]


# -- TFL408 ------------------------------------------------------------------------------------

ZIP_HEAD = "import keras\nimport tensorflow as tf\nSEED = 42\n"


def zip_lines(images: str, masks: str, zip_call: str = "tf.data.Dataset.zip((images, masks))") -> list[int]:
    return lines(ZIP_HEAD + f"images = {images}\nmasks = {masks}\nds = {zip_call}\n", ZipOfShuffledFileListings)


def test_tfl408_which_listings_line_up():
    shuffled = "tf.data.Dataset.list_files('img/*.png')"
    ordered = "tf.data.Dataset.list_files('mask/*.png', shuffle=False)"
    # a listing in an order of its own against: a fixed order, another random order, an array
    assert zip_lines(shuffled, ordered) == [4]
    assert zip_lines(shuffled, "tf.data.Dataset.list_files('mask/*.png')") == [4]
    assert zip_lines(shuffled, "tf.data.Dataset.from_tensor_slices(label_list)") == [4]
    assert zip_lines(shuffled, "tf.data.Dataset.list_files('mask/*.png', shuffle=True, seed=None)") == [4]
    # the other forms of zip
    assert zip_lines(shuffled, ordered, "tf.data.Dataset.zip(images, masks)") == [4]
    assert zip_lines(shuffled, ordered, "tf.data.Dataset.zip({'x': images, 'y': masks})") == [4]
    # seeds: the same value lines up, different ones do not, a seeded order is not a fixed one
    seeded = "tf.data.Dataset.list_files('{}/*.png', seed={})"
    assert zip_lines(seeded.format("img", "SEED"), seeded.format("mask", "42")) == []
    assert zip_lines(seeded.format("img", "1"), seeded.format("mask", "2")) == [4]
    assert zip_lines(seeded.format("img", "SEED"), seeded.format("mask", "args.seed")) == []  # may be equal
    assert zip_lines(seeded.format("img", "1"), ordered) == [4]
    directory = "tf.keras.utils.image_dataset_from_directory('{}', labels=None{})"
    assert zip_lines(directory.format("img", ""), directory.format("mask", "")) == [4]
    assert zip_lines(directory.format("img", ", shuffle=False"), directory.format("mask", ", shuffle=False")) == []
    assert zip_lines(directory.format("img", ", seed=SEED"), directory.format("mask", ", seed=SEED")) == []


def test_tfl408_orders_it_does_not_judge():
    shuffled = "tf.data.Dataset.list_files('img/*.png')"
    # an explicit shuffle (unpaired data is shuffled on purpose), an index, a single file,
    # shuffling chosen by a variable, one dataset alone
    assert zip_lines("tf.data.Dataset.from_tensor_slices(a).shuffle(100)",
                     "tf.data.Dataset.from_tensor_slices(b).shuffle(100)") == []
    assert zip_lines(shuffled, "tf.data.Dataset.range(1000)") == []
    assert zip_lines("tf.data.Dataset.list_files('img/0001.png')",
                     "tf.data.Dataset.list_files('mask/*.png', shuffle=False)") == []
    assert zip_lines("tf.data.Dataset.list_files('img/*.png', shuffle=training)",
                     "tf.data.Dataset.list_files('mask/*.png', shuffle=False)") == []
    assert zip_lines(shuffled, "tf.data.Dataset.list_files('mask/*.png', shuffle=False)",
                     "tf.data.Dataset.zip((images,))") == []


def test_tfl408_two_shuffled_listings_need_a_partner_name():
    # unpaired domains (CycleGAN) are zipped at random on purpose: only a name or pattern that
    # says one side holds each element's partner makes two random orders a mismatch
    src = ZIP_HEAD + "{a} = tf.data.Dataset.list_files('{pa}')\n{b} = tf.data.Dataset.list_files('{pb}')\n" \
        "ds = tf.data.Dataset.zip(({a}, {b}))\n"

    def got(a, pa, b, pb):
        return lines(src.format(a=a, pa=pa, b=b, pb=pb), ZipOfShuffledFileListings)

    assert got("train_A", "monet2photo/train/A/*", "train_B", "monet2photo/train/B/*") == []
    assert got("horses", "trainA/*.jpg", "zebras", "trainB/*.jpg") == []
    assert got("images", "data/images/*.png", "masks", "data/masks/*.png") == [4]
    assert got("blurred", "GOPRO/blur/*.png", "sharp", "GOPRO/sharp/*.png") == [4]
    assert got("x_files", "data/x/*.npy", "yFiles", "data/gt/*.npy") == [4]  # camelCase and a pattern
    # a helper that makes a new listing per call: two listings, not one read twice
    helper = """
    import tensorflow as tf

    def listing(folder):
        return tf.data.Dataset.list_files(folder + "/*.jpg")

    ds = tf.data.Dataset.zip((listing("trainA"), listing("trainB")))
    """
    assert lines(helper, ZipOfShuffledFileListings) == []


def test_tfl408_listings_made_in_a_function_and_transformed():
    src = """
    import tensorflow as tf

    def listing(folder):
        return tf.data.Dataset.list_files(folder + "/*.png")

    blurred = listing("blur").map(tf.io.read_file)
    sharp = listing("sharp").map(tf.io.read_file)
    pairs = tf.data.Dataset.zip((blurred, sharp)).batch(4)
    """
    (f,) = run_rules(textwrap.dedent(src), [ZipOfShuffledFileListings])
    assert f.line == 5 and "`Dataset.zip` (line 9) pairs it with `sharp`" in f.message


def test_tfl408_one_listing_read_twice():
    # each branch of the zip iterates the listing anew, and each iteration reshuffles it: on
    # TensorFlow 2.21 none of 20 pairs match (tests/premises/test_input_pipeline.py)
    src = """
    import tensorflow as tf

    files = tf.data.Dataset.list_files("data/*.png")
    images = files.map(load_image)
    masks = files.map(mask_path).map(load_mask)
    ds = tf.data.Dataset.zip((images, masks))
    """
    assert lines(src, ZipOfShuffledFileListings) == [4]
    assert lines(src.replace('"data/*.png")', '"data/*.png", shuffle=False)'), ZipOfShuffledFileListings) == []
