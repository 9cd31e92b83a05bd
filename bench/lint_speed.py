"""How fast is `tflint check`? Side by side, in one run, on the same files.

    python bench/lint_speed.py [PATH ...] [--repeat N]

Default PATH: the installed ``keras/src`` tree (found without importing keras). Notebooks
(``.ipynb``) count too: the bare loop parses each of their code cells. For each path
it measures, as wall-clock time of a fresh process (the minimum over ``--repeat`` runs):

- a bare ``ast.parse`` loop over the same files, on one core (the floor for any AST linter);
- ``tflint check`` cold (empty cache), and the engine alone (``--select TFL000``: read, decode,
  parse, no rules);
- ``tflint check`` warm (cache filled by the cold run);
- ``ruff check --select ALL`` if ruff is installed;

and on a small single file: ``tflint check f.py`` against ``python -c "import typer"``.
It prints each target as a ratio: cold / ast.parse loop (target <= 2), warm / cold
(target <= 0.25), single file / import typer (target <= 2).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

SMALL = (
    "import tensorflow as tf\n\n\n"
    "@tf.function\n"
    "def train_step(model, optimizer, x, y):\n"
    "    with tf.GradientTape() as tape:\n"
    "        loss = tf.reduce_mean(tf.square(model(x) - y))\n"
    "    grads = tape.gradient(loss, model.trainable_variables)\n"
    "    optimizer.apply_gradients(zip(grads, model.trainable_variables))\n"
    "    return loss\n"
)

PARSE_LOOP = r"""
import ast, json, sys, warnings
warnings.simplefilter("ignore")
for path in sys.stdin.read().splitlines():
    with open(path, "rb") as fh:
        data = fh.read()
    # a notebook: each code cell on its own (a cell with IPython syntax fails where it starts)
    texts = [data]
    if path.endswith(".ipynb"):
        cells = json.loads(data).get("cells", [])
        texts = ["".join(c.get("source", "")) for c in cells if c.get("cell_type") == "code"]
    for text in texts:
        try:
            ast.parse(text)
        except (SyntaxError, ValueError):
            pass
