"""The repository's benchmark programs (not part of the installed package).

``python benchmarks/kernels.py`` and ``python benchmarks/end_to_end.py`` run them; each
is a package here split by concern (settings, cases, measure, targets, report, main)
over the shared ``harness``. See benchmarks/README.md.
"""
