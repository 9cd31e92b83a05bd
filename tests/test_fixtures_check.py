"""`tflint check` over every bundled fixture: each `# expect: CODE` line fires, nothing else does."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.rule_harness import expected

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"


def _expected_findings() -> set[tuple[str, int, str]]:
    want = set()
    for path in sorted(FIXTURES.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        rel = path.relative_to(ROOT).as_posix()
        want.update((rel, line, code) for line, code in expected(text))
    return want


def _actual_findings() -> set[tuple[str, int, str]]:
    proc = subprocess.run(
        [sys.executable, "-m", "tflint", "check", "--no-cache", "--output-format", "json", "fixtures"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode in (0, 1), proc.stderr
    got = set()
    for f in json.loads(proc.stdout):
        rel = Path(f["filename"]).resolve().relative_to(ROOT).as_posix()
        got.add((rel, f["location"]["row"], f["code"]))
    return got


def test_every_expected_finding_and_nothing_else():
    want = _expected_findings()
    got = {g for g in _actual_findings() if g[0].endswith(".py")}
    missing = sorted(want - got)
    unexpected = sorted(got - want)
    assert not missing and not unexpected, (
        "missing:\n" + "\n".join(map(str, missing)) + "\nunexpected:\n" + "\n".join(map(str, unexpected))
    )


def test_every_rule_is_covered_twice_by_fixtures():
    from tflint.rules import all_rules

    want = _expected_findings()
    per_code: dict[str, set[str]] = {}
    for path, _line, code in want:
        per_code.setdefault(code, set()).add(path)
    thin = {
        r.code: len(per_code.get(r.code, ()))
        for r in all_rules()
        if r.code != "TFL000" and sum(1 for w in want if w[2] == r.code) < 2
    }
    assert not thin, f"rules with fewer than two fixture findings: {thin}"


def test_clean_fixtures_exist_and_are_clean():
    clean = [p for p in FIXTURES.rglob("*clean*.py")]
    assert clean, "no clean fixtures"
    for p in clean:
        assert not expected(p.read_text(encoding="utf-8")), f"{p} is named clean but expects findings"
