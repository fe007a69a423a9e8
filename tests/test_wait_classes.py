"""Each sample's class from its call and its thread's counters (workbench.wait_classes)."""

from __future__ import annotations

import socket
import threading

import pytest

from workbench.wait_classes import CLASSES, GIL_SHARE, call_kind, classify

MS = 1_000_000


def _cls(*args) -> str:
    return CLASSES[classify(*args)]


def test_a_collection_over_half_the_interval_is_gc_whatever_the_call():
    assert _cls("lock", 10 * MS, 0, 0, 5 * MS) == "gc"
    assert _cls(None, 10 * MS, 9 * MS, 0, 4 * MS) == "cpu"


def test_a_device_sync_is_device_even_while_spinning_on_cpu():
    # no GPU on this machine: the device class comes from a fake top frame's call (.item())
    assert _cls("device", 10 * MS, 10 * MS, 0, 0) == "device"


def test_on_cpu_half_the_interval_is_cpu_and_a_known_wait_off_cpu_is_that_wait():
    assert _cls("lock", 10 * MS, 5 * MS, 0, 0) == "cpu"
    assert _cls("lock", 10 * MS, 1 * MS, 10 * MS, 0) == "lock"
    assert _cls("io", 10 * MS, 0, 0, 0) == "io"
    assert _cls("sleep", 10 * MS, None, 0, 0) == "sleep"


def test_blocked_in_plain_python_while_another_thread_is_busy_is_the_gil():
    busy = int(10 * MS * GIL_SHARE)
    assert _cls(None, 10 * MS, 1 * MS, busy, 0) == "gil"
    assert _cls(None, 10 * MS, 1 * MS, busy - 1, 0) == "off_cpu"
    assert _cls(None, 10 * MS, None, 10 * MS, 0) == "cpu"  # no counters: the call alone


@pytest.fixture
def user_file(tmp_path):
    path = tmp_path / "app.py"
    path.write_text(
        "def f(self, t, q, conn):\n"
        "    with self._lock:\n"
        "        t.item()\n"
        "    time.sleep(0.1)\n"
        "    conn.recv(10)\n"
        "    x = 1 + 1\n"
        "    job_queue.get(timeout=1)\n"
    )
    return str(path)


@pytest.mark.parametrize(
    ("line", "kind"),
    [(2, "lock"), (3, "device"), (4, "sleep"), (5, "io"), (6, None), (7, "lock")],
)
def test_the_user_line_names_the_wait(user_file, line, kind):
    assert call_kind(((user_file, "f", line),)) == (kind, 0)


def test_a_standard_library_frame_above_the_users_call_names_the_wait_and_the_users_line_is_the_site(
    user_file,
):
    event_wait = (threading.__file__, "wait", 600)
    assert call_kind(((user_file, "f", 6), event_wait)) == ("lock", 0)
    recv = (socket.__file__, "recv_into", 700)
    assert call_kind(((user_file, "handler", 1), (user_file, "f", 6), recv)) == ("io", 1)


def test_a_recorded_file_carries_no_path_of_the_machine_and_keeps_its_class():
    """Runs in data/ carried /work/... and .venv paths of the machine that recorded them."""
    import os

    import workbench.timing
    import workbench_redis.feature_store
    import workbench_serve.service
    from workbench.examples import text
    from workbench.wait_classes import is_user_file, portable_file

    site = os.path.join(os.sep, "opt", "py", "lib", "site-packages", "torch", "nn", "linear.py")
    cases = {
        threading.__file__: ("<stdlib>/threading.py", False),
        site: ("site-packages/torch/nn/linear.py", False),
        workbench.timing.__file__: ("<workbench>/timing.py", False),
        text.__file__: ("<workbench>/examples/text.py", True),
        # the wings are the harness too: a server's batcher is no line of the user's
        workbench_serve.service.__file__: ("<workbench_serve>/service.py", False),
        workbench_redis.feature_store.__file__: ("<workbench_redis>/feature_store.py", False),
        os.path.abspath("tests/conftest.py"): ("tests/conftest.py", True),
        "<frozen runpy>": ("<frozen runpy>", False),
    }
    for live, (recorded, user) in cases.items():
        assert portable_file(live) == recorded
        assert is_user_file(live) is is_user_file(recorded) is user
