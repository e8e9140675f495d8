"""marathon-tf benchmarks: ``python -m benchmarks [--quick] [--only NAME …]``.

Each benchmark returns rows (name, value, unit, note); the runner prints a table and writes
``benchmarks/results.md`` with the machine's description. Timings are medians of several runs;
comparisons are ratios measured within one run (the machines are shared and noisy).
"""
