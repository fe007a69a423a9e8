"""A generative pipeline through the command line: TTFT/ITL/TPOT in show, the KV-cache finding in the
audit, the TPOT ratio in compare and gate (saved runs with exact times: a fake clock)."""

import json

from tests.conftest import FakeClock, streaming_pipeline
from workbench import profile
from workbench.cli import main


def saved_generative(path, *, kv_cache: bool):
    """40 requests of 16 tokens; without the cache each decode step costs 200 ns more a position."""
    clock = FakeClock()
    pipe = streaming_pipeline(
        clock, prefill_ns=20_000, step_ns=2_000, growth_ns=0 if kv_cache else 200, tokens=16
    )
    run = profile(pipe, requests=40, warmup=0, traced=0, clock=clock)
    quiet = {"noisy": False, "reasons": [], "fix": None, "other_cores": 0.0, "steal_pct": 0.0}
    run.meta = run.meta.replace(noise=quiet)
    run.save(path)
    return str(path)


def test_show_gives_ttft_itl_tpot_with_intervals_and_counts(tmp_path, capsys):
    run = saved_generative(tmp_path / "nocache", kv_cache=False)
    assert main(["show", run, "--json"]) == 0
    tokens = json.loads(capsys.readouterr().out)["tokens"]
    assert (tokens["requests"], tokens["tokens"]) == (40, 640)
    assert tokens["ttft"]["p50_ms"] == 0.021 and tokens["prefill"]["p50_ms"] == 0.02
    assert tokens["tpot"]["p50_ms"] == 0.0036  # steps 2,200 .. 5,000 ns, mean 3,600
    assert tokens["itl"]["count"] == 600 and tokens["itl"]["p95_ci_ms"] == [0.0048, 0.005]
    assert tokens["decode_growth"]["grows"] is True
    assert main(["show", run]) == 0
    out = capsys.readouterr().out
    assert "tokens: generate streamed 640 units in 40 requests (16.0 per request)" in out
    assert "  TPOT     p50 0.004 ms [0.004, 0.004]" in out and "(600 gaps)" in out
    assert (
        "  decode steps grow with position: ITL 0.002 ms at token 1 -> 0.005 ms at token 15" in out
    )


def test_audit_names_decode_growth_and_proposes_a_kv_cache_not_bf16(tmp_path, capsys):
    run = saved_generative(tmp_path / "nocache", kv_cache=False)
    assert main(["audit", run, "--json"]) == 0
    found = json.loads(capsys.readouterr().out)["runs"][0]["findings"]
    assert found[0]["kind"] == "decode_growth" and found[0]["stage"] == "generate"
    assert found[0]["evidence"].startswith(
        "decode steps of generate grow with the token's position"
    )
    assert found[0]["actions"][0]["try"] == {"kv_cache": True}
    tries = [a["try"] for f in found for a in f["actions"] if a["try"]]
    assert not any("precision" in t for t in tries)
    cached = saved_generative(tmp_path / "cache", kv_cache=True)
    assert main(["audit", cached, "--json"]) == 0
    kinds = [f["kind"] for f in json.loads(capsys.readouterr().out)["runs"][0]["findings"]]
    assert "decode_growth" not in kinds


def test_compare_gives_the_tpot_ratio_with_its_interval_and_gate_judges_it(tmp_path, capsys):
    nocache = saved_generative(tmp_path / "nocache", kv_cache=False)
    cache = saved_generative(tmp_path / "cache", kv_cache=True)
    assert main(["compare", nocache, cache, "--json"]) == 0
    tokens = json.loads(capsys.readouterr().out)["tokens"]
    assert (tokens["requests"], tokens["gaps"]) == ([40, 40], [600, 600])
    tpot = {e["name"]: e for e in tokens["metrics"]}["tpot"]
    assert tpot["p50_ratio"] == round(2_000 / 3_600, 4) and tpot["p50_ci"] == [0.5556, 0.5556]
    assert tpot["verdict"] == "faster"
    assert main(["compare", nocache, cache]) == 0
    assert "  TPOT                0.556    [0.556, 0.556]    0.556" in capsys.readouterr().out
    assert main(["gate", nocache, cache]) == 0
    capsys.readouterr()
    assert main(["gate", cache, nocache]) == 1
    out = capsys.readouterr().out
    assert "TPOT p50: +80.0 % (ratio 1.800, interval [1.800, 1.800]) exceeds +5 %" in out


TINY_OPTIONS = [
    x
    for o in ("vocab=64", "d_model=32", "heads=2", "layers=1", "prompt_tokens=6")
    for x in ("--option", o)
]


def test_load_of_the_generate_example_batches_its_tokens_continuously(tmp_path, capsys):
    out = tmp_path / "load"
    args = ["load", "--example", "generate", "--threads", "1", "--json", "--out", str(out)]
    args += ["--max-num-seqs", "2", "--max-batched-tokens", "16", "--chunk-tokens", "4"]
    args += ["--rate", "200", "--requests", "6", *TINY_OPTIONS]
    args += ["--option", "answer_tokens=3"]
    assert main(args) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["continuous"]["max_num_seqs"] == 2 and got["continuous"]["chunk_tokens"] == 4
    assert (got["requests"], got["failed"]) == (6, 0)
    assert (got["tokens"]["requests"], got["tokens"]["tokens"]) == (6, 18)
    assert got["tokens"]["itl"]["count"] == 12
    assert main(["show", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["tokens"]["tpot"]["count"] == 6
    # the same pipeline without its cache offers no step API: refused, exit 2
    nocache = ["load", "--example", "generate", "--rate", "200", "--requests", "2"]
    assert main(nocache + [*TINY_OPTIONS, "--option", "kv_cache=false"]) == 2
    assert "offers no step API" in capsys.readouterr().err
