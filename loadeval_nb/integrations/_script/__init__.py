"""Scripts, with no code change: ``python -m loadeval_nb run [options] SCRIPT [ARGS...]``.

By job: :mod:`.run` (the parent: both sides, what the children reported, the result),
:mod:`.launch` (the processes: the child or torch's launcher, time limits, stopping a
process tree), :mod:`.spec` (what the parent tells a child and what it reports back),
:mod:`.child` (the child: the script run as ``python`` runs it), :mod:`.pick` (which
DataLoader is the training loader, and measuring its pass), :mod:`.sides` (the wrapper
each side puts around it).
"""
