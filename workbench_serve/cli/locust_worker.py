"""``workbench locust-worker --master HOST``: one Locust worker of ``load --url --engine locust``.

Start it on each machine that sends load, with the run's secret in
``WORKBENCH_LOCUST_SECRET`` (the same as on the load machine); the master
(started by ``load --engine locust --expect-workers N --master-host 0.0.0.0``)
sends it its share of the requests, sealed with that secret: anything else it
receives is ignored. The served URL must be reachable from this machine.
"""

from __future__ import annotations

from workbench.cli.output import add_number, number

PORT = number("--master-port", 1, 65_535, "(TCP port)", integer=True)


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "locust-worker",
        help="a Locust worker for `load --url --engine locust`",
        description="Join a `load --engine locust` master and send the share of the "
        "workbench's requests it is given. Needs WORKBENCH_LOCUST_SECRET: the secret the "
        "load machine holds.",
    )
    p.add_argument("--master", required=True, metavar="HOST", help="the master's address")
    add_number(p, PORT, 5557, "the master's port (default 5557)")
    p.set_defaults(func=run)


def run(args) -> int:
    # imported here, not at the top: msgpack is the Locust wing's; the secret is checked before Locust is
    # imported, since importing it monkey-patches the whole process for gevent (with warnings where
    # threads already run: a notebook's, a test's), which only a worker's own process may have
    from ..locust_wire import secret_from_env

    secret = secret_from_env("locust-worker")  # a ConfigError: exit 2 with one line
    from ..locust_engine import run_worker

    return run_worker(args.master, args.master_port, secret)
