"""What runs in a process the fork server forks (``_forkserver_server.py``): the parent-death
signal, a host's or a worker's ``python -m`` module run in place, and what the server imports
before it forks them."""

from __future__ import annotations

import os
import signal
import sys
import traceback
from contextlib import suppress

from funcstack.functions_host._forkserver import logger

_PR_SET_PDEATHSIG = 1


def die_with(parent: int, signum: int) -> bool:
    """The kernel sends this process ``signum`` when ``parent`` (the thread that started it)
    ends: Linux's parent-death signal. A parent gone already ends this process now. False
    where there is no such signal."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signum)
    except (OSError, AttributeError):
        return False
    if os.getppid() != parent:
        os._exit(1)
    return True


def run(module: str) -> int:
    """``python -m <module>`` (the host's, a language worker's) in this process: its exit
    code as the interpreter makes it."""
    import runpy

    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        code = exc.code
        if code is None:
            return 0
        if isinstance(code, int):
            return code
        print(code, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        traceback.print_exc()
        flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)  # as the interpreter ends on one: by the signal
        return 130
    except BaseException as error:  # as the interpreter: printed, exit code 1
        sys.excepthook(type(error), error, error.__traceback__)
        return 1
    return 0


def flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        with suppress(Exception):
            stream.flush()


def preload() -> None:
    """What every host imports: its ``__main__``'s modules, the RPC messages (protobuf, about
    0.07 s of CPU), and the few modules its start imports besides."""
    import concurrent.futures.thread  # noqa: F401
    import encodings.idna  # noqa: F401
    import numbers  # noqa: F401
    import queue  # noqa: F401
    import runpy  # noqa: F401

    import funcstack.functions_host.__main__  # noqa: F401

    preload_worker()


def preload_worker() -> None:
    """What a language worker imports before its app (``_worker.py``, the worker library:
    about 0.1 s of CPU), none of which reads a setting or starts a thread when imported; not
    the app's modules."""
    import argparse  # noqa: F401

    import azure_functions_runtime  # noqa: F401

    import funcstack.functions_host._worker  # noqa: F401

    if os.environ.get("FUNCTIONS_RPC_WHEEL"):
        from funcstack.functions_host._rpc import protos

        try:
            protos()
        except Exception:  # each host loads them then, and says why it cannot
            logger.debug("the RPC messages were not loaded", exc_info=True)
