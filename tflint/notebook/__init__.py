"""tflint in IPython and Jupyter: ``%load_ext tflint`` (needs ``tflint[notebook]``).

See :mod:`tflint.notebook.extension`.
"""

from __future__ import annotations

from tflint.notebook.extension import load_ipython_extension, unload_ipython_extension

__all__ = ["load_ipython_extension", "unload_ipython_extension"]
