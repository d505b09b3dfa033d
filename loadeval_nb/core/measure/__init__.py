"""Measuring one run: :class:`~.evaluator.LoaderEvaluator` and its two modes (``modes``,
given an ``EvaluatorConfig`` copied once; ``modes.LoaderStart`` starts the user's loader),
the interleaved pair (``interleave``: both sides in one pass, on the evaluator's base
``evaluator.Evaluator``; its plan and the one rule for whether a pass interleaves in
``blocks``), the per-step path (``timing`` and its C part ``_cstamp.c``), the replay
cache, host-to-device copy timing, per-batch timing inside the workers, the utilisation
sampler and its readers, the adaptive stop, and building a ``Run`` and its file from the
stamps (``build_run``)."""
