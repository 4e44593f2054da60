"""`kcm zk start|stop|status [--servers 1|3] [--dir DIR]`: a ZooKeeper 3.8 standalone server or 3-server
ensemble on loopback ports of its own choosing, with its data and logs under DIR (default kcm-out/zk/).
`start` leaves the servers running after it exits and prints the hosts string to give `--zk`; `status`
and `stop` find them again through DIR's state file (kcm.impl.zookeeper.ensemble).

Exit codes: 0 done, 2 a user error (no ensemble in DIR, ZooKeeper or Java missing, a bad option) or a
server that would not start (the line names its log file).
"""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path
from typing import Any

from kcm.impl.zookeeper.ensemble import Ensemble, EnsembleError, ZooKeeperMissing
from kcm.tools.errors import EXIT_OK, UsageError
from kcm.tools.outputs import check_folder, default_out


def register(subparsers: Any) -> None:
    zk = subparsers.add_parser("zk", help="start, inspect or stop a local ZooKeeper server or ensemble")
    zk.add_argument("action", choices=("start", "stop", "status"))
    zk.add_argument("--servers", type=int, choices=(1, 3), default=1,
                    help="1: a standalone server (default); 3: an ensemble (start only)")
    zk.add_argument("--dir", type=Path, default=None,
                    help=f"the servers' data, logs and state file (default {default_out('zk')})")
    zk.set_defaults(handler=cmd_zk)


def cmd_zk(args: argparse.Namespace) -> int:
    directory: Path = args.dir if args.dir is not None else default_out("zk")
    try:
        _ACTIONS[args.action](directory, args.servers)
    except (ZooKeeperMissing, EnsembleError) as error:
        raise UsageError(str(error)) from error
    return EXIT_OK


def _start(directory: Path, servers: int) -> None:
    check_folder(directory, str(directory))
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UsageError(f"{directory}: cannot make the folder: {err.strerror or err}") from None
    # Left running on purpose: `kcm zk stop` ends it.
    ensemble = Ensemble(directory, servers, detached=True)
    ensemble.start()
    print(f"ZooKeeper {'standalone' if servers == 1 else f'ensemble of {servers}'} serving at {ensemble.hosts}")
    print(f"use it with --zk {ensemble.hosts}; stop it with: kcm zk stop --dir {shlex.quote(str(directory))}")


def _stop(directory: Path, _servers: int) -> None:
    ensemble = Ensemble.attach(directory)
    ensemble.stop()
    print(f"stopped the ZooKeeper servers in {directory} (their data stays there)")


def _status(directory: Path, _servers: int) -> None:
    rows = [("server", "port", "pid", "mode")]
    rows += [(str(s.index), str(s.client_port), "-" if s.pid is None else str(s.pid), s.mode)
             for s in Ensemble.attach(directory).status()]
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())


_ACTIONS = {"start": _start, "stop": _stop, "status": _status}
