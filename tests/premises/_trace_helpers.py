"""Run a small program under real TensorFlow and lint the same text.

A premise test writes the program to a real file and imports it (AutoGraph reads a
function's source, so code exec'd from a string would not be converted the way user code
is), calls what it defines, and checks that `tflint check` flags exactly the lines marked
``# expect: CODE`` in the bad version and nothing in the version that follows the rule's
"Use instead".
"""

from __future__ import annotations

import importlib.util
import itertools
import sys
import textwrap
from pathlib import Path
from types import ModuleType

from tests.rule_harness import expected

_names = itertools.count()


def load(tmp_path: Path, source: str) -> ModuleType:
    """Import ``source`` as a module from a file under ``tmp_path``."""
    name = f"tflint_premise_{next(_names)}"
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def lint(source: str, code: str) -> list[tuple[int, str]]:
    """(line, code) of the findings of rule ``code`` on ``source``, through the engine."""
    from tflint.check.engine import lint_text

    result = lint_text("premise.py", textwrap.dedent(source), frozenset({code}))
    assert not result.errors, result.errors
    return sorted((f.line, f.code) for f in result.findings if f.code == code)


def assert_flags(bad: str, good: str, code: str) -> None:
    """``code`` fires on exactly the ``# expect:`` lines of ``bad`` and nowhere in ``good``."""
    want = expected(textwrap.dedent(bad), code)
    assert want, "the bad program marks no line"
    assert lint(bad, code) == want
    assert lint(good, code) == []
