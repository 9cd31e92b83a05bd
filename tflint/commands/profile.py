"""`tflint profile SCRIPT [--json PATH] [--logdir DIR] [--signals KINDS] [--fail-on KINDS] [-- ARGS]`.

Runs a training script with TensorFlow instrumented and reports its silent failures. TensorFlow
and the runtime hooks are imported inside the command body only, so the rest of the CLI stays
light.
"""

from __future__ import annotations

import sys

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    import typer

_HELP = (
    "Run a training script with TensorFlow instrumented and explain its silent failures.\n\n"
    "Runs SCRIPT like `python SCRIPT ARGS` (arguments for the script go after `--`) and "
    "reports retraces, None gradients, soft-placement fallbacks, input stalls, memory growth "
    "and training health (NaN/Inf, dead parameters, exploding or vanishing gradients, a stalled "
    "loss, a broadcasting loss) at the end (on stderr), with a live status line while it runs on "
    "a terminal.\n\n"
    "Exit status: the script's own (0, its sys.exit code, 1 if it raised, 130 if interrupted); "
    "3 if the script exited 0 but a --fail-on signal fired; 2 if the script cannot be run."
)


def build_parser():
    import argparse

    class Parser(argparse.ArgumentParser):
        def error(self, message: str):  # one line, exit 2
            raise _UsageError(message)

    p = Parser(prog="tflint profile", description=_HELP, allow_abbrev=False,
               usage="tflint profile SCRIPT [--json PATH] [--logdir DIR] [--signals KINDS] [--fail-on KINDS] [-- ARGS...]")
    p.add_argument("script", metavar="SCRIPT", help="The training script to run.")
    p.add_argument("args", nargs="*", metavar="ARGS", help="Arguments passed to the script (after --).")
    p.add_argument("--json", dest="json_path", metavar="PATH",
                   help="Also write the report as JSON (schema: docs/profile-json.md).")
    p.add_argument("--logdir", metavar="DIR",
                   help="Write step time, input wait, retraces, memory, loss and gradient norms as TensorBoard "
                   "scalars under DIR/tflint.")
    p.add_argument("--signals", metavar="KINDS",
                   help="Comma-separated signal kinds to collect (default: all): retrace, none-gradient, "
                   "soft-placement, input-stall, memory-growth, and training-health (or its kinds: nan-inf, "
                   "dead-parameter, exploding-gradient, vanishing-gradient, loss-stall, loss-broadcast). "
                   "Signals left out are not collected and the report marks them 'off'; leaving out "
                   "training-health also leaves its per-step ops out of your graphs.")
    p.add_argument("--fail-on", metavar="KINDS",
                   help="Comma-separated signal kinds (as for --signals, or all) that make the exit status 3 "
                   "when they fire.")
    live = p.add_mutually_exclusive_group()
    live.add_argument("--live", dest="live", action="store_true", default=None,
                      help="Show the live status line (default: when stderr is a terminal).")
    live.add_argument("--no-live", dest="live", action="store_false")
    return p


class _UsageError(Exception):
    pass


def main(argv: list[str]) -> int:
    """Run ``tflint profile`` with ``argv`` (the arguments after ``profile``); return the status.

    Everything after the first ``--`` belongs to the script, untouched.
    """
    if "--" in argv:
        cut = argv.index("--")
        own, script_args = argv[:cut], argv[cut + 1:]
    else:
        own, script_args = argv, []
    try:
        ns = build_parser().parse_args(own)
    except _UsageError as exc:
        sys.stderr.write(f"tflint profile: error: {exc}\n")
        return 2
    from tflint.profiler import runner

    try:
        signals = None if ns.signals is None else runner.parse_kinds(ns.signals, "--signals")
        opts = runner.ProfileOptions(
            script=ns.script,
            args=[*ns.args, *script_args],
            json_path=ns.json_path,
            logdir=ns.logdir,
            signals=signals,
            fail_on=runner.parse_fail_on(ns.fail_on, signals),
            live=ns.live,
        )
        return runner.run(opts)
    except runner.ProfileUsageError as exc:
        sys.stderr.write(f"tflint profile: error: {exc}\n")
        return runner.USAGE_EXIT_CODE
    except KeyboardInterrupt:  # a second Ctrl-C while the report is being written
        sys.stderr.write("tflint profile: interrupted\n")
        return runner.INTERRUPT_EXIT_CODE


def register(app: "typer.Typer") -> None:
    from tflint.commands import register_forwarding

    register_forwarding(app, "profile", _HELP, main)

