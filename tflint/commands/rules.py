"""`tflint rule CODE` and `tflint rules`: the rules' documentation.

``tflint rule CODE`` prints one rule (What it does / Why is this bad? / Example / Use instead /
Fix safety); ``tflint rules`` lists them all. Both take ``--output-format text|json``;
``tflint rules --output-format markdown`` writes the rule reference (``docs/rules.md``).
Nothing heavy is imported until a command runs.
"""

from __future__ import annotations

import typer

RULE_FORMATS = ("text", "json")
RULES_FORMATS = ("text", "json", "markdown")


def _fail(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(2)


def _check_format(value: str, allowed: tuple[str, ...]) -> str:
    fmt = (value or "").strip().lower()
    if fmt not in allowed:
        raise _fail(f"unknown output format {value!r} (expected one of: {', '.join(allowed)})")
    return fmt


def _load_rules() -> tuple:
    try:
        from tflint.rules import all_rules

        return tuple(all_rules())
    except Exception as exc:  # a broken rule module must not end in a traceback
        raise _fail(f"cannot load the rule registry: {type(exc).__name__}: {exc}") from None


def _emit(text: str) -> None:
    typer.echo(text if text.endswith("\n") else text + "\n", nl=False)


def register(app: typer.Typer) -> None:
    @app.command("rule")
    def rule_command(
        code: str = typer.Argument(None, metavar="CODE", help="A rule code, e.g. TFL101."),
        all_: bool = typer.Option(False, "--all", help="Print the documentation of every rule."),
        output_format: str = typer.Option(
            "text", "--output-format", help="text or json.", metavar="FORMAT"
        ),
    ) -> None:
        """Print a rule's documentation: what it detects, why, an example and the fix."""
        from tflint.check.render import ruledoc

        fmt = _check_format(output_format, RULE_FORMATS)
        rules = _load_rules()
        if all_:
            if code:
                raise _fail("give either a rule CODE or --all, not both")
            if fmt == "json":
                _emit(ruledoc.rules_json(rules))
            else:
                _emit("\n\n".join(ruledoc.rule_text(r) for r in rules))
            return
        if not code:
            raise _fail("missing rule CODE (e.g. `tflint rule TFL101`; `tflint rules` lists them)")
        wanted = code.strip().upper()
        rule = next((r for r in rules if r.code == wanted), None)
        if rule is None and ruledoc.retired_text(wanted) is not None:
            _emit(ruledoc.retired_text(wanted))  # a removed rule: say why
            return
        if rule is None:
            raise _fail(f"unknown rule code {code!r} (run `tflint rules` to list them)")
        _emit(ruledoc.rule_json(rule) if fmt == "json" else ruledoc.rule_text(rule))

    @app.command("rules")
    def rules_command(
        output_format: str = typer.Option(
            "text", "--output-format", help="text, json or markdown.", metavar="FORMAT"
        ),
    ) -> None:
        """List every rule: code, name, severity, whether it can be fixed, summary."""
        from tflint.check.render import ruledoc

        fmt = _check_format(output_format, RULES_FORMATS)
        rules = _load_rules()
        if fmt == "json":
            _emit(ruledoc.rules_json(rules))
        elif fmt == "markdown":
            _emit(ruledoc.markdown_reference(rules))
        else:
            _emit(ruledoc.rules_table(rules) if rules else "No rules are registered.")
