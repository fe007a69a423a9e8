"""The wings: found through their entry points, and one line naming the install command where absent."""

import subprocess
import sys
from pathlib import Path

import pytest

from workbench.wings import WingMissing, wing, wing_commands

REPO = Path(__file__).resolve().parents[1]
# the CLI in a process where importing the named wing fails as it does where it is not installed
WITHOUT = """
import sys
class Absent:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] == sys.argv[1]:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, Absent())
from workbench.cli import main
sys.exit(main(sys.argv[2:]))
"""


def without(wing_package: str, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", WITHOUT, wing_package, *argv],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_installed_wings_register_their_commands_and_hooks():
    names = ["export-dashboard", "ingest-otel", "locust-worker", "serve"]
    assert [e.name for e in wing_commands()] == names
    assert callable(wing("serve").run_http_load_command)
    assert wing("redis").RedisStore.__module__ == "workbench_redis.store"


def test_an_unknown_wing_names_its_install_command():
    with pytest.raises(
        WingMissing,
        match=r"the nowhere wing, which is not installed: pip install -e '\.\[nowhere\]'",
    ):
        wing("nowhere")


@pytest.mark.parametrize(
    "argv",
    [
        ("serve", "--example", "tabular", "--port", "0"),
        ("load", "--example", "tabular", "--url", "http://127.0.0.1:9", "--requests", "5"),
        ("load", "--example", "tabular", "--url", "http://127.0.0.1:9", "--sweep", "rate=1,2"),
        ("load", "--example", "tabular", "--rate", "5", "--requests", "3", "--otel"),
        ("profile", "--example", "tabular", "--otel", "--requests", "3"),
        ("ingest-otel", "spans.jsonl"),
    ],
)
def test_a_serve_command_without_the_serve_wing_says_how_to_install_it(argv):
    done = without("workbench_serve", *argv)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        f"workbench {argv[0]}: error: the serve wing cannot load here (no module named "
        "'workbench_serve'): pip install -e '.[serve]' from the workbench's folder "
        "(or pip install 'workbench[serve]')"
    ]


def test_the_core_commands_run_without_any_wing():
    done = without(
        "workbench_serve",
        "show",
        "data/runs/" + sorted(p.name for p in (REPO / "data" / "runs").iterdir())[0],
    )
    assert done.returncode == 0, done.stderr
    assert "workbench_serve" not in done.stderr


def test_the_redis_store_without_the_redis_wing_says_how_to_install_it():
    code = WITHOUT.replace(
        "from workbench.cli import main\nsys.exit(main(sys.argv[2:]))",
        "from workbench.config import PipelineConfig\nfrom workbench.examples import tabular\n"
        "tabular.build(PipelineConfig(options={'store': 'redis'}))",
    )
    done = subprocess.run(
        [sys.executable, "-c", code, "workbench_redis"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        "workbench.wings.WingMissing: the redis wing cannot load here (no module named "
        "'workbench_redis'): pip install -e '.[redis]' from the workbench's folder "
        "(or pip install 'workbench[redis]')"
    )
