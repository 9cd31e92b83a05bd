"""Rule documentation: ``tflint rule CODE``, ``tflint rules`` and the generated reference.

Everything here is derived from the attributes each ``Rule`` class carries (``code``, ``name``,
``severity``, ``summary``, ``what``, ``why``, ``example``, ``use_instead``, ``fix_safety``,
``fixable``), so the docs cannot drift from the rules. Output is deterministic: rules are
ordered by code and nothing depends on the environment, so the checked-in ``docs/rules.md``
can be compared with a fresh rendering.
"""

from __future__ import annotations

import inspect
import json
import textwrap
from collections.abc import Iterable, Sequence

REGENERATE_COMMAND = "tflint rules --output-format markdown > docs/rules.md"

SECTIONS: tuple[tuple[str, str, bool], ...] = (
    # (title, attribute, is code)
    ("What it does", "what", False),
    ("Why is this bad?", "why", False),
    ("Example", "example", True),
    ("Use instead", "use_instead", True),
    ("Fix safety", "fix_safety", False),
)

# Titles of the rule families, by the code's first digit.
CATEGORIES: dict[str, str] = {
    "0": "Files tflint could not analyze",
    "1": "Trace-time side effects",
    "2": "Retracing",
    "3": "Gradients",
    "4": "Input pipeline (tf.data)",
    "5": "Devices and memory",
    "6": "Train/serve mode and losses",
}


def clean(text: object) -> str:
    """A prose attribute without its docstring-style indentation and outer blank lines."""
    if not text:
        return ""
    return inspect.cleandoc(str(text)).strip("\n")


def clean_code(text: object) -> str:
    """A code attribute without its common indentation and outer blank lines.

    Unlike prose, the first line's indentation counts: ``"def f():\n    pass"`` keeps its body
    indented.
    """
    if not text:
        return ""
    lines = [ln.rstrip() for ln in str(text).expandtabs(4).splitlines()]
    while lines and not lines[0]:
        lines.pop(0)
    while lines and not lines[-1]:
        lines.pop()
    return textwrap.dedent("\n".join(lines))


def severity_of(rule: type) -> str:
    sev = getattr(rule, "severity", "error")
    return str(getattr(sev, "value", sev))


def category_of(code: str) -> tuple[str, str]:
    """``("TFL1xx", "Trace-time side effects")`` for ``TFL101``."""
    digits = code[3:] if code.upper().startswith("TFL") else code
    if len(digits) == 3 and digits.isdigit():
        key = digits[0]
        return f"TFL{key}xx", CATEGORIES.get(key, f"TFL{key}xx rules")
    return code, "Other rules"


def fenced(text: str, lang: str = "python") -> str:
    """``text`` as a fenced code block (left alone when it already is one)."""
    body = clean_code(text)
    if body.lstrip().startswith("```"):
        return body
    fence = "```"
    while fence in body:
        fence += "`"
    return f"{fence}{lang}\n{body}\n{fence}"


def _url(rule: type) -> str | None:
    try:
        return rule.url()
    except Exception:
        return None


def fix_line(rule: type) -> str:
    return (
        "Fix is available (`tflint check --fix`)."
        if getattr(rule, "fixable", False)
        else ("No automatic fix.")
    )


def _section_body(rule: type, attr: str, is_code: bool) -> str:
    value = getattr(rule, attr, "")
    if not (clean_code(value) if is_code else clean(value)):
        return "(not documented)" if not is_code else ""
    return fenced(value) if is_code else clean(value)


def rule_body(rule: type, heading: str = "##") -> str:
    """The sections What it does ... Fix safety, each under a ``heading`` title."""
    parts = []
    for title, attr, is_code in SECTIONS:
        body = _section_body(rule, attr, is_code)
        if not body:
            continue
        parts.append(f"{heading} {title}\n\n{body}")
    return "\n\n".join(parts)


def versions_line(rule: type) -> str:
    """``"Applies to TensorFlow 2.0 and later."``: the versions the rule runs for."""
    text = rule.versions_text() if hasattr(rule, "versions_text") else "TensorFlow 2.0 and later"
    return f"Applies to {text} (`--target-version`)."


def rule_text(rule: type) -> str:
    """What ``tflint rule CODE`` prints (markdown-ish plain text)."""
    title = f"{rule.code} {rule.name} ({severity_of(rule)})"
    head = [title, "", clean(getattr(rule, "summary", "")), "", fix_line(rule), versions_line(rule)]
    url = _url(rule)
    if url:
        head.append(f"Documentation: {url}")
    return "\n".join(head) + "\n\n" + rule_body(rule, "##")


def rule_dict(rule: type) -> dict:
    """A rule's metadata and documentation, for the JSON outputs."""
    return {
        "code": rule.code,
        "name": rule.name,
        "severity": severity_of(rule),
        "fixable": bool(getattr(rule, "fixable", False)),
        "summary": clean(getattr(rule, "summary", "")),
        "what": clean(getattr(rule, "what", "")),
        "why": clean(getattr(rule, "why", "")),
        "example": clean_code(getattr(rule, "example", "")),
        "use_instead": clean_code(getattr(rule, "use_instead", "")),
        "fix_safety": clean(getattr(rule, "fix_safety", "")),
        "url": _url(rule),
        "category": category_of(rule.code)[1],
        "tensorflow_versions": _versions_dict(rule),
    }


