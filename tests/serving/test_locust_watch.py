"""A served sweep point on Locust (master and 2 workers on loopback) stopped once it is stable."""

import importlib.util
import json

import pytest

from workbench.record import load_run

from served_helpers import payload_file, workbench
from tests.support.cli import load_url

if importlib.util.find_spec("locust") is None:
    pytest.skip("locust is not installed (pip install 'locust>=2.47,<3')", allow_module_level=True)


@pytest.mark.slow
def test_the_master_stops_its_workers_once_the_point_is_stable(served, tmp_path):
    server = served()
    payloads = payload_file(tmp_path / "payloads.txt", 20)
    sweep = ["--sweep", "rate=40", "--window-s", "0.5", "--max-windows", "10"]
    # three non-negative windows are always within 200 % of their mean: stable at the third
    sweep += ["--stability", "200", "--engine", "locust", "--workers", 2, "--json"]
    res = workbench(*load_url(server.url, payloads, tmp_path / "s", *sweep))
    assert res.returncode == 0, res.stderr
    (p,) = json.loads(res.stdout)["points"]
    assert (p["windows"], p["stable_after_windows"], p["stopped_by"], p["stable"]) == (
        3,
        3,
        "stable",
        True,
    )
    server.stop()
    client, seen = load_run(tmp_path / "s" / p["run"]), load_run(server.out)
    tag = client.meta.serving.request_id_prefix
    ids = seen.requests["request_id"].dropna()
    measured = ids[ids.str.startswith(f"{tag}-")]
    assert sorted(client.requests["request_id"]) == sorted(
        measured
    )  # each request sent is recorded, once
    # nothing due past the stop: the schedule's 5 s would be ~200 requests, the sends end within ~0.2 s of 1.5 s
    assert len(client.requests) < 100 and client.requests["start_ns"].max() < 2_000_000_000
