"""Scripts, with no code change: ``python -m loadeval_nb run [options] SCRIPT [ARGS...]``.

By job: :mod:`.options` (the command's options, their checks and sentences, for both
front ends: the command line and ``%loadeval_run``), :mod:`.command` (the command line's
front end), :mod:`.run` (the parent: the children it starts, what they reported, the
result), :mod:`.launch` (the processes: the child or torch's launcher, time limits,
stopping a process tree), :mod:`.spec` (the contract: what the parent tells a child, the
whole checked settings included, and what it reports back), :mod:`.child` (the child:
the script run as ``python`` runs it), :mod:`.guard` (the child ending itself when its
parent is gone), :mod:`.pick` (which DataLoader is the training loader, and measuring
its pass), :mod:`.sides` (the wrapper each child puts around it: a side, or the pair).
The parent and the child meet only in :mod:`.spec`; whether a pass interleaves is the
child's to find out (the core's plan) and the parent's to report.
"""
