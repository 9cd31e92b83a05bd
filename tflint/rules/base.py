"""The rule contract.

One rule per class. A rule declares its code, name, severity and documentation, carries
``VALID`` and ``INVALID`` code examples (run by the test suite, so a rule cannot silently stop
firing), and implements ``check(ctx)``, yielding findings through ``ctx.report``. Rules never
re-derive shared facts (import aliases, traced functions, tape blocks, dataset chains, training
loops): they ask ``ctx.analysis``.

In ``INVALID`` examples every line that must produce a finding of the rule ends with
``# expect: CODE``; no other line may produce one.  ``VALID`` examples produce none. Examples are
written as indented triple-quoted blocks; the class dedents them (and drops the newline after
the opening quotes) when it is defined.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import TYPE_CHECKING, ClassVar

from tflint.finding import Edit, Finding, Fix, Severity

if TYPE_CHECKING:  # pragma: no cover
    from tflint.analysis import Analysis

DOCS_URL = "https://github.com/tflint/tflint/blob/main/docs/rules.md#{anchor}"


class RuleContext:
    """What a rule sees of one module: its path, text, tree and the shared analysis."""

    def __init__(self, path: str, source: str, tree: ast.Module, analysis: "Analysis") -> None:
        # ``analysis.target`` is the TargetVersion (tflint.analysis.version) the code targets.
        self.path = path
        self.source = source
        self.tree = tree
        self.analysis = analysis
        self.findings: list[Finding] = []
        self._rule: Rule | None = None

    def report(
        self,
        node: ast.AST,
        message: str,
        *,
        fix: Fix | None = None,
        end_node: ast.AST | None = None,
    ) -> None:
        """Report the current rule at ``node`` (through ``end_node`` when given).

        Rules speak ``ast`` positions, for the finding and its fix's edits alike (columns are
        UTF-8 byte offsets); the engine converts them to character offsets once, afterwards.
        """
        rule = self._rule
        assert rule is not None, "report() called outside a rule's check()"
        end = end_node or node
        if rule.traced_context and self.analysis.project:
            message = self._with_entry(node, message)
        line = getattr(node, "lineno", 1)
        col = getattr(node, "col_offset", 0)
        end_line = getattr(end, "end_lineno", None) or line
        end_col = getattr(end, "end_col_offset", None)
        if end_col is None:
            end_col = col
        self.findings.append(
            Finding(
                code=rule.code,
                message=message,
                path=self.path,
                line=line,
                col=col,
                end_line=end_line,
                end_col=end_col,
                severity=rule.severity,
                fix=fix,
                url=rule.url(),
            )
        )

    def _with_entry(self, node: ast.AST, message: str) -> str:
        """``message`` naming the entry point of another module whose trace reaches ``node``."""
        traced = self.analysis.traced
        note = traced.entry_note(traced.traced_function_of(node))
        return f"{message} ({note})" if note else message

    # Helpers for building fixes from exact ast positions.
    @staticmethod
    def replace(node: ast.AST, content: str) -> Edit:
        return Edit(node.lineno, node.col_offset, node.end_lineno, node.end_col_offset, content)

    @staticmethod
    def insert_at(line: int, col: int, content: str) -> Edit:
        return Edit(line, col, line, col, content)

    def segment(self, node: ast.AST) -> str:
        return self.analysis.segment(node)


class Rule:
    code: ClassVar[str]
    name: ClassVar[str]  # kebab-case, e.g. "print-in-traced-code"
    severity: ClassVar[Severity] = Severity.ERROR
    summary: ClassVar[str]  # one line, shown by `tflint rules`
    what: ClassVar[str]
    why: ClassVar[str]
    example: ClassVar[str]
    use_instead: ClassVar[str]
    fix_safety: ClassVar[str] = "This rule has no automatic fix."
    fixable: ClassVar[bool] = False
    # The TensorFlow versions the rule's claim holds for: (first, last) as (major, minor),
    # ``None`` for no upper bound. Outside that range the rule does not run.
    tensorflow_versions: ClassVar[tuple[tuple[int, int], tuple[int, int] | None]] = ((2, 0), None)

    # Findings in traced code: name the entry point when another module's trace reaches it.
    traced_context: ClassVar[bool] = False
    VALID: ClassVar[list[str]] = []
    INVALID: ClassVar[list[str]] = []

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        # Dedented on first use: `tflint check` reads none of them, and its start-up matters.
        for kind in ("VALID", "INVALID", "example", "use_instead"):
            raw = cls.__dict__.get(kind)
            if isinstance(raw, (str, list)):
                setattr(cls, kind, _Dedented(raw))

    def check(self, ctx: RuleContext) -> Iterator[None] | None:  # pragma: no cover - abstract
        raise NotImplementedError

    @classmethod
    def applies_to(cls, tensorflow: tuple[int, int]) -> bool:
        first, last = cls.tensorflow_versions
        return tensorflow >= first and (last is None or tensorflow <= last)

    @classmethod
    def versions_text(cls) -> str:
        """``"TensorFlow 2.0 and later"`` / ``"TensorFlow 2.0 to 2.8"``."""
        first, last = cls.tensorflow_versions
        if last is None:
            return f"TensorFlow {first[0]}.{first[1]} and later"
        return f"TensorFlow {first[0]}.{first[1]} to {last[0]}.{last[1]}"

    @classmethod
    def url(cls) -> str:
        return DOCS_URL.format(anchor=f"{cls.code.lower()}-{cls.name}")

    def run(self, ctx: RuleContext) -> None:
        ctx._rule = self
        try:
            result = self.check(ctx)
            if result is not None:
                for _ in result:
                    pass
        finally:
            ctx._rule = None


def _example(src: str) -> str:
    """An example as the file it stands for: dedented, without the newline after the quotes."""
    import textwrap

    return textwrap.dedent(src.removeprefix("\n"))


class _Dedented:
    """A class attribute holding an example (or a list of them) as written in the rule's
    source; reading it gives the dedented text, computed once."""

    def __init__(self, raw: str | list[str]) -> None:
        self.raw = raw
        self.value: str | list[str] | None = None

    def __get__(self, instance: object, owner: type | None = None) -> str | list[str]:
        if self.value is None:
            raw = self.raw
            self.value = _example(raw) if isinstance(raw, str) else [_example(src) for src in raw]
        return self.value
