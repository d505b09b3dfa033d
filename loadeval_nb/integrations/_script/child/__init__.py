"""The child: the script run as ``python`` runs it (``python -m
loadeval_nb.integrations._script.child``, :mod:`.__main__`), ending itself when its
parent is gone (:mod:`.guard`), finding the training loader and measuring its pass
(:mod:`.pick`), the wrapper around it (:mod:`.sides`, :mod:`.proof`). It imports nothing
of the parent: what the two share is :mod:`..spec` (the contract), :mod:`..words`,
:mod:`..loaders` and :mod:`..procs`."""
