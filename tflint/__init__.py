"""tflint: a diagnostic linter and profiler for TensorFlow training code."""

__version__ = "0.1.0"


def load_ipython_extension(ipython):  # noqa: ANN001 - IPython's entry point: `%load_ext tflint`
    """Check every executed cell; add ``%%tflint_profile`` and ``%tflint_watch`` (IPython/Jupyter)."""
    from tflint.notebook.extension import load_ipython_extension as load

    load(ipython)


def unload_ipython_extension(ipython):  # noqa: ANN001
    from tflint.notebook.extension import unload_ipython_extension as unload

    unload(ipython)
