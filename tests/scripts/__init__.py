"""python -m loadeval_nb run: training scripts measured with no code change."""
