"""Running the user's loop to find what to change: the settings and hooks, plans checked
once (``plan``), the one runner (``runner``) under the pair, the caching ladder (with its
sample rung) and the settings sweep, their results (``result``, ``sweep_result``) and
the per-transform split (``transforms/``)."""
