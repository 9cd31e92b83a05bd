"""The rule registry.

Every module in this package (other than ``base``) may define ``Rule`` subclasses with a
``code``; they are discovered here, sorted by code. Importing a rule module must stay cheap
(standard library only: ``tflint check`` runs on every commit).
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from functools import lru_cache

from tflint.rules.base import Rule

_CODE_RE = re.compile(r"^TFL\d{1,3}$")

# Codes of rules that were removed: reserved, never reused. Selecting one is a usage error
# that says why it went; ignoring one (or a `# noqa` naming it) is harmless.
RETIRED: dict[str, tuple[str, str]] = {
    "TFL501": (
        "soft-device-placement",
        "soft device placement is already on by default in TensorFlow 2 "
        "(`tf.config.get_soft_device_placement()` is True), so "
        "`set_soft_device_placement(True)` changes nothing",
    ),
}


def retired(selector: str) -> str | None:
    """A one-line explanation when ``selector`` names a removed rule exactly; else ``None``."""
    code = selector.strip().upper()
    if code in RETIRED:
        name, why = RETIRED[code]
        return f"rule {code} ({name}) was removed: {why}"
    return None


@lru_cache(maxsize=1)
def all_rules() -> tuple[type[Rule], ...]:
    found: dict[str, type[Rule]] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name == "base" or info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        for obj in vars(module).values():
            if (
                isinstance(obj, type)
                and issubclass(obj, Rule)
                and obj is not Rule
                and obj.__module__ == module.__name__
                and getattr(obj, "code", None)
            ):
                if obj.code in found and found[obj.code] is not obj:
                    raise RuntimeError(f"duplicate rule code {obj.code}")
                found[obj.code] = obj
    return tuple(found[c] for c in sorted(found))


def rule_codes() -> tuple[str, ...]:
    return tuple(r.code for r in all_rules())


def get_rule(code: str) -> type[Rule] | None:
    code = code.strip().upper()
    for r in all_rules():
        if r.code == code:
            return r
    return None


def is_valid_selector(selector: str) -> bool:
    """A selector is a full code or a prefix of at least one code (``TFL1``, ``TFL30``, ``ALL``)."""
    s = selector.strip().upper()
    if s == "ALL":
        return True
    return any(c.startswith(s) for c in rule_codes()) and s.startswith("TFL")


def resolve(
    select: list[str] | None = None,
    ignore: list[str] | None = None,
    extend_select: list[str] | None = None,
) -> frozenset[str]:
    """The set of enabled codes. Raise ``ValueError`` naming the first unknown selector."""
    codes = rule_codes()

    def expand(selectors: list[str], ignoring: bool = False) -> set[str]:
        out: set[str] = set()
        for sel in selectors:
            s = sel.strip().upper()
            if not s:
                continue
            if not is_valid_selector(s):
                why = retired(s)
                if why is not None:
                    if ignoring:
                        continue  # ignoring a removed rule: nothing to do
                    raise ValueError(why)
                raise ValueError(f"unknown rule code or prefix: {sel!r}")
            out.update(codes if s == "ALL" else (c for c in codes if c.startswith(s)))
        return out

    enabled = expand(select) if select else set(codes)
    enabled |= expand(extend_select or [])
    enabled -= expand(ignore or [], ignoring=True)
    return frozenset(enabled)
