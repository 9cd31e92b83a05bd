"""The ``sarif`` format: a SARIF 2.1.0 log that GitHub code scanning accepts.

One run. ``tool.driver.rules`` lists every registered rule (so a rule's ``ruleIndex`` does not
depend on what a run happened to find), plus any code a finding carries that is not registered.
Each rule has its summary, description, help (text and markdown, from the rule's own docs),
``helpUri`` and default level. Results point at URIs relative to ``ctx.root`` under the
``%SRCROOT%`` base, with 1-based columns, and carry ``partialFingerprints`` that survive code
moving up or down: a hash of the rule, the path and the whitespace-normalized text of the
offending line, plus the index of that occurrence among identical ones in the file. Findings
with a fix carry it as SARIF ``fixes`` (exact replacements; applicability in properties).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

from tflint import __version__
from tflint.check.render import RenderContext, severity_str, sorted_findings

if TYPE_CHECKING:  # pragma: no cover
    from tflint.finding import Finding

SCHEMA_URI = "https://json.schemastore.org/sarif-2.1.0.json"
INFORMATION_URI = "https://github.com/tflint/tflint"
FINGERPRINT_KEY = "primaryLocationLineHash"


def _registered_rules() -> list[type]:
    try:
        from tflint.rules import all_rules

        return list(all_rules())
    except Exception:
        return []


def rule_descriptor(rule: type) -> dict:
    from tflint.check.render import ruledoc

    doc = ruledoc.rule_dict(rule)
    descriptor = {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": doc["summary"] or rule.code},
        "fullDescription": {"text": doc["what"] or doc["summary"] or rule.code},
        "help": {
            "text": ruledoc.help_text(rule),
            "markdown": ruledoc.help_markdown(rule),
        },
        "defaultConfiguration": {"level": doc["severity"]},
        "properties": {
            "tags": ["tensorflow", doc["category"]],
            "fixable": doc["fixable"],
        },
    }
    if doc["url"]:
        descriptor["helpUri"] = doc["url"]
    return descriptor


def _bare_descriptor(code: str, level: str) -> dict:
    return {
        "id": code,
        "shortDescription": {"text": code},
        "defaultConfiguration": {"level": level},
    }


def normalized_line(f: Finding, ctx: RenderContext) -> str:
    lines = ctx.lines_for(f)
    if not lines or not 1 <= f.line <= len(lines):
        return ""
    return " ".join(lines[f.line - 1].split())


def fingerprints(findings: Sequence[Finding], ctx: RenderContext) -> list[str]:
    """One fingerprint per finding (in the given order): ``HASH:OCCURRENCE``.

    The hash covers the rule, the display path, the notebook cell, and the offending line
    with whitespace collapsed; the occurrence counts earlier findings with the same hash, so
    identical lines in one file stay distinct while line numbers are left out.
    """
    seen: dict[str, int] = {}
    out = []
    for f in findings:
        key = "\x00".join(
            [
                f.code,
                ctx.display_path(f.path),
                str(f.cell or ""),
                normalized_line(f, ctx),
            ]
        )
        digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:32]
        n = seen.get(digest, 0) + 1
        seen[digest] = n
        out.append(f"{digest}:{n}")
    return out


def _region(f: Finding) -> dict:
    start_line = max(f.line, 1)
    end_line = max(f.end_line, start_line)
    start_col = max(f.col, 0) + 1
    end_col = max(f.end_col, 0) + 1
    if end_line == start_line and end_col <= start_col:
        end_col = start_col + 1
    return {
        "startLine": start_line,
        "startColumn": start_col,
        "endLine": end_line,
        "endColumn": end_col,
    }


def artifact_location(path: str, ctx: RenderContext) -> dict:
    """A URI relative to ``%SRCROOT%`` for paths under the root, else an absolute file URI."""
    shown = ctx.display_path(path)
    if path == "-":
        return {"uri": "stdin"}
    if Path(shown).is_absolute() or shown.startswith("../"):
        return {"uri": Path(ctx.abs_path(path)).as_uri()}
    return {"uri": quote(shown, safe="/", errors="surrogateescape"), "uriBaseId": "%SRCROOT%"}


def sarif_fix(f: Finding, artifact: dict) -> dict:
    """The finding's fix as a SARIF ``fix``: exact replacements (an insertion has an empty
    deleted region), with the applicability in its properties."""
    replacements = [
        {
            "deletedRegion": {
                "startLine": e.line,
                "startColumn": e.col + 1,
                "endLine": e.end_line,
                "endColumn": e.end_col + 1,
            },
            "insertedContent": {"text": e.content},
        }
        for e in f.fix.edits
    ]
    return {
        "description": {"text": f.fix.message or "Apply the fix"},
        "artifactChanges": [{"artifactLocation": dict(artifact), "replacements": replacements}],
        "properties": {"applicability": f.fix.applicability},
    }


def _root_uri(ctx: RenderContext) -> str:
    uri = Path(ctx.root).resolve().as_uri()
    return uri if uri.endswith("/") else uri + "/"


def sarif_log(findings: Sequence[Finding], ctx: RenderContext) -> dict:
    ordered = sorted_findings(findings)
    registered = _registered_rules()
    descriptors = [rule_descriptor(r) for r in registered]
    index = {d["id"]: i for i, d in enumerate(descriptors)}
    for f in ordered:
        if f.code not in index:
            index[f.code] = len(descriptors)
            descriptors.append(_bare_descriptor(f.code, severity_str(f)))

    results = []
    for f, fp in zip(ordered, fingerprints(ordered, ctx)):
        level = severity_str(f)
        if level not in ("error", "warning", "note"):
            level = "warning"
        message = f.message
        if f.cell is not None:
            message = f"cell {f.cell}, line {f.line}: {message}"
        # A notebook finding's line is within its cell: the file-level region is the
        # notebook's first line, and the cell position goes in the message and properties.
        region = _region(f) if f.cell is None else {"startLine": 1}
        physical = {
            "artifactLocation": artifact_location(f.path, ctx),
            "region": region,
        }
        result = {
            "ruleId": f.code,
            "ruleIndex": index[f.code],
            "level": level,
            "message": {"text": message},
            "locations": [{"physicalLocation": physical}],
            "partialFingerprints": {FINGERPRINT_KEY: fp},
        }
        if f.fix is not None and f.fix.edits and f.cell is None:
            result["fixes"] = [sarif_fix(f, physical["artifactLocation"])]
        if f.cell is not None:
            result["properties"] = {"cell": f.cell, "cellRegion": _region(f)}
        results.append(result)

    return {
        "$schema": SCHEMA_URI,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "tflint",
                        "version": __version__,
                        "semanticVersion": __version__,
                        "informationUri": INFORMATION_URI,
                        "rules": descriptors,
                    }
                },
                "originalUriBaseIds": {"%SRCROOT%": {"uri": _root_uri(ctx)}},
                "columnKind": "unicodeCodePoints",
                "results": results,
            }
        ],
    }


class SarifRenderer:
    def render(self, findings: Sequence[Finding], ctx: RenderContext) -> str:
        return json.dumps(sarif_log(findings, ctx), indent=2, ensure_ascii=False)
