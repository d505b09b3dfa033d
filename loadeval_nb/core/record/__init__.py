"""A measured run as a record: :class:`~.run.Run` (raw per-step arrays, their statistics
and its own JSON codec), ``load_run`` with the journal of epochs appended while a run
went on (``runlog``, ``journal``), and the rerun panel's history file (``history``).
Imports nothing above core's floor."""
