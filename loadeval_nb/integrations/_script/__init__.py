"""Scripts, with no code change: ``python -m loadeval_nb run [options] SCRIPT [ARGS...]``.

Two folders, one per process: :mod:`.parent` — :mod:`.parent.options` (the command's
options, their checks and sentences, for both front ends: the command line and
``%loadeval_run``), :mod:`.parent.command` (the command line's front end),
:mod:`.parent.run` (the children it starts, what they reported, the result),
:mod:`.parent.launch` (the processes: the child or torch's launcher, time limits,
stopping a process tree); and :mod:`.child` — ``python -m ...child`` (its
``__main__``: the script run as ``python`` runs it), :mod:`.child.guard` (the child
ending itself when its parent is gone), :mod:`.child.pick` (which DataLoader is the
training loader, and measuring its pass), :mod:`.child.sides` and :mod:`.child.proof`
(the wrapper each child puts around it: a side, the pair, the straggler proof). What
they share lies beside them: :mod:`.spec` (the contract: what the parent tells a child,
the whole checked settings included, and what it reports back), :mod:`.words` (how a
side and a script are said), :mod:`.loaders` (the loaders the rule knows) and
:mod:`.procs` (stopping processes). The child imports nothing of the parent
(``tests/test_layering.py`` checks it); whether a pass interleaves is the child's to
find out (the core's plan) and the parent's to report.
"""
