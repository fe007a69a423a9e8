"""``python -m workbench_room``: serve the dashboards (``make dashboard``) or a workshop room (``make room``)."""

from __future__ import annotations

import argparse
import os
import re
import socket
import sys
import tempfile
from pathlib import Path

from workbench_serve.hosts import WILDCARD_BINDS, is_loopback_bind, normalize_host
from .app import RoomVoila, resolve_token, room_config, use_our_template

ROOM_DEFAULTS = {"pool": 2, "max_kernels": 40, "live": "queue", "path": "notebooks"}
# make dashboard preheats one kernel per dashboard, as the room does two: a page takes a kernel that has run
# its notebook and comes at once, not after the notebook ran (its first figure came 3.1-4.5 s after navigation,
# quiet; issue 40, benchmarks/results/first_view.md). Each waits with 175-190 MB resident (110-117 MB its own,
# USS); --pool 0 turns it off.
PLAIN_DEFAULTS = {"pool": 1, "max_kernels": 20, "live": "on", "path": "notebooks/dashboards"}
# A page connected to its kernel and sending it nothing this long loses it (the kernel is shut down): what a
# client holds without using it comes back (one address took all 40 kernels by connecting each page). A
# student who leaves a page untouched that long reloads it.
CULL_CONNECTED_IDLE_S = 1200


def pool_spec(text: str) -> tuple[str | None, int]:
    """``N`` -> ``(None, N)``; ``DASHBOARD=N`` -> ``("DASHBOARD", N)``; N a whole number of kernels >= 0."""
    name, _, count = text.rpartition("=")
    try:
        n = int(count)
    except ValueError:
        n = -1
    if n < 0 or (_ and not name):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a pool size: give N or DASHBOARD=N, N a whole number >= 0"
        )
    return (name or None), n


def dashboard_pools(root: Path, specs: list[tuple[str, int]]) -> dict[str, int]:
    """``{notebook path relative to root: pool size}`` for each ``DASHBOARD=N``, as Voila names the
    notebooks it preheats; DASHBOARD is a dashboard's stem (``latency_explorer``) or its path under root.
    Only dashboards are preheated (``root/dashboards/*`` when root has that folder, as with ``--room``).
    Raises ValueError naming the dashboards when one matches none or several."""
    top = root / "dashboards" if (root / "dashboards").is_dir() else root
    dashboards = sorted(p.relative_to(root).as_posix() for p in top.glob("*.ipynb"))
    pools = {}
    for name, n in specs:
        want = name.removesuffix(".ipynb")
        found = [d for d in dashboards if d.removesuffix(".ipynb") == want or Path(d).stem == want]
        if len(found) != 1:
            raise ValueError(
                f"--pool {name}={n}: no dashboard named {name!r} in {top} "
                f"(dashboards: {', '.join(Path(d).stem for d in dashboards) or 'none'})"
            )
        pools[found[0]] = n
    return pools


def dashboards_only(root: Path) -> str:
    """Voila's ``preheat_denylist`` pattern keeping every notebook but ``root/dashboards/*`` out of the pool.

    Voila matches it against absolute paths (``Path(root_dir).rglob``), so the pattern is absolute.
    """
    return rf"^(?!{re.escape(str(root.resolve() / 'dashboards'))}{re.escape(os.sep)}).*"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m workbench_room", description=__doc__)
    p.add_argument(
        "path",
        nargs="?",
        help="folder to serve (default notebooks/dashboards; notebooks with --room)",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to bind (0.0.0.0: every interface)")
    p.add_argument("--port", type=int, default=8866)
    p.add_argument(
        "--room",
        action="store_true",
        help="workshop presets: dashboards and notebooks, 2 preheated kernels per dashboard, "
        "at most 40 kernels, live profiling queued one at a time",
    )
    p.add_argument(
        "--token",
        default=None,
        help="require this token (default: a random one for a non-loopback bind, none on loopback)",
    )
    p.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="another Host name to answer (e.g. a DNS name handed out); repeatable",
    )
    p.add_argument(
        "--pool",
        type=pool_spec,
        action="append",
        default=[],
        metavar="N|DASHBOARD=N",
        help="preheated kernels per dashboard (default 1, 2 with --room; 0: none, each page starts its "
        "own); DASHBOARD=N sizes one dashboard's pool to its class, e.g. --pool latency_explorer=30 "
        "(repeatable; N alone sets the others)",
    )
    p.add_argument(
        "--refill-delay-s",
        type=float,
        default=1.0,
        help="seconds after a page takes a preheated kernel before its replacement starts (default 1, "
        "Voila's)",
    )
    p.add_argument(
        "--refill-wait-s",
        type=float,
        default=20.0,
        help="a replacement also waits until the pages opened meanwhile drew their first view, this "
        "many seconds at most (default 20)",
    )
    p.add_argument(
        "--max-kernels", type=int, default=None, help="refuse new pages beyond this many kernels"
    )
    p.add_argument(
        "--cull-idle-s",
        type=int,
        default=30,
        help="shut down a kernel with no page connected after this many idle seconds",
    )
    p.add_argument(
        "--cull-interval-s", type=int, default=10, help="how often idle kernels are looked for"
    )
    p.add_argument(
        "--unconnected-grace-s",
        type=int,
        default=30,
        help="seconds after its page loaded before a kernel no page connected to is shut down (default 30)",
    )
    p.add_argument(
        "--max-kernels-per-client",
        type=int,
        default=None,
        help="kernels one client address may hold, connected or not; one more page: 503 (default: "
        "the largest --pool or half of --max-kernels, whichever is more; 0: no bound)",
    )
    p.add_argument(
        "--max-unconnected-per-client",
        type=int,
        default=0,
        help="of those, kernels whose page loaded and never connected; one more page: 503 "
        "(default 0: no separate bound)",
    )
    p.add_argument(
        "--cull-connected-idle-s",
        type=int,
        default=CULL_CONNECTED_IDLE_S,
        help="shut down a kernel whose page is connected but sent it nothing for this many seconds "
        f"(default {CULL_CONNECTED_IDLE_S}; 0: never)",
    )
    p.add_argument(
        "--upload-limit-mib", type=int, default=64, help="largest upload a page accepts (MiB)"
    )
    p.add_argument(
        "--ws-unread-limit-mib",
        type=int,
        default=32,
        help="bytes (MiB) a page may leave unread on its kernel websocket before the server closes it "
        "(default 32; at least the upload limit)",
    )
    p.add_argument(
        "--log-level",
        choices=("INFO", "DEBUG"),
        default="INFO",
        help="DEBUG logs every kernel message's type per kernel (to see where a page stalls)",
    )
    p.add_argument(
        "--live",
        choices=("on", "queue", "off"),
        default=None,
        help="live profiling: on, queue (one at a time across the server) or off (recorded runs only)",
    )
    return p


