"""What is built from many runs: sweeps over a grid of settings (sweep), downstream scores of a model against
random weights (score), medians and ranges over seeds (replicates), and the demo.
"""
