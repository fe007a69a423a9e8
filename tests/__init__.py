"""The test suite as a package, so top-level test modules (tests.test_noise) never clash with a
subfolder's module of the same basename (tests/serving/test_noise.py)."""
