"""Where a sample's time goes: finding a dataset's transform pipeline (``pipeline``),
timing its steps inside the workers (``timed_data``) and the split (``split``)."""
