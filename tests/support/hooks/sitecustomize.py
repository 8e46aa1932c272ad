"""Test hooks for conversions run as processes (the launcher and its worker processes alike):
Python imports this module at start-up when its folder is on PYTHONPATH. Without the variables
below it does nothing.

TFRECORD_ETL_TEST_SIGNAL_AT=write|moved|manifest, TFRECORD_ETL_TEST_SIGNAL=<number>: publishing
sends that signal to the launcher (the first process that loads these hooks; its worker
processes inherit its pid) at that point, then goes on after a second: before its journal is
written (`write`), after the shards are moved and before the manifest (`moved`: the first
companion put in place), or right after the manifest is written (`manifest`). Signal 0 sends
nothing: publishing only waits there.

TFRECORD_ETL_TEST_HANG=<write task index>: that write task never ends (a hung worker).

TFRECORD_ETL_TEST_SIGNAL_IN_SET_NAME=<number>: the launcher sends itself that signal while a
dataclass field's `__set_name__` runs, once its own handlers are in place (Python then wraps
the handler's exception in a RuntimeError of its own, as a signal during imports can meet).
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import os
import sys
import time

_SIGNAL_AT = os.environ.get("TFRECORD_ETL_TEST_SIGNAL_AT")
_HANG = os.environ.get("TFRECORD_ETL_TEST_HANG")
if _SIGNAL_AT:  # the launcher's pid, for its worker processes
    os.environ.setdefault("TFRECORD_ETL_TEST_SIGNAL_PID", str(os.getpid()))


def _signal() -> None:
    os.kill(
        int(os.environ["TFRECORD_ETL_TEST_SIGNAL_PID"]), int(os.environ["TFRECORD_ETL_TEST_SIGNAL"])
    )
    time.sleep(1.0)  # the launcher handles it while publishing is at this point


def _patch_journal(module) -> None:
    write, put = module.write, module._put_in_place

    def signalled_write(*args, **kwargs):
        if _SIGNAL_AT == "write":
            _signal()
        return write(*args, **kwargs)

    def signalled_put(work, output, name, *args, **kwargs):
        if _SIGNAL_AT == "moved" and name != "manifest.json":
            _signal()
        put(work, output, name, *args, **kwargs)
        if _SIGNAL_AT == "manifest" and name == "manifest.json":
            _signal()

    module.write, module._put_in_place = signalled_write, signalled_put


def _patch_writer(module) -> None:
    write = module.WriteShardFn._write_task

    def hung(self, task, *args, **kwargs):
        if task.index == int(_HANG):
            while True:
                time.sleep(60)
        return write(self, task, *args, **kwargs)

    module.WriteShardFn._write_task = hung


_SET_NAME = os.environ.pop("TFRECORD_ETL_TEST_SIGNAL_IN_SET_NAME", "")


def _signal_in_set_name(frame, event, arg) -> None:
    import signal

    code = frame.f_code
    if (
        event == "call"
        and code.co_name == "__set_name__"
        and code.co_filename.endswith("dataclasses.py")
        and signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, signal.SIG_IGN, None)
    ):
        sys.setprofile(None)
        os.kill(os.getpid(), int(_SET_NAME))


if _SET_NAME:  # popped: worker processes do not inherit it
    sys.setprofile(_signal_in_set_name)

_PATCHES = {}
if _SIGNAL_AT:
    _PATCHES["beam_jobs.publish.journal"] = _patch_journal
if _HANG:
    _PATCHES["beam_jobs.sink.shard_writer"] = _patch_writer


class _Patcher(importlib.abc.MetaPathFinder):
    """Patches a module of `_PATCHES` once it is imported."""

    def find_spec(self, name, path, target=None):
        patch = _PATCHES.get(name)
        if patch is None:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            patch(module)

        spec.loader.exec_module = exec_module
        return spec


if _PATCHES:
    sys.meta_path.insert(0, _Patcher())
