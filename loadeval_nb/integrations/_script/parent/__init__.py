"""The parent: the command's options and front end (:mod:`.options`, :mod:`.command`),
the children it starts and what they reported (:mod:`.run`), the processes
(:mod:`.launch`)."""
