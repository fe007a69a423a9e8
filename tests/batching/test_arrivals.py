import numpy as np
import pytest

from workbench.batching.arrivals import Arrivals, read_arrivals_csv
from workbench.errors import ConfigError

NS = 1_000_000_000


def test_poisson_rate_and_exponential_gaps():
    t = Arrivals("poisson", rate_rps=1000.0, count=200_000, seed=3).times_ns()
    assert len(t) == 200_000 and t.dtype == np.int64 and (np.diff(t) >= 0).all()
    gaps = np.diff(t) / NS
    assert gaps.mean() == pytest.approx(1e-3, rel=0.01)
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, abs=0.01)  # exponential: CV 1
    counts = np.bincount((t // (NS // 100)).astype(int))[:-1]  # arrivals per 10 ms window
    assert counts.var() / counts.mean() == pytest.approx(1.0, abs=0.05)  # Poisson: dispersion 1


def test_duration_bound_and_seed_repeatable():
    a = Arrivals("poisson", rate_rps=500.0, duration_s=2.0, seed=1)
    t = a.times_ns()
    assert t[-1] < 2 * NS and abs(len(t) - 1000) < 4 * np.sqrt(1000)
    assert np.array_equal(t, a.times_ns())
    assert not np.array_equal(
        t[:100], Arrivals("poisson", rate_rps=500.0, duration_s=2.0, seed=2).times_ns()[:100]
    )
    both = Arrivals("poisson", rate_rps=500.0, duration_s=2.0, count=10).times_ns()
    assert len(both) == 10


def test_bursty_on_off_windows_and_mean_rate():
    a = Arrivals("bursty", rate_rps=400.0, duration_s=50.0, on_ms=50.0, off_ms=150.0, seed=0)
    t = a.times_ns()
    assert len(t) / 50.0 == pytest.approx(400.0, rel=0.03)
    phase = t % (200 * 1_000_000)
    assert (phase < 50 * 1_000_000).all()  # nothing in an off window
    gaps = np.diff(t)
    assert (gaps.std() / gaps.mean()) ** 2 > 2  # burstier than Poisson (squared CV 1)
    assert a.params()["peak_rate_rps"] == 1600.0


def test_replay_csv_units_and_header(tmp_path):
    f = tmp_path / "a.csv"
    f.write_text("arrival_ms\n10\n10.5\n12\n")
    assert read_arrivals_csv(f).tolist() == [0, 500_000, 2_000_000]
    g = tmp_path / "b.csv"
    g.write_text("1.0\n1.25\n")
    assert Arrivals("replay", path=str(g)).times_ns().tolist() == [0, 250_000_000]
    assert Arrivals("replay", path=str(f), count=2).times_ns().tolist() == [0, 500_000]


@pytest.mark.parametrize(
    "text, match",
    [
        ("", "no arrival timestamps"),
        ("arrival_s\n", "no arrival timestamps"),
        ("arrival_s\n1\n3\n2\n", "sorted; row 4"),
        ("arrival_s\n1\nabc\n", "row 3"),
    ],
)
def test_replay_bad_files(tmp_path, text, match):
    f = tmp_path / "bad.csv"
    f.write_text(text)
    with pytest.raises(ConfigError, match=match):
        read_arrivals_csv(f)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(rate_rps=0.0, count=5), "rate"),
        (dict(rate_rps=-1.0, count=5), "rate"),
        (dict(rate_rps=10.0), "bound"),
        (dict(rate_rps=10.0, count=0), "requests"),
        (dict(rate_rps=10.0, duration_s=0.0), "duration"),
        (dict(process="nope", rate_rps=1.0, count=1), "arrivals"),
        (dict(process="replay"), "CSV"),
        (dict(process="bursty", rate_rps=10.0, count=5, on_ms=5e-324), "at least 1 ns"),
        (dict(process="bursty", rate_rps=10.0, count=5, off_ms=float("inf")), "finite off_ms"),
        (dict(process="bursty", rate_rps=10.0, count=5, off_ms=-0.5), "off_ms >= 0"),
    ],
)
def test_bad_arrival_parameters(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        Arrivals(**kwargs)


def test_missing_replay_file(tmp_path):
    with pytest.raises(ConfigError, match="no such file"):
        Arrivals("replay", path=str(tmp_path / "none.csv")).times_ns()


@pytest.mark.parametrize(
    "raw, message",
    [
        (
            b"arrival_s\n0\n1e300\n",
            "row 3 (1e+300) is more than 604_800 s (7 days) after the first timestamp (0.0)",
        ),
        (b"arrival_ms\n0\n1\n604800001\n", "row 4 (604800001.0) is more than 604_800 s"),
        (b"arrival_s\n0\n\xf0\x28\x8c\n", "not a text file (byte 12 is not UTF-8)"),
        (b"arrival_s\n0\n1\x00\n", "not a text file (byte 13 is NUL)"),
    ],
)
def test_replay_files_out_of_range_or_binary_are_refused(tmp_path, raw, message):
    f = tmp_path / "bad.csv"
    f.write_bytes(raw)
    with pytest.raises(ConfigError) as found:
        read_arrivals_csv(f)
    assert str(found.value).startswith(f"--arrivals {f}: ") and message in str(found.value)


def test_a_replay_of_exactly_seven_days_is_kept(tmp_path):
    f = tmp_path / "week.csv"
    f.write_text("arrival_s\n0\n604800\n")
    assert read_arrivals_csv(f).tolist() == [0, 604_800_000_000_000]
