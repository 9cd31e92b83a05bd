"""The TensorFlow (and Keras) version the checked code targets.

Like a Python linter's target version, it decides which behaviour of TensorFlow a rule may
assume: tf.data's automatic prefetch injection, automatic map parallelization, Keras 3 versus
Keras 2. It is a shared fact: the engine hands one :class:`TargetVersion` to every rule as
``ctx.analysis.target``.

Where it comes from, first match wins:

1. ``--target-version`` on the command line, or ``target-version`` in the configuration;
2. the checked project's own dependency declarations: ``pyproject.toml``
   (``[project] dependencies`` and ``optional-dependencies``) and ``requirements*.txt`` in the
   checked file's directory or the closest directory above it that has any of them. The lowest TensorFlow version
   the declared range admits is the target (``tensorflow>=2.12,<2.16`` → 2.12,
   ``tensorflow-cpu==2.15.*`` → 2.15), as code must behave well on every version it supports.
   ``tf-keras`` declared means Keras 2; ``keras>=3`` / ``keras<3`` say which Keras;
3. the installed distribution's metadata (its ``*.dist-info`` directory on ``sys.path``;
   TensorFlow is never imported);
4. the newest supported version, :data:`NEWEST`.

Accepted spellings: ``"2.16"``, ``"2.16.1"`` (the patch level is ignored), ``"tf2.16"``,
``"tensorflow2.16"``; from 2.0 to :data:`NEWEST`.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from functools import lru_cache

OLDEST = (2, 0)
NEWEST = (2, 21)

# TensorFlow behaviour by version (what rules consult).
# tf.data appends a prefetch to a pipeline whose last step is synchronous (the `inject_prefetch`
# optimization, on by default since 2.9; measured on 2.21 in tests/premises).
INJECT_PREFETCH_SINCE = (2, 9)
# tf.data runs a stateless `map` in parallel (the `map_parallelization` optimization, on by
# default since 2.6; measured on 2.21 in tests/premises).
MAP_PARALLELIZATION_SINCE = (2, 6)
# `tf.keras` is Keras 3 from TensorFlow 2.16 on, unless tf-keras (Keras 2) is used.
KERAS3_SINCE = (2, 16)

TF_PACKAGES = ("tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tensorflow-macos", "tensorflow-intel",
               "tensorflow-aarch64")
_KERAS2_PACKAGES = ("tf-keras",)

ACCEPTED = f"a TensorFlow version from {OLDEST[0]}.{OLDEST[1]} to {NEWEST[0]}.{NEWEST[1]}, like '2.16' or 'tf2.16'"

_VERSION_RE = re.compile(r"^\s*(?:tf|tensorflow)?[-_ ]?v?(\d+)\.(\d+)(?:\.\d+)?(?:\.\*)?\s*$", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class TargetVersion:
    """``tensorflow``: (major, minor); ``keras``: the Keras major version ``tf.keras`` is;
    ``source``: where it was taken from (for messages)."""

    tensorflow: tuple[int, int] = NEWEST
    keras: int = 3
    source: str = "default"

    def at_least(self, version: tuple[int, int]) -> bool:
        return self.tensorflow >= version

    @property
    def injects_prefetch(self) -> bool:
        return self.at_least(INJECT_PREFETCH_SINCE)

    @property
    def parallelizes_maps(self) -> bool:
        return self.at_least(MAP_PARALLELIZATION_SINCE)

    def key(self) -> str:
        """A stable text for cache keys: ``tf2.21-keras3``."""
        return f"tf{self.tensorflow[0]}.{self.tensorflow[1]}-keras{self.keras}"

    def __str__(self) -> str:
        return f"{self.tensorflow[0]}.{self.tensorflow[1]}"


DEFAULT = TargetVersion()


def parse_version(text: object) -> tuple[int, int]:
    """``"2.16"`` / ``"tf2.16"`` / ``"2.16.1"`` → ``(2, 16)``; ``ValueError`` naming the accepted
    range otherwise."""
    if isinstance(text, str):
        m = _VERSION_RE.match(text)
        if m:
            v = (int(m.group(1)), int(m.group(2)))
            if OLDEST <= v <= NEWEST:
                return v
    raise ValueError(f"invalid TensorFlow version {text!r} (expected {ACCEPTED})")


def keras_for(tensorflow: tuple[int, int], tf_keras: bool = False, keras: int | None = None) -> int:
    if tf_keras:
        return 2
    if keras is not None:
        return keras
    return 3 if tensorflow >= KERAS3_SINCE else 2


def make_target(version: str, source: str = "configuration") -> TargetVersion:
    """The target for an explicit ``target-version`` (Keras from the TensorFlow version)."""
    tfv = parse_version(version)
    return TargetVersion(tfv, keras_for(tfv), source)


# -- dependency declarations ---------------------------------------------------------------

_REQ_RE = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*(.*)$")
_CLAUSE_RE = re.compile(r"^\s*(===|==|~=|>=|<=|!=|>|<)\s*([0-9][0-9A-Za-z.*+!-]*)\s*$")


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _release(text: str) -> tuple[int, ...] | None:
    parts = []
    for p in text.split("."):
        m = re.match(r"\d+", p)
        if not m:
            break
        parts.append(int(m.group()))
        if m.group() != p:
            break
    return tuple(parts) or None


def lower_bound(spec: str) -> tuple[int, int] | None:
    """The lowest (major, minor) a version specifier admits (``>=2.12,<2.16`` → (2, 12));
    ``None`` when it has no lower bound (``<2.16``, ``*``) or cannot be read."""
    low: tuple[int, ...] | None = None
    for clause in spec.split(","):
        clause = clause.strip()
        if not clause:
            continue
        m = _CLAUSE_RE.match(clause)
        if not m:
            return None
        op, ver = m.groups()
        if op in ("<", "<=", "!="):
            continue
        rel = _release(ver)
        if rel is None:
            return None
        if low is None or rel > low:
            low = rel
    if low is None:
        return None
    return (low[0], low[1] if len(low) > 1 else 0)


def _upper_major(spec: str) -> int | None:
    """For ``keras<3``: the major version below which the range ends (``3`` → Keras 2)."""
    for clause in spec.split(","):
        m = _CLAUSE_RE.match(clause.strip()) if clause.strip() else None
        if m and m.group(1) in ("<", "<="):
            rel = _release(m.group(2))
            if rel:
                return rel[0] - 1 if m.group(1) == "<" and rel[1:] in ((), (0,), (0, 0)) else rel[0]
    return None


@dataclass
class _Declared:
    tensorflow: tuple[int, int] | None = None
    tf_keras: bool = False
    keras: int | None = None


def _requirement(line: str, out: _Declared) -> None:
    line = line.split(";", 1)[0].strip()  # environment markers
    if not line or line.startswith(("-", "#")) or "://" in line or line.startswith((".", "/")):
        return
    m = _REQ_RE.match(line)
    if not m:
        return
    name, spec = _norm(m.group(1)), m.group(3).strip()
    if spec.startswith("(") and spec.endswith(")"):
        spec = spec[1:-1]
    if name in TF_PACKAGES:
        low = lower_bound(spec)
        if low is not None and (out.tensorflow is None or low < out.tensorflow):
            out.tensorflow = low
    elif name in _KERAS2_PACKAGES:
        out.tf_keras = True
    elif name == "keras":
        low = lower_bound(spec)
        if low is not None:
            out.keras = 3 if low[0] >= 3 else out.keras
            if low[0] < 3:
                up = _upper_major(spec)
                out.keras = 2 if up is not None and up < 3 else out.keras
        else:
            up = _upper_major(spec)
            if up is not None and up < 3:
                out.keras = 2


def _read_pyproject(path: str, out: _Declared) -> None:
    import tomllib

    try:
        with open(path, "rb") as fh:
            doc = tomllib.load(fh)
    except (OSError, ValueError, UnicodeDecodeError):
        return
    project = doc.get("project")
    if not isinstance(project, dict):
        return
    reqs: list = []
    deps = project.get("dependencies")
    if isinstance(deps, list):
        reqs.extend(deps)
    optional = project.get("optional-dependencies")
    if isinstance(optional, dict):
        for group in optional.values():
            if isinstance(group, list):
                reqs.extend(group)
    for r in reqs:
        if isinstance(r, str):
            _requirement(r, out)


def _read_requirements(path: str, out: _Declared) -> None:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                _requirement(re.split(r"\s#", line, maxsplit=1)[0], out)
    except OSError:
        return


def _declaration_files(directory: str) -> list[str]:
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return []
    out = [os.path.join(directory, n) for n in names if n == "pyproject.toml"]
    out += [
        os.path.join(directory, n)
        for n in names
        if n.startswith("requirements") and n.endswith((".txt", ".in"))
    ]
    return [p for p in out if os.path.isfile(p)]


_project_memo: dict[str, TargetVersion | None] = {}


def from_project(directory: str) -> TargetVersion | None:
    """The target the closest dependency declarations at or above ``directory`` state;
    ``None`` when the closest ones name neither TensorFlow nor Keras (or there are none).
    Each directory is listed once per run (memoised, parents included)."""
    d = os.path.abspath(directory)
    if d in _project_memo:
        return _project_memo[d]
    files = _declaration_files(d)
    if files:
        result = _from_declarations(files)
    else:
        parent = os.path.dirname(d)
        result = None if parent == d else from_project(parent)
    _project_memo[d] = result
    return result


from_project.cache_clear = _project_memo.clear  # type: ignore[attr-defined]


def _from_declarations(files: list[str]) -> TargetVersion | None:
    found = _Declared()
    for f in files:
        if f.endswith(".toml"):
            _read_pyproject(f, found)
        else:
            _read_requirements(f, found)
    if found.tensorflow is None and not found.tf_keras and found.keras is None:
        return None
    tfv = found.tensorflow
    if tfv is None:
        installed = from_installed()
        tfv = installed.tensorflow if installed else NEWEST
    tfv = min(max(tfv, OLDEST), NEWEST)
    keras = keras_for(tfv, found.tf_keras, found.keras)
    where = os.path.dirname(files[0])
    return TargetVersion(tfv, keras, f"declared in {where}")


_DIST_RE = re.compile(r"^([A-Za-z0-9_.]+)-(\d+)\.(\d+)[^-]*\.(?:dist-info|egg-info)$")


@lru_cache(maxsize=1)
def from_installed() -> TargetVersion | None:
    """The installed TensorFlow distribution's version, read from its metadata directory name
    (``tensorflow_cpu-2.21.0.dist-info``) on ``sys.path``: TensorFlow is never imported, and
    neither is ``importlib.metadata`` (tens of milliseconds of start-up)."""
    import sys

    found: dict[str, tuple[int, int]] = {}
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for name in names:
            if not name.startswith(("tensorflow", "tf_keras", "tf-keras")):
                continue
            m = _DIST_RE.match(name)
            if m:
                found.setdefault(_norm(m.group(1)), (int(m.group(2)), int(m.group(3))))
        if any(p in found for p in TF_PACKAGES):
            break
    tfv = next((found[p] for p in TF_PACKAGES if p in found), None)
    if tfv is None:
        return None
    tfv = min(max(tfv, OLDEST), NEWEST)
    # tf.keras is Keras 2 only when tf-keras is installed and asked for.
    tf_keras = "tf-keras" in found and os.environ.get("TF_USE_LEGACY_KERAS", "") in ("1", "true", "True")
    return TargetVersion(tfv, keras_for(tfv, tf_keras), "installed")


def resolve(explicit: str | None, project_dir: str) -> TargetVersion:
    """The target for code in ``project_dir`` (``explicit``: an already validated setting)."""
    if explicit:
        return make_target(explicit)
    return from_project(project_dir) or from_installed() or DEFAULT
