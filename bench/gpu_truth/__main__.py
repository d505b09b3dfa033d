"""``python -m bench.gpu_truth``: see the package's docstring."""

from __future__ import annotations

import sys

from .nocuda import NO_CUDA_LINE, nothing_to_measure

# Without CUDA the command says so in one line and exits 0, before loadeval_nb is imported:
# that line must come out alone, whatever the package prints or warns on import.
if nothing_to_measure(sys.argv[1:]):
    print(NO_CUDA_LINE)
    sys.exit(0)

from .run import main  # noqa: E402

sys.exit(main())
