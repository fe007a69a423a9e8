"""Stand-ins for load and served runs: the fits read a run's ``requests`` table and nothing else."""

from types import SimpleNamespace

import pandas as pd


def run_of_requests(requests: pd.DataFrame) -> SimpleNamespace:
    return SimpleNamespace(requests=requests)


def runs_of(*tables: pd.DataFrame) -> list[SimpleNamespace]:
    return [run_of_requests(t) for t in tables]
