"""Nothing measured is misattributed: a lazy stage output and an option nobody reads are refused before a
run is kept (issue 26, part 4)."""

import itertools

import pytest
from tests.conftest import FakeClock

from workbench import Pipeline, PipelineConfig, profile
from workbench.cli import main
from workbench.errors import ConfigError, PipelineError
from workbench.interleave import compare
from workbench.pipeline import (
    ReadOptions,
    build_pipeline,
    first_request_checked,
    lazy_output,
    unread_options,
)
from workbench.timing import stage_timer


def lazy_factory(lazy):
    def build(config):
        pipe = Pipeline("lazy", items=lambda: itertools.count())
        pipe.add("tokenize", lambda batch: lazy(batch))
        pipe.add("forward", lambda tokens: [t * 2 for t in tokens])
        return pipe

    return build


@pytest.mark.parametrize(
    "lazy, what",
    [
        (lambda b: (x + 1 for x in b), "a generator"),
        (lambda b: map(str, b), "an iterator (map)"),
        (lambda b: iter(list(b)), "an iterator (list_iterator)"),
    ],
)
def test_a_stage_returning_a_generator_or_iterator_is_refused_naming_the_stage(lazy, what):
    message = f"stage 'tokenize' returned {what}: its work would run, and be timed, in the stage that consumes it"
    with pytest.raises(PipelineError, match=message.replace("(", r"\(").replace(")", r"\)")):
        profile(
            lazy_factory(lazy), PipelineConfig(), requests=5, warmup=1, traced=0, clock=FakeClock()
        )
    with pytest.raises(PipelineError, match="stage 'tokenize' returned"):
        compare(
            lazy_factory(lazy),
            [{}, {}],
            requests=10,
            warmup=0,
            noise_probe=False,
            clock=FakeClock(),
        )


def test_lists_tuples_arrays_and_dicts_are_not_lazy():
    import numpy as np

    assert [
        lazy_output(v) for v in ([1], (1,), np.arange(3), {"a": 1}, "text", None, range(3))
    ] == [None] * 7


def test_the_cli_names_the_lazy_stage_in_one_line(tmp_path, capsys):
    f = tmp_path / "lazy_pipe.py"
    f.write_text(
        "import itertools\nfrom workbench import Pipeline\n"
        "def build(config):\n"
        "    p = Pipeline('lazy', items=lambda: itertools.count())\n"
        "    p.add('tokenize', lambda b: (x for x in b))\n"
        "    p.add('forward', list)\n"
        "    return p\n"
    )
    assert (
        main(
            [
                "profile",
                "--closed-loop",
                "--pipeline",
                f"{f}:build",
                "--requests",
                "5",
                "--traced",
                "0",
                "--out",
                str(tmp_path / "run"),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(
        "workbench profile: error: stage 'tokenize' returned a generator"
    )
    assert not (tmp_path / "run").exists()


def reading_factory(config):
    pipe = Pipeline("reads", items=lambda: itertools.count())
    hidden = config.options.get("hidden", 64)
    pipe.add(
        "forward", lambda b: [x * hidden * config.options.get("slow", 1.0) for x in b]
    )  # read at run time
    return pipe


def test_an_option_nobody_reads_is_named_with_a_suggestion():
    with pytest.raises(ConfigError) as exc:
        profile(
            reading_factory,
            PipelineConfig(options={"hidden": 8, "slowdwn": 0.3}),
            requests=3,
            warmup=1,
            traced=0,
            clock=FakeClock(),
        )
    assert str(exc.value) == (
        "pipeline 'reads': option 'slowdwn' (did you mean 'slow'?) is never read by its "
        "factory or stages; it reads: hidden, slow"
    )


def test_options_read_when_a_stage_runs_count_and_to_dict_is_not_a_read():
    run = profile(
        reading_factory,
        PipelineConfig(options={"hidden": 8, "slow": 2.0}),
        requests=3,
        warmup=0,
        traced=0,
        clock=FakeClock(),
    )
    assert run.requests["ok"].all()
    pipe = build_pipeline(reading_factory, PipelineConfig(options={"hidden": 8, "slow": 2.0}))
    pipe.config.to_dict()  # the workbench's own reads (fingerprints, records) do not count
    assert unread_options(pipe) == ["slow"]  # read only when forward runs


def test_read_options_counts_every_kind_of_read_only_while_watching():
    o = ReadOptions({"a": 1, "b": 2, "c": 3})
    _ = o["a"], o.get("a")
    assert o.read == set()
    with o.watching():
        _ = o["a"], "b" in o, o.get("zzz")
    assert o.read == {"a", "b", "zzz"}
    with o.watching():
        dict(o)  # copying every option reads every option
    assert o.read >= {"a", "b", "c"}
    assert type(__import__("copy").deepcopy(o)) is dict


def test_the_first_request_checks_the_options_only_when_asked():
    """``first_request_checked(..., options=False)`` (load's executors) leaves the options alone: the
    flag was shadowed by a local and the check ran anyway (an unread option refused in every executor)."""
    pipe = build_pipeline(reading_factory, PipelineConfig(options={"hidden": 8, "typo": 1}))
    timer = stage_timer(pipe, FakeClock())
    first_request_checked(timer, pipe, options=False)([1])  # no ConfigError
    with pytest.raises(ConfigError, match="option 'typo' is never read"):
        first_request_checked(timer, pipe)([1])
