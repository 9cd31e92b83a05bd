"""tflint: a diagnostic linter and profiler for TensorFlow training code."""

__version__ = "0.1.0"
