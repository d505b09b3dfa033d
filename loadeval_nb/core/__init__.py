"""loadeval_nb.core: measurement without Jupyter.

Imports nothing from IPython, ipywidgets or Bokeh, so it works in plain scripts,
under torchrun and in tests. Its sub-packages, one job each, from the floor up:

* ``record/``: a measured run as a record (:class:`Run`), its JSON file, the journal
  written while it runs, the rerun panel's history file;
* ``measure/``: measuring one run: :class:`LoaderEvaluator`, its two modes, the per-step
  path (and its C part), the replay cache, copy and worker timing, the utilisation
  sampler, the adaptive stop;
* ``whatif/``: what other loader settings would buy (the worker/queue simulator);
* ``verdict/``: what two runs say (:func:`diagnose`, :func:`compare_runs`);
* ``explore/``: running the user's loop to find what to change: settings, the one
  runner, the pair, the caching ladder, the sweep, the per-transform split;
* ``ranks/``: many processes under torchrun (the wait-skew test, gathering the ranks'
  pairs over the group or from their logs, the straggler proof and running it).

Beside them, the floor every sub-package stands on: ``_errors`` (exceptions, argument
checks), ``_format`` (numbers in words), ``_stats``, ``_files`` (atomic writes),
``_facts`` (a result's facts and their rendering), ``_env`` (probes and guards).

Each sub-package's ``__init__`` is its public face, the one home of its names
(``from loadeval_nb.core.measure import LoaderEvaluator``); ``ranks`` and ``errors`` are
faces as modules. ``loadeval_nb.measure`` (and ``.record``, ``.verdict``, ``.whatif``,
``.explore``, ``.ranks``, ``.errors``) is the same module under a shorter name, not a copy.
This package names nothing itself: "core" is a layer. The upper layers (viz, widgets,
magic, integrations) import those faces, and what they share with core but users should
not see through one private door, :mod:`loadeval_nb.core._shared`.
"""
