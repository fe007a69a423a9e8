"""The noise rule, with injected readings (exact numbers)."""

from workbench.noise import NOT_MEASURED, NoiseProbe, Readings, assess, noise_line


class FakeReadings(Readings):
    """Two sets of readings: before (index 0) and after (index 1) the run."""

    def __init__(
        self, cpu, own, wall, load=(0.2, 0.3), cores=2, governor="performance", available=True
    ):
        self._cpu, self._own, self._wall, self._load = list(cpu), list(own), list(wall), list(load)
        self._cores, self._governor, self._available = cores, governor, available

    def available(self):
        return self._available

    def loadavg_1m(self):
        return self._load.pop(0)

    def cpu_ticks(self):
        return self._cpu.pop(0)

    def own_ticks(self):
        return self._own.pop(0)

    def wall_s(self):
        return self._wall.pop(0)

    def ticks_per_s(self):
        return 100

    def cores(self):
        return self._cores

    def governor(self):
        return self._governor


def ticks(busy_user, idle=0, steal=0):
    return {
        "user": busy_user,
        "nice": 0,
        "system": 0,
        "idle": idle,
        "iowait": 0,
        "irq": 0,
        "softirq": 0,
        "steal": steal,
    }


def test_busy_machine_is_noisy_with_reasons_and_fix():
    # 10 s of wall time on 2 cores: all CPUs busy 1,900 ticks, this process 500 -> others 1,400 ticks = 1.4 cores
    readings = FakeReadings(cpu=[ticks(0), ticks(1_900, idle=100)], own=[0, 500], wall=[0.0, 10.0])
    noise = NoiseProbe(readings).start().finish(torch_threads=2, e2e_ns=[100, 100, 200, 400])
    assert noise["other_cores"] == 1.4 and noise["steal_pct"] == 0.0 and noise["cores"] == 2
    assert noise["noisy"] is True
    assert noise["reasons"] == [
        "other processes used 1.4 of 2 cores during the run",
        "torch used 2 threads with 1 of 2 cores free",
    ]
    assert (
        noise["fix"]
        == "--threads 1 (PipelineConfig(threads=1)) or a quieter machine (stop other jobs, then measure again)"
    )
    assert (
        noise["load_before_1m"] == 0.2
        and noise["load_after_1m"] == 0.3
        and noise["governor"] == "performance"
    )
    assert (
        noise["iqr_over_median"] == 1.0 and noise["p99_over_p50"] == 2.6267
    )  # p99 394 over median 150


def test_quiet_machine_is_not_noisy():
    readings = FakeReadings(
        cpu=[ticks(0), ticks(1_010, idle=990)], own=[0, 1_000], wall=[0.0, 10.0]
    )
    noise = NoiseProbe(readings).start().finish(torch_threads=2)
    assert (
        noise["other_cores"] == 0.01
        and noise["noisy"] is False
        and noise["reasons"] == []
        and noise["fix"] is None
    )
    assert noise_line(noise) == "noise: quiet (other processes 0.01 cores, steal 0.0 %)"


def test_steal_and_load_average_are_reasons():
    readings = FakeReadings(
        cpu=[ticks(0), ticks(900, idle=1_000, steal=100)],
        own=[0, 900],
        wall=[0.0, 10.0],
        load=(3.5, 3.0),
    )
    noise = NoiseProbe(readings).start().finish(torch_threads=1)
    assert noise["steal_pct"] == 5.0  # at the threshold: not above it
    assert noise["reasons"] == ["load average was 3.50 on 2 cores before the run"]
    assert assess(noise | {"steal_pct": 7.5})["reasons"][0].startswith("steal time was 7.5 %")
    assert assess(noise | {"steal_pct": 7.5})["fix"].endswith("or a dedicated host")


def test_without_proc_noise_is_not_measured():
    noise = NoiseProbe(FakeReadings([], [], [], available=False)).start().finish(torch_threads=1)
    assert noise == {"noisy": None, "reasons": [NOT_MEASURED], "fix": None}
    assert noise_line(noise) == "noise: unknown (not measured on this OS)"


def test_noise_line_is_the_one_text_of_the_verdict_for_dicts_sections_and_nothing():
    class Section:  # the run record's Noise section: plain data behind to_dict()
        def to_dict(self):
            return {"noisy": True, "reasons": ["steal time was 7.5 %"], "fix": "a dedicated host"}

    assert noise_line(Section()) == "noise: NOISY: steal time was 7.5 %; fix: a dedicated host"
    assert noise_line(None) == noise_line({}) == "noise: not measured"
    assert noise_line({"noisy": None, "reasons": []}) == f"noise: unknown ({NOT_MEASURED})"


def test_real_readings_on_linux_are_plausible():
    import os

    if not os.path.exists("/proc/stat"):
        return
    noise = NoiseProbe().start().finish(torch_threads=1, e2e_ns=[1, 2, 3])
    assert noise["noisy"] in (True, False) and noise["other_cores"] >= 0 and noise["cores"] >= 1


def test_a_quiet_verdict_with_null_readings_is_a_line_not_a_crash():
    """run.json version 3 writes null for a reading it did not take: `show` was exit 3 on it."""
    noise = {"noisy": False, "other_cores": None, "steal_pct": None, "reasons": []}
    assert noise_line(noise) == "noise: quiet (other processes ? cores, steal ? %)"
