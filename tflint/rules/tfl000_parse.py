"""TFL000: a file tflint cannot read or parse (reported by the engine itself)."""

from __future__ import annotations

from typing import ClassVar

from tflint.finding import Severity
from tflint.rules.base import Rule, RuleContext


class UnparsableFile(Rule):
    code = "TFL000"
    name = "unparsable-file"
    severity = Severity.ERROR
    summary = "File cannot be read, decoded or parsed as Python"
    what = (
        "Reports a file that tflint cannot check: a syntax error, bytes that are not valid in "
        "the file's encoding (UTF-8, or the one its PEP 263 coding cookie names), a binary "
        "file, or a notebook whose JSON is broken. In a notebook, a code cell that does not "
        "parse once IPython's syntax (magics, `!` shell lines, `?` help) is read as Jupyter "
        "reads it is reported on its own, and the other cells are still checked. The message "
        "gives the reason and the finding's position points at the problem. The other files "
        "are still checked."
    )
    why = (
        "No rule can look inside a file that does not parse, so every other diagnostic for it "
        "is silently missing. Python itself will refuse to import the file, too."
    )
    example = (
        """
        def train(:
            pass
        """
    )
    use_instead = (
        """
        def train():
            pass
        """
    )
    fix_safety = "This rule has no automatic fix."
    fixable = False
    VALID: ClassVar[list[str]] = []
    INVALID: ClassVar[list[str]] = []

    def check(self, ctx: RuleContext) -> None:
        # The engine reports TFL000 before any rule runs; there is nothing to check here.
        return None
