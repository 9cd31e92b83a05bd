"""`tflint profile SCRIPT [--json PATH] [--logdir DIR] [--fail-on KINDS] [-- ARGS]`.

Runs a training script with TensorFlow instrumented and reports its silent failures. TensorFlow
and the runtime hooks are imported inside the command body only, so the rest of the CLI stays
light.
"""

from __future__ import annotations

import sys

import typer

_HELP = (
    "Run a training script with TensorFlow instrumented and explain its silent failures.\n\n"
    "Runs SCRIPT like `python SCRIPT ARGS` (arguments for the script go after `--`) and "
    "reports retraces, None gradients, soft-placement fallbacks, input stalls and memory "
    "growth at the end (on stderr), with a live status line while it runs on a terminal.\n\n"
    "Exit status: the script's own (0, its sys.exit code, 1 if it raised, 130 if interrupted); "
    "3 if the script exited 0 but a --fail-on signal fired; 2 if the script cannot be run."
)


def register(app: typer.Typer) -> None:
    @app.command("profile", help=_HELP, no_args_is_help=True)
    def profile(
        script: str = typer.Argument(..., help="The training script to run."),
        args: list[str] | None = typer.Argument(
            None, metavar="[-- ARGS]...", help="Arguments passed to the script (after --)."
        ),
        json_path: str | None = typer.Option(
            None, "--json", metavar="PATH",
            help="Also write the report as JSON (schema: docs/profile-json.md).",
        ),
        logdir: str | None = typer.Option(
            None, "--logdir", metavar="DIR",
            help="Write step time, input wait, retraces and memory as TensorBoard scalars "
            "under DIR/tflint.",
        ),
        fail_on: str | None = typer.Option(
            None, "--fail-on", metavar="KINDS",
            help="Comma-separated signal kinds (retrace, none-gradient, soft-placement, "
            "input-stall, memory-growth, or all) that make the exit status 3 when they fire.",
        ),
        live: bool | None = typer.Option(
            None, "--live/--no-live",
            help="Show the live status line (default: when stderr is a terminal).",
        ),
    ) -> None:
        from tflint.profiler import runner

        try:
            opts = runner.ProfileOptions(
                script=script,
                args=list(args or []),
                json_path=json_path,
                logdir=logdir,
                fail_on=runner.parse_fail_on(fail_on),
                live=live,
            )
            code = runner.run(opts)
        except runner.ProfileUsageError as exc:
            sys.stderr.write(f"tflint profile: error: {exc}\n")
            raise typer.Exit(runner.USAGE_EXIT_CODE) from None
        except KeyboardInterrupt:  # a second Ctrl-C while the report is being written
            sys.stderr.write("tflint profile: interrupted\n")
            raise typer.Exit(runner.INTERRUPT_EXIT_CODE) from None
        raise typer.Exit(code)
