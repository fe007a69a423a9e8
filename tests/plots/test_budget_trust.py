"""The budget figure shows the noise badge and the failures."""

from plots_helpers import summary_of

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
    requests, stages, order = toy_run
    requests = requests.assign(
        ok=False, error_stage="model", error_type="MemoryError", error_message="out of memory"
    )
    summary = summary_of(requests, stages, order)
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


def test_the_header_stacks_badge_title_and_legend_without_overlap(toy_summary):
    """Three NOISY reasons of a served run covered the legend (issue 40): from the figure's top, the badge
    (10 px down, its lines wrapped), then the title, then the legend's row, each below the one above."""
    from workbench.plots.budget import BADGE_CHARS, BADGE_LINE_PX, BADGE_PAD_PX, LEGEND_ROW_PX

    noise = {
        "noisy": True,
        "reasons": [
            "other processes used 1.7 of 2 cores during the run",
            "load average was 7.32 on 2 cores before the run",
            "the load generator fell behind its schedule: lag p99 25.518 ms (max 43.964 ms) >= 1 ms: "
            "the client could not hold this rate here (a busy machine, or a rate above what it can send)",
        ],
    }
    layout = budget_figure(toy_summary, noise=noise).to_dict()["layout"]
    badge = layout["annotations"][0]
    lines = badge["text"].split("<br>")
    assert len(lines) == 5 and max(map(len, lines)) <= BADGE_CHARS
    badge_px = len(lines) * BADGE_LINE_PX + 2 * BADGE_PAD_PX + 6
    top = layout["margin"]["t"]
    assert (badge["y"], badge["yanchor"], badge["yshift"]) == (1, "top", top - 10)
    assert layout["title"]["pad"]["t"] == 10 + badge_px  # the title starts under the badge
    assert top == 10 + badge_px + 26 + LEGEND_ROW_PX  # a one-line title, then the legend's row
    assert (layout["legend"]["y"], layout["legend"]["yanchor"]) == (1.02, "bottom")