"""


def default_path() -> str:
    spec = importlib.util.find_spec("keras")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("error: keras is not installed; give a PATH to measure")
    return os.path.join(list(spec.submodule_search_locations)[0], "src")


def timed(cmd: list[str], env: dict | None = None, stdin: str | None = None, cwd: str | None = None) -> float:
    t = time.perf_counter()
    proc = subprocess.run(cmd, env=env, input=stdin, cwd=cwd, capture_output=True, text=True)
    elapsed = time.perf_counter() - t
    if proc.returncode not in (0, 1):
        sys.exit(f"error: {' '.join(cmd[:4])}... exited {proc.returncode}: {proc.stderr.strip()[-500:]}")
    return elapsed


def best(fn, n: int) -> float:
    return min(fn() for _ in range(max(n, 1)))


def tflint_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "tflint", "check", "--exit-zero", "--quiet", "--output-format", "concise", *args]


def _cache_names(d: str) -> set[str]:
    names = set()
    for root, _dirs, files in os.walk(d):
        names.update(os.path.join(root, f) for f in files if f.endswith(".json"))
    return names


def measure_warm(path: str, env: dict, repeat: int) -> tuple[float, str]:
    """Warm time: fill a cache, then re-run. The cache belongs to one build of tflint; if
    tflint's own sources change during the measurement (a working tree being edited), the
    runs are not warm: measure again (up to three times) and say so."""
    note = ""
    for _attempt in range(3):
        with tempfile.TemporaryDirectory() as d:
            cenv = {**env, "TFLINT_CACHE_DIR": d}
            timed(tflint_cmd(path), env=cenv)  # fill the cache
            before = _cache_names(d)
            warm = best(lambda: timed(tflint_cmd(path), env=cenv), repeat)
            if _cache_names(d) == before:
                return warm, note
        note = "   (re-measured: tflint's sources changed during the run)"
    return warm, "   (tflint's sources kept changing: not a warm measurement)"


def measure_tree(path: str, repeat: int) -> None:
    env = {k: v for k, v in os.environ.items() if k != "TFLINT_CACHE_DIR"}
    listing = subprocess.run(tflint_cmd("--show-files", path), capture_output=True, text=True, env=env)
    files = [os.path.abspath(f) for f in listing.stdout.splitlines() if f.endswith((".py", ".ipynb"))]
    if not files:
        print(f"{path}: no Python files")
        return
    lines = 0
    for f in files:
        with open(f, "rb") as fh:
            lines += fh.read().count(b"\n")
    file_list = "\n".join(files)
    print(f"\n== {path}: {len(files)} files, {lines} lines, {os.cpu_count()} CPUs ==")

    parse = best(lambda: timed([sys.executable, "-c", PARSE_LOOP], stdin=file_list), repeat)

    def cold_run(*extra: str) -> float:
        with tempfile.TemporaryDirectory() as d:
            return timed(tflint_cmd(*extra, path), env={**env, "TFLINT_CACHE_DIR": d})

    engine = best(lambda: cold_run("--select", "TFL000"), repeat)
    cold = best(cold_run, repeat)
    warm, note = measure_warm(path, env, max(repeat, 3))
    ruff = shutil.which("ruff") or (
        os.path.join(os.path.dirname(sys.executable), "ruff")
        if os.path.exists(os.path.join(os.path.dirname(sys.executable), "ruff"))
        else None
    )
    ruff_t = None
    if ruff:
        ruff_t = best(
            lambda: timed([ruff, "check", "--no-cache", "--select", "ALL", "--exit-zero", "-q", "--output-format", "concise", path]),
            repeat,
        )
    print(f"{'bare ast.parse loop (1 core)':42s} {parse:8.2f} s")
    print(f"{'tflint engine only (--select TFL000)':42s} {engine:8.2f} s   {engine / parse:6.2f}x ast.parse")
    print(f"{'tflint cold (no cache, all rules)':42s} {cold:8.2f} s   {cold / parse:6.2f}x ast.parse   (target <= 2)")
    print(f"{'tflint warm (cache)':42s} {warm:8.2f} s   {warm / cold:6.2f}x cold        (target <= 0.25){note}")
    if ruff_t is not None:
        print(f"{'ruff check --select ALL (no cache)':42s} {ruff_t:8.2f} s   {ruff_t / parse:6.2f}x ast.parse")
    else:
        print("ruff: not installed")


def measure_single(repeat: int) -> None:
    # an installed tflint has its bytecode compiled (pip writes it at install): one run with
    # bytecode writing allowed first, or PYTHONDONTWRITEBYTECODE would make every timed run
    # compile tflint's modules again (a stale or missing cache measured ~1.3-3x here)
    env = {k: v for k, v in os.environ.items() if k not in ("TFLINT_CACHE_DIR", "PYTHONDONTWRITEBYTECODE")}
    with tempfile.TemporaryDirectory() as d:
        f = os.path.join(d, "train_step.py")
        with open(f, "w") as fh:
            fh.write(SMALL)
        n = max(repeat * 3, 7)
        timed(tflint_cmd("--no-cache", f), env=env, cwd=d)
        timed([sys.executable, "-c", "import typer"], env=env)
        typer_t = statistics.median(timed([sys.executable, "-c", "import typer"], env=env) for _ in range(n))
        single = statistics.median(
            timed(tflint_cmd("--no-cache", f), env=env, cwd=d) for _ in range(n)
        )
    print(f"\n== single small file ({len(SMALL.splitlines())} lines), median of {n} ==")
    label = 'python -c "import typer"'
    print(f"{label:42s} {typer_t:8.3f} s")
    print(f"{'tflint check f.py':42s} {single:8.3f} s   {single / typer_t:6.2f}x import typer (target <= 2)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="*", help="trees to measure (default: the installed keras/src)")
    ap.add_argument("--repeat", type=int, default=1, help="runs per measurement; the minimum is shown")
    args = ap.parse_args()
    for p in args.paths or [default_path()]:
        if not os.path.exists(p):
            sys.exit(f"error: {p}: no such file or directory")
        measure_tree(p, args.repeat)
    measure_single(args.repeat)


if __name__ == "__main__":
    main()
