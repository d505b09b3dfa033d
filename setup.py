"""The optional C extension of the per-step path (see loadeval_nb/core/measure/_cstamp.c).

Everything else is in pyproject.toml. ``optional=True``: where it cannot be compiled
(no compiler, not Linux), the package installs without it and times steps with the
pure-Python iterators of loadeval_nb/core/measure/timing.py.

Wheels (docs/install.md): the Linux wheels carry the extension (cibuildwheel, configured
in pyproject.toml); ``LOADEVAL_NB_PURE=1`` builds the one pure wheel
(``py3-none-any``) that every other platform installs.
"""

import os
import sys

from setuptools import Extension, setup

ext = []
if sys.platform.startswith("linux") and os.environ.get("LOADEVAL_NB_PURE") != "1":
    ext.append(
        Extension(
            "loadeval_nb.core.measure._cstamp",
            ["loadeval_nb/core/measure/_cstamp.c"],
            optional=True,
            extra_compile_args=["-O2"],
        )
    )
setup(ext_modules=ext)
