"""Configuration: ``[tool.tflint]`` in ``pyproject.toml``, or a ``tflint.toml`` (same keys at
the top level). The closest one above a checked file governs it (``tflint.toml`` wins over
``pyproject.toml`` in the same directory). Command-line options override the file:
``--select`` replaces ``select`` (and the file's ``ignore``/``extend-select``), ``--ignore`` and
``--extend-select`` add to the file's lists, ``--exclude`` replaces ``exclude``.

Keys::

    select = ["TFL1"]            # codes or prefixes; default: every rule
    ignore = ["TFL102"]
    extend-select = ["TFL3"]
    per-file-ignores = { "tests/**" = ["TFL101"], "__init__.py" = ["TFL2"] }
    exclude = ["generated/"]     # replaces the default excludes
    extend-exclude = ["legacy"]  # adds to them
    cache-dir = ".tflint_cache"
    target-version = "2.16"      # the TensorFlow version the code targets (see below)

``target-version`` (``--target-version``) accepts ``"2.16"``, ``"2.16.1"`` or ``"tf2.16"``,
from 2.0 to the newest supported version (:data:`tflint.analysis.version.NEWEST`). Unset, it
is read from the dependency declarations (``pyproject.toml``, ``requirements*.txt``) closest
above each checked file, else from the installed TensorFlow's metadata, else the
newest supported version (:mod:`tflint.analysis.version`).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from tflint.check.discover import DEFAULT_EXCLUDE, PathPatterns, glob_to_regex

CONFIG_NAMES = ("tflint.toml", "pyproject.toml")

_LIST_KEYS = ("select", "ignore", "extend-select", "exclude", "extend-exclude")
KNOWN_KEYS = (*_LIST_KEYS, "per-file-ignores", "cache-dir", "target-version")


class ConfigError(Exception):
    """A configuration problem, as one line naming the file and the key."""


@dataclass(frozen=True)
class Config:
    path: str | None  # the file it came from (None: defaults)
    root: str  # the directory patterns are relative to
    select: tuple[str, ...] | None = None
    ignore: tuple[str, ...] = ()
    extend_select: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    exclude: tuple[str, ...] | None = None
    extend_exclude: tuple[str, ...] = ()
    cache_dir: str | None = None
    target_version: str | None = None


@dataclass(frozen=True)
class Overrides:
    """What the command line says; ``None`` / empty means: as configured."""

    select: tuple[str, ...] | None = None
    ignore: tuple[str, ...] = ()
    extend_select: tuple[str, ...] = ()
    exclude: tuple[str, ...] | None = None
    extend_exclude: tuple[str, ...] = ()
    target_version: str | None = None


def _where(path: str, in_pyproject: bool) -> str:
    return f"{path}: [tool.tflint]" if in_pyproject else path


def _check_codes(where: str, key: str, codes: list[str], ignoring: bool = False) -> None:
    from tflint.rules import is_valid_selector, retired

    for c in codes:
        if not is_valid_selector(c):
            why = retired(c)
            if why is not None:
                if ignoring:
                    continue  # ignoring a removed rule is harmless
                raise ConfigError(f"{where}: key '{key}': {why}")
            raise ConfigError(
                f"{where}: key '{key}': unknown rule code or prefix {c!r} "
                "(expected codes like 'TFL101' or prefixes like 'TFL1'; see `tflint rules`)"
            )


def _str_list(where: str, key: str, value: object) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(
            f"{where}: key '{key}' must be a list of strings, got {type(value).__name__}: {value!r}"
        )
    return tuple(value)


def parse_table(table: dict, path: str, in_pyproject: bool) -> Config:
    """Validate a ``[tool.tflint]`` table (or a ``tflint.toml`` document)."""
    where = _where(path, in_pyproject)
    root = os.path.dirname(os.path.abspath(path))
    unknown = [k for k in table if k not in KNOWN_KEYS]
    if unknown:
        raise ConfigError(
            f"{where}: unknown key '{unknown[0]}' (expected one of: {', '.join(KNOWN_KEYS)})"
        )
    values: dict[str, object] = {}
    for key in _LIST_KEYS:
        if key in table:
            values[key] = _str_list(where, key, table[key])
    for key in ("select", "ignore", "extend-select"):
        if key in values:
            _check_codes(where, key, list(values[key]), ignoring=key == "ignore")  # type: ignore[arg-type]
    pfi: list[tuple[str, tuple[str, ...]]] = []
    if "per-file-ignores" in table:
        raw = table["per-file-ignores"]
        if not isinstance(raw, dict):
            raise ConfigError(
                f"{where}: key 'per-file-ignores' must be a table of glob = [codes], "
                f"got {type(raw).__name__}"
            )
        for pattern, codes in raw.items():
            key = f"per-file-ignores.{pattern!r}"
            codes_t = _str_list(where, key, codes)
            _check_codes(where, key, list(codes_t), ignoring=True)
            pfi.append((pattern, codes_t))
    cache_dir = None
    if "cache-dir" in table:
        cd = table["cache-dir"]
        if not isinstance(cd, str) or not cd:
            raise ConfigError(
                f"{where}: key 'cache-dir' must be a non-empty string, got {type(cd).__name__}: {cd!r}"
            )
        cache_dir = os.path.normpath(os.path.join(root, os.path.expanduser(cd)))
    target_version = None
    if "target-version" in table:
        from tflint.analysis.version import parse_version

        tv = table["target-version"]
        try:
            parse_version(tv)
        except ValueError as exc:
            raise ConfigError(f"{where}: key 'target-version': {exc}") from None
        target_version = tv
    return Config(
        path=path,
        root=root,
        select=values.get("select"),  # type: ignore[arg-type]
        ignore=values.get("ignore", ()),  # type: ignore[arg-type]
        extend_select=values.get("extend-select", ()),  # type: ignore[arg-type]
        per_file_ignores=tuple(pfi),
        exclude=values.get("exclude"),  # type: ignore[arg-type]
        extend_exclude=values.get("extend-exclude", ()),  # type: ignore[arg-type]
        cache_dir=cache_dir,
        target_version=target_version,
    )


def load_file(path: str) -> Config | None:
    """The configuration in ``path``; ``None`` for a ``pyproject.toml`` without ``[tool.tflint]``."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    in_pyproject = os.path.basename(path) == "pyproject.toml"
    if in_pyproject and b"tflint" not in data:
        return None  # cheap: no need to parse TOML
    import tomllib

    try:
        doc = tomllib.loads(data.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    if in_pyproject:
        tool = doc.get("tool")
        if not isinstance(tool, dict) or "tflint" not in tool:
            return None
        table = tool["tflint"]
        if not isinstance(table, dict):
            raise ConfigError(f"{path}: [tool.tflint] must be a table")
        return parse_table(table, path, True)
    return parse_table(doc, path, False)


class ConfigFinder:
    """The configuration governing each directory (closest file above it), memoised."""

    def __init__(self, default_root: str | None = None) -> None:
        self.default = Config(path=None, root=os.path.abspath(default_root or os.getcwd()))
        self._by_dir: dict[str, Config] = {}

    def for_dir(self, directory: str) -> Config:
        directory = os.path.abspath(directory)
        seen: list[str] = []
        d = directory
        found: Config | None = None
        while True:
            if d in self._by_dir:
                found = self._by_dir[d]
                break
            seen.append(d)
            for name in CONFIG_NAMES:
                candidate = os.path.join(d, name)
                if os.path.isfile(candidate):
                    found = load_file(candidate)
                    if found is not None:
                        break
            if found is not None:
                break
            parent = os.path.dirname(d)
            if parent == d:
                found = self.default
                break
            d = parent
        for s in seen:
            self._by_dir[s] = found
        return found

    def for_file(self, path: str) -> Config:
        return self.for_dir(os.path.dirname(os.path.abspath(path)))


def _split_codes(values: tuple[str, ...] | list[str]) -> list[str]:
    out: list[str] = []
    for v in values:
        out.extend(s.strip() for s in v.split(",") if s.strip())
    return out


def _expand(codes: list[str]) -> frozenset[str]:
    from tflint.rules import resolve, retired

    codes = [c for c in codes if retired(c) is None]  # removed rules select nothing
    return resolve(select=codes) if codes else frozenset()


@dataclass
class Settings:
    """The effective settings for the files one configuration governs."""

    config: Config
    enabled: frozenset[str]
    per_file_ignores: list[tuple[re.Pattern, bool, frozenset[str]]] = field(default_factory=list)
    exclude: PathPatterns | None = None
    cli_exclude: PathPatterns | None = None
    target: object = None  # TargetVersion (tflint.analysis.version) when set explicitly
    explicit_target: bool = False

    def target_for(self, abspath: str):
        """The TensorFlow version ``abspath`` targets: the configured/command-line one, else
        what the dependency declarations closest to the file say (see ``analysis.version``)."""
        if self.explicit_target:
            return self.target
        from tflint.analysis import version

        return version.resolve(None, os.path.dirname(abspath))

    def enabled_for(self, abspath: str) -> frozenset[str]:
        if not self.per_file_ignores:
            return self.enabled
        enabled = self.enabled
        rel = os.path.relpath(abspath, self.config.root).replace(os.sep, "/")
        name = os.path.basename(abspath)
        for rx, by_name, codes in self.per_file_ignores:
            if rx.match(name if by_name else rel):
                enabled = enabled - codes
        return enabled

    def is_excluded(self, abspath: str) -> bool:
        if self.exclude is not None and self.exclude.matches(abspath):
            return True
        return self.cli_exclude is not None and self.cli_exclude.matches(abspath)


def make_settings(config: Config, overrides: Overrides, cwd: str | None = None) -> Settings:
    """Combine a configuration with the command line. Raise ``ValueError`` / ``ConfigError``."""
    from tflint.rules import resolve

    where = _where(config.path, os.path.basename(config.path) == "pyproject.toml") if config.path else ""
    if overrides.select is not None:
        enabled = resolve(
            select=_split_codes(overrides.select),
            ignore=_split_codes(overrides.ignore),
            extend_select=_split_codes(overrides.extend_select),
        )
    else:
        try:
            enabled = resolve(
                select=list(config.select) if config.select is not None else None,
                ignore=list(config.ignore),
                extend_select=list(config.extend_select),
            )
            if config.select is not None and not config.select:  # `select = []`: nothing
                enabled = _expand(list(config.extend_select)) - _expand(list(config.ignore))
        except ValueError as exc:  # pragma: no cover - validated when loaded
            raise ConfigError(f"{where}: {exc}") from None
        enabled = (enabled | _expand(_split_codes(overrides.extend_select))) - _expand(
            _split_codes(overrides.ignore)
        )
    pfi = []
    for pattern, codes in config.per_file_ignores:
        p = pattern.replace(os.sep, "/")
        by_name = "/" not in p
        p = p[2:] if p.startswith("./") else p.lstrip("/") if not os.path.isabs(p) else p
        if os.path.isabs(p):
            p = os.path.relpath(p, config.root).replace(os.sep, "/")
        pfi.append((re.compile(glob_to_regex(p) + r"\Z"), by_name, _expand(list(codes))))
    excl = config.exclude if config.exclude is not None else DEFAULT_EXCLUDE
    exclude = PathPatterns(config.root, tuple(excl) + tuple(config.extend_exclude))
    cli_exclude = None
    if overrides.exclude is not None or overrides.extend_exclude:
        cwd = os.path.abspath(cwd or os.getcwd())
        if overrides.exclude is not None:
            # --exclude replaces the configured and default excludes.
            exclude = PathPatterns(config.root, tuple(config.extend_exclude))
            cli_exclude = PathPatterns(
                cwd, tuple(_split_codes(overrides.exclude)) + tuple(_split_codes(overrides.extend_exclude))
            )
        else:
            cli_exclude = PathPatterns(cwd, tuple(_split_codes(overrides.extend_exclude)))
    from tflint.analysis import version

    explicit = overrides.target_version or config.target_version
    target = version.make_target(explicit) if explicit else None
    return Settings(
        config=config,
        enabled=frozenset(enabled),
        target=target,
        explicit_target=bool(explicit),
        per_file_ignores=pfi,
        exclude=exclude or None,
        cli_exclude=cli_exclude or None,
    )
