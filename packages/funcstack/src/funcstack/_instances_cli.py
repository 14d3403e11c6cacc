"""``funcstack instances``: the instances of the apps of the stack ``funcstack run`` serves from
this folder, from another terminal, through its control channel (``_stack_control.py``).

``funcstack instances [list] [--json]``: each app, its URL and its instances (state, pid,
port, restarts, last exit, log). ``kill NAME [--no-restart]``: SIGKILL an instance; it comes
back as after a crash (the stack's restart policy) unless ``--no-restart``. ``pause NAME`` /
``resume NAME``: SIGSTOP / SIGCONT (a hung instance: its leases expire, its requests wait).
``add APP [--group GROUP]``: one more instance (of the whole app, or of a function group),
answered once it is ready.

Each prints one line (the list, a table) and exits 0; what cannot be done is one line on stderr
(``funcstack: ...``) and exit status 1: no stack running here, no such instance, an instance
not in a state for it, an app run as one host.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from funcstack._stack_control import ControlError, ask

__all__ = ["INSTANCES_COMMAND", "InstancesCommandError", "add_instances_command", "run_instances"]

INSTANCES_COMMAND = "instances"


class InstancesCommandError(Exception):
    """What stops ``funcstack instances``, in one line (exit status 1)."""


def add_instances_command(commands: Any, state_folder: str) -> None:
    """Add ``instances`` and its actions to the command's subparsers."""
    parser = commands.add_parser(
        INSTANCES_COMMAND,
        help="list, kill, pause, resume or add instances of the apps of the stack "
        f"`funcstack run` serves from this folder (found in {state_folder}/)",
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION")
    listing = actions.add_parser("list", help="the apps and their instances (the default)")
    listing.add_argument("--json", action="store_true", help="one JSON line instead of a table")
    kill = actions.add_parser(
        "kill", help="SIGKILL an instance; it comes back as after a crash unless --no-restart"
    )
    kill.add_argument("instance", help="the instance's name (hello-1, relay-http-2, ...)")
    kill.add_argument(
        "--no-restart", action="store_true", help="leave it down instead of restarting it"
    )
    for action, what in (("pause", "SIGSTOP"), ("resume", "SIGCONT")):
        sub = actions.add_parser(action, help=f"{what} an instance (its host and its worker)")
        sub.add_argument("instance", help="the instance's name")
    add = actions.add_parser(
        "add", help="start one more instance of an app or a process, ready when it says"
    )
    add.add_argument("app", help="the app's or the process's name (as the banner lists it)")
    add.add_argument(
        "--group",
        default=None,
        help="the function group, when the app runs its groups apart (http, function:NAME)",
    )


def run_instances(args: argparse.Namespace, workdir: Path) -> int:
    """Run the action against the stack of ``workdir``; print what it did."""
    action = args.action or "list"
    request: dict[str, Any] = {"command": action}
    if action in {"kill", "pause", "resume"}:
        request["instance"] = args.instance
    if action == "kill":
        request["restart"] = not args.no_restart
    if action == "add":
        request.update(app=args.app, group=args.group)
    try:
        answer = ask(workdir, request)
    except ControlError as exc:
        raise InstancesCommandError(str(exc)) from None
    if not answer.get("ok"):
        raise InstancesCommandError(f"instances {action}: {answer.get('error')}")
    if action == "list":
        apps = answer.get("apps") or []
        if getattr(args, "json", False):
            print(json.dumps({"apps": apps}))
        else:
            for line in _table(apps):
                print(line)
        return 0
    inst = answer["instance"]
    said = {
        "kill": (
            f"{inst['name']} killed (pid {inst['pid']}); "
            + (
                "it stays down (--no-restart)"
                if args.action == "kill" and args.no_restart
                else "it comes back as after a crash"
            )
        ),
        "pause": f"{inst['name']} paused (pid {inst['pid']}): it renews no lease, answers nothing",
        "resume": f"{inst['name']} resumed (pid {inst['pid']})",
        "add": f"{inst['name']} added (pid {inst['pid']}, 127.0.0.1:{inst['port']}, "
        f"log {inst['log']})",
    }[action]
    print(said)
    return 0


def _table(apps: list[dict[str, Any]]) -> list[str]:
    lines: list[str] = []
    for app in apps:
        instances = app.get("instances") or []
        scaled = "" if app.get("scaled") else ", one host (not scaled out)"
        lines.append(f"{app['app']}  {app['url']}  ({len(instances)} instance(s){scaled})")
        width = max([8, *(len(str(i["name"])) for i in instances)])
        groups = max([9, *(len(str(i.get("group") or "")) for i in instances)])
        whole = "process" if app.get("kind") == "process" else "whole app"
        for inst in instances:
            last = f"  last exit: {inst['last_exit']}" if inst.get("last_exit") else ""
            lines.append(
                f"  {inst['name']:<{width}}  {inst.get('group') or whole:<{groups}}  "
                f"{inst['state']:<11}pid {inst['pid']:<8}127.0.0.1:{inst['port']:<6} "
                f"restarts {inst['restarts']}  log {inst['log']}{last}"
            )
    return lines
