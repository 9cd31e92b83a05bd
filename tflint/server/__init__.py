"""``tflint server``: a Language Server Protocol server over stdio (needs ``tflint[lsp]``).

It publishes ``tflint check``'s findings for open Python files and notebook documents, offers
fixes, ``# noqa`` and "fix all" code actions, and shows the rules' documentation on hover. It
reads source only: it never imports TensorFlow or runs the code it checks.
"""

from __future__ import annotations

SUMMARY = "Run the language server (LSP over stdio) for editors and notebooks."

_HELP = """usage: tflint server [--stdio]

Run tflint's language server, speaking LSP over stdin/stdout (--stdio is accepted and is the
default). Needs the `lsp` extra: pip install 'tflint[lsp]'."""


def main(argv: list[str]) -> int:
    """Run the server until the client exits it; return the exit status."""
    import sys

    for arg in argv:
        if arg in ("-h", "--help"):
            print(_HELP)
            return 0
        if arg != "--stdio":
            sys.stderr.write(f"error: tflint server: unknown argument {arg!r} (see `tflint server --help`)\n")
            return 2
    try:
        from tflint.server.lsp import build_server
    except ImportError as exc:
        sys.stderr.write(
            f"error: tflint server needs pygls and lsprotocol ({exc.name or exc}): pip install 'tflint[lsp]'\n"
        )
        return 2
    server = build_server()
    server.start_io()
    return 0
