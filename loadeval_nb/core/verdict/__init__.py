"""What two runs say: the verdict as a record with its facts and advice
(``diagnosis``), computing it from a real and an ideal run (``diagnose``), and the CI
comparison of two runs (``compare``)."""