def outward_address() -> str:
    """The address other machines most likely reach this one by (no packet is sent)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))  # TEST-NET-1: a UDP connect only picks the route
            return s.getsockname()[0]
        except OSError:
            return socket.gethostname()


def url_to_hand_out(host: str, port: int, token: str) -> str:
    """``http://ADDRESS:PORT/`` plus ``?token=...`` when a token is required."""
    address = outward_address() if normalize_host(host) in WILDCARD_BINDS else host
    if ":" in address:
        address = f"[{address}]"
    return f"http://{address}:{port}/" + (f"?token={token}" if token else "")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    defaults = ROOM_DEFAULTS if args.room else PLAIN_DEFAULTS

    if args.token == "" and not is_loopback_bind(args.host):
        return _error(
            f"an empty --token on {args.host} would let anyone on the network in; "
            "omit --token for a random one"
        )
    token = resolve_token(args.host, args.token)
    path = Path(args.path or defaults["path"])
    if not path.exists():
        return _error(f"{path} does not exist")
    sizes = [n for name, n in args.pool if name is None]
    try:
        pools = dashboard_pools(path, [(name, n) for name, n in args.pool if name is not None])
    except ValueError as exc:
        return _error(str(exc))
    config = room_config(
        host=args.host,
        port=args.port,
        token=token,
        pool=sizes[-1] if sizes else defaults["pool"],
        pools=pools,
        refill_delay_s=args.refill_delay_s,
        refill_wait_s=args.refill_wait_s,
        max_kernels=defaults["max_kernels"] if args.max_kernels is None else args.max_kernels,
        cull_idle_s=args.cull_idle_s,
        cull_interval_s=args.cull_interval_s,
        unconnected_grace_s=args.unconnected_grace_s,
        max_kernels_per_client=args.max_kernels_per_client,
        max_unconnected_per_client=args.max_unconnected_per_client,
        cull_connected_idle_s=args.cull_connected_idle_s,
        ws_unread_limit_bytes=args.ws_unread_limit_mib << 20,
        upload_limit_bytes=args.upload_limit_mib << 20,
        live=args.live or defaults["live"],
        allow_hosts=args.allow_host,
        lock_path=str(Path(tempfile.gettempdir()) / "workbench-live.lock"),
        pool_pattern=dashboards_only(path) if path.name != "dashboards" else None,
    )
    config.Voila.log_level = args.log_level
    use_our_template()
    app = RoomVoila(config=config)
    app.initialize([str(path)])
    url = url_to_hand_out(args.host, args.port, token)

    def announce():
        print(
            f"\nworkbench room: serving {path} on {args.host}:{args.port}\n"
            f"  {'hand out' if not is_loopback_bind(args.host) else 'open'}: {url}\n",
            flush=True,
        )

    from tornado.ioloop import IOLoop

    IOLoop.current().add_callback(announce)
    app.start()
    return 0


def _error(message: str) -> int:
    print(f"workbench room: error: {message}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
