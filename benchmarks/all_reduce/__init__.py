"""The all-reduce benchmark: settings, the rank program, measuring (launching the ranks), report."""
