"""The stack sampler: stacks start at the stage function, and samples land in their request and stage."""

from __future__ import annotations

import time

import pytest

from workbench.errors import ConfigError
from workbench.sampling import StackSampler, assign
from workbench.timing import time_request


def test_a_sample_taken_inside_a_stage_starts_at_the_stage_function():
    sampler = StackSampler()

    def inner(x):
        sampler.sample()  # this thread, inside the stage: the stack is stage -> inner -> sample
        return x

    def decode(x):
        return inner(x)

    t = time_request(["parse", "decode"], [lambda x: x, decode], 1)
    assert len(sampler.samples_ns) == 1 and sampler.ticks == 1
    frames = sampler.stacks[sampler.sample_stacks[0]]
    assert [f[1] for f in frames] == ["decode", "inner", "sample"]
    assert frames[0][0].endswith("test_sampling.py")
    out = assign(sampler, [t], ["parse", "decode"])
    assert (out.request, out.stage, out.stack, out.unassigned) == ([0], ["decode"], [0], 0)


def test_outside_a_stage_nothing_is_recorded():
    sampler = StackSampler()
    sampler.sample()
    assert sampler.ticks == 1 and len(sampler.samples_ns) == 0


def test_the_thread_samples_a_running_stage_and_assign_finds_it():
    def spin(x):
        end = time.perf_counter_ns() + 40_000_000
        while time.perf_counter_ns() < end:
            pass
        return x

    with StackSampler(interval_s=0.002) as sampler:
        timings = [time_request(["wait", "spin"], [lambda x: x, spin], i) for i in range(2)]
    out = assign(sampler, timings, ["wait", "spin"])
    # a stage spinning in Python holds the GIL: the sampler gets it at the switch interval (5 ms) at best,
    # later on a busy machine, so 80 ms of spinning gives a few samples, not 40
    assert len(out.stage) >= 2 and set(out.stage) == {"spin"} and set(out.request) <= {0, 1}
    assert all(out.stacks[s][0][1] == "spin" for s in out.stack)


def test_assign_uses_the_stage_intervals_and_counts_samples_between_them():
    class T:
        def __init__(self, starts, ends):
            self.stage_start_ns, self.stage_end_ns = starts, ends

    sampler = StackSampler()
    sampler.samples_ns.extend([5, 10, 19, 20, 25, 40])
    sampler.sample_stacks.extend([0, 0, 1, 1, 1, 0])
    out = assign(sampler, [T([10, 20], [20, 30]), T([35], [45])], ["a", "b"])
    assert (out.request, out.stage, out.stack, out.unassigned) == (
        [0, 0, 0, 0, 1],
        ["a", "a", "b", "b", "a"],
        [0, 1, 1, 1, 0],
        1,
    )


def test_interval_must_be_positive():
    with pytest.raises(ConfigError, match="sample interval must be > 0"):
        StackSampler(interval_s=0)
