"""Test and research tooling kept out of the package: synthetic traces built in code
(:mod:`tests.support.synthetic`), seeded broken variants of traces (:mod:`tests.support.fuzz`)
and the judge of what the workbench made of each (:mod:`tests.support.fuzz_judge`).

Importable from the tests (pytest puts the repository root on ``sys.path``) and from the
benchmarks (they put the repository root on ``sys.path`` themselves).
"""
