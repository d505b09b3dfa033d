"""Measuring one run: :class:`~.evaluator.LoaderEvaluator` and its two modes (``modes``,
given an ``EvaluatorConfig`` copied once), the per-step path (``timing`` and its C part
``_cstamp.c``), the replay cache, host-to-device copy timing, per-batch timing inside
the workers, the utilisation sampler and its readers, the adaptive stop,
and building a ``Run`` from the stamps."""
