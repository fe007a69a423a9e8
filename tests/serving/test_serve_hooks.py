"""workbench_serve.hooks: the serve wing's options of ``load``, refused where they need ``--url`` and
it is missing (before anything runs), in a plain load and in a sweep alike; the core's way to them."""

import pytest

from tests.support.cli import main_output
from workbench.wings import hook, wing

ENGINE = "workbench load: error: --engine locust sends to a server: give --url"
BOUNDS = "workbench load: error: --ttft-ms and --tpot-ms are goodput's bounds for --url: give --url"
PAYLOADS = (
    "workbench load: error: --payloads is for --url (a served pipeline); give --example or "
    "--pipeline for an in-process load"
)


@pytest.mark.parametrize("sweep", [[], ["--sweep", "rate=1,2"]])
@pytest.mark.parametrize(
    "given, line",
    [
        (["--example", "tabular", "--engine", "locust"], ENGINE),
        (["--example", "tabular", "--ttft-ms", "5"], BOUNDS),
        (["--payloads", "bodies.txt"], PAYLOADS),
    ],
)
def test_a_served_option_without_url_is_one_line(given, line, sweep):
    rc, out, err = main_output(["load", *given, "--rate", "5", "--requests", "3", *sweep])
    assert (rc, out, err.splitlines()) == (2, "", [line])


def test_the_core_asks_the_installed_serve_wing_and_goes_on_without_an_absent_one():
    assert hook("serve", "served_load") is wing("serve").served_load
    assert hook("nowhere", "add_load_arguments")("parser", "sources") is None
    assert hook("nowhere", "served_load", bool)("") is False
