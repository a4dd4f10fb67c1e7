"""``rlm eval``: batch evaluation of the runtime against baselines.

Modules, one job each: ``tasks`` (the JSONL task format), ``scorers``, ``suites`` (built-in
task generators and their registry), ``methods`` (rlm, rlm-nosub, rlm-words, direct, rag), ``windows``
(a model's context window), ``results`` (the results file and configuration hashes),
``runner`` (concurrency, resume, the batch budget, interruption), ``progress``, ``report``
(report.md / report.html, compare) and ``plots`` (matplotlib, imported only there).
"""
