"""The static half of tflint: ``tflint check`` as a pipeline.

discover (:mod:`.discover`) → read and decode (:mod:`.source`) → parse (:mod:`.parse`) →
shared facts (:mod:`tflint.analysis`) → rules (:mod:`tflint.rules`) → suppress
(:mod:`.suppress`) → render (:mod:`.render`) → exit status. :mod:`.engine` runs one file
through it, :mod:`.cache` keeps results by content, :mod:`.fix` applies fixes and
:mod:`.config` reads ``[tool.tflint]``. The command-line face is :mod:`tflint.commands.check`.
"""