def _versions_dict(rule: type) -> dict:
    first, last = getattr(rule, "tensorflow_versions", ((2, 0), None))
    return {"from": f"{first[0]}.{first[1]}", "to": f"{last[0]}.{last[1]}" if last else None}


def retired_text(code: str) -> str | None:
    """What ``tflint rule CODE`` prints for a removed rule; ``None`` if ``code`` is not one."""
    from tflint.rules import RETIRED

    got = RETIRED.get(code.strip().upper())
    if got is None:
        return None
    name, why = got
    return (
        f"{code.strip().upper()} {name} (removed)\n\nThis rule was removed: {why}. "
        "Its code is reserved and will not be reused; selecting it is an error."
    )


def retired_markdown() -> list[str]:
    from tflint.rules import RETIRED

    if not RETIRED:
        return []
    out = [
        "## Removed rules",
        "",
        "Codes of rules that were removed. They are reserved and never reused; `--select` with",
        "one is a usage error that says why, ignoring one is harmless.",
        "",
        "| Code | Name | Why it was removed |",
        "| --- | --- | --- |",
    ]
    for code in sorted(RETIRED):
        name, why = RETIRED[code]
        out.append(f"| {code} | {name} | {_md_cell(why)} |")
    out.append("")
    return out


def rule_json(rule: type) -> str:
    return json.dumps(rule_dict(rule), indent=2, ensure_ascii=False)


def rules_json(rules: Iterable[type]) -> str:
    return json.dumps([rule_dict(r) for r in rules], indent=2, ensure_ascii=False)


def rules_table(rules: Sequence[type]) -> str:
    """The ``tflint rules`` listing: code, name, severity, fixable, summary."""
    header = ("CODE", "NAME", "SEVERITY", "FIX", "SUMMARY")
    rows = [
        (
            r.code,
            r.name,
            severity_of(r),
            "yes" if getattr(r, "fixable", False) else "no",
            " ".join(clean(getattr(r, "summary", "")).split()),
        )
        for r in rules
    ]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(4)]
    lines = []
    for row in [header, *rows]:
        cells = [row[i].ljust(widths[i]) for i in range(4)] + [row[4]]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def anchor(rule: type) -> str:
    """The heading anchor of a rule in the reference; ``Rule.url()`` points at it."""
    return f"{rule.code.lower()}-{rule.name}"


def _md_cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def rule_markdown(rule: type) -> str:
    """One rule's section of the reference."""
    lines = [
        f'<a id="{anchor(rule)}"></a>',
        "",
        f"### {rule.code} {rule.name}",
        "",
        f"**{_md_cell(clean(getattr(rule, 'summary', '')))}**",
        "",
        f"Severity: `{severity_of(rule)}`. {fix_line(rule)} {versions_line(rule)}",
        "",
        rule_body(rule, "####"),
    ]
    return "\n".join(lines)


def help_markdown(rule: type) -> str:
    """Markdown help for SARIF: the summary and the documented sections."""
    return f"{clean(getattr(rule, 'summary', ''))}\n\n{rule_body(rule, '##')}"


def help_text(rule: type) -> str:
    return help_markdown(rule)


def markdown_reference(rules: Sequence[type]) -> str:
    """The full rule reference (``docs/rules.md``), ending with one newline."""
    rules = sorted(rules, key=lambda r: r.code)
    out = [
        "# tflint rule reference",
        "",
        f"<!-- Generated by `{REGENERATE_COMMAND}`. Do not edit by hand. -->",
        "",
        "Every rule `tflint check` runs, with what it detects, why it matters at run time, an",
        "example and its correction. `tflint rule CODE` prints the same text in a terminal.",
        "Severity `error`: the program computes something other than what it says;",
        "`warning`: it computes the right thing slowly or with too much memory.",
        "Rules with `yes` under Fix can be fixed with `tflint check --fix`.",
        "",
    ]
    if not rules:
        out.append("No rules are registered.")
        return "\n".join(out) + "\n"
    groups: dict[str, list[type]] = {}
    for r in rules:
        groups.setdefault(category_of(r.code)[0], []).append(r)

    out += ["## Contents", ""]
    out += [
        "| Code | Name | Severity | Fix | Summary |",
        "| --- | --- | --- | :-: | --- |",
    ]
    for r in rules:
        fix = "yes" if getattr(r, "fixable", False) else ""
        out.append(
            f"| [{r.code}](#{anchor(r)}) | {r.name} | {severity_of(r)} | {fix} "
            f"| {_md_cell(clean(getattr(r, 'summary', '')))} |"
        )
    out.append("")
    for key, members in groups.items():
        out += [f"## {key}: {category_of(members[0].code)[1]}", ""]
        for r in members:
            out += [rule_markdown(r), ""]
    out += retired_markdown()
    return "\n".join(out).rstrip("\n") + "\n"
