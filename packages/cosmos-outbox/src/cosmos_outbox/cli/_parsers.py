"""A core command's parser (`relay`, `target-rules`): its name after the program's, and the
global `--settings FILE` that every command takes after its name (`cosmos_outbox.cli`), said
once."""

from __future__ import annotations

import argparse


def command_parser(prog: str, command: str, description: str) -> argparse.ArgumentParser:
    """The parser of `<prog> <command>`, with `--settings FILE`."""
    p = argparse.ArgumentParser(prog=f"{prog} {command}", description=description)
    p.add_argument(
        "--settings",
        metavar="FILE",
        help="a local.settings.json whose Values are read too (the environment wins)",
    )
    return p
