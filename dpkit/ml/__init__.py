"""Machine-learning helpers: training curves, early stopping and the convergence rule, metrics."""
