"""The budget figure shows the noise badge and the failures."""

from workbench.plots.budget import budget_figure, noise_badge_text

NOISY = {
    "noisy": True,
    "reasons": ["other processes used 1.4 of 2 cores during the run"],
    "fix": "--threads 1",
}
FAILURES = {
    "model": {
        "count": 3,
        "share": 0.03,
        "messages": [
            {"type": "MemoryError", "message": "out of memory", "where": "x.py:3 in f", "count": 3}
        ],
    }
}


def _annotations(fig):
    return [a["text"] for a in fig.to_dict()["layout"].get("annotations", [])]


def test_noisy_badge_and_failure_lines(toy_summary):
    fig = budget_figure(toy_summary, noise=NOISY, failures=FAILURES)
    assert "NOISY: other processes used 1.4 of 2 cores during the run" in _annotations(fig)
    title = fig.to_dict()["layout"]["title"]["text"]
    assert "failed in model: 3 (3.0 %), MemoryError: out of memory (x3)" in title


def test_quiet_and_unmeasured_badges(toy_summary):
    assert "quiet machine" in _annotations(
        budget_figure(toy_summary, noise={"noisy": False, "reasons": []})
    )
    unknown = {"noisy": None, "reasons": ["not measured on this OS"]}
    assert noise_badge_text(unknown) == "noise not measured: not measured on this OS"
    assert _annotations(budget_figure(toy_summary)) == []  # no noise given: no badge


def test_every_request_failed_says_so(toy_run):
    from workbench.analysis.budget import stage_summary

    requests, stages, order = toy_run
    requests = requests.assign(
        ok=False, error_stage="model", error_type="MemoryError", error_message="out of memory"
    )
    summary = stage_summary(requests, stages, order)
    fig = budget_figure(summary, failures=FAILURES, noise=NOISY)
    texts = _annotations(fig)
    assert texts[0].startswith("every measured request failed<br>failed in model: 3")
    assert any(t.startswith("NOISY") for t in texts)


def test_run_budget_figure_takes_the_runs_noise_and_failures():
    import itertools

    from workbench import Pipeline, profile
    from workbench.plots.budget import run_budget_figure

    def forward(batch):
        if batch[0] % 2:
            raise ValueError("odd item")
        return batch

    pipe = Pipeline("p", items=lambda: itertools.count())
    pipe.add("forward", forward)
    run = profile(pipe, requests=4, warmup=0, traced=0)
    fig = run_budget_figure(run)
    assert (
        "failed in forward: 2 (50.0 %), ValueError: odd item (x2)"
        in fig.to_dict()["layout"]["title"]["text"]
    )
    assert len(_annotations(fig)) == 1  # the noise badge, whatever this machine's state


def test_the_sampled_stacks_tail_line_goes_under_the_title(toy_summary):
    line = "hydrate, 91 % of the slowest 1 % in redis read_response <- get_features (recommend.py:143); median 40 %"
    title = budget_figure(toy_summary, tail=line).to_dict()["layout"]["title"]["text"]
    assert title.endswith(f"<br><sup>tail: {line}</sup>")
    assert "tail:" not in budget_figure(toy_summary).to_dict()["layout"]["title"]["text"]
