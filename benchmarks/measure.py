"""Runs a command and measures its wall time and the peak RSS of its largest process.

Peak RSS comes from the kernel's high-water mark (`VmHWM` in /proc/PID/status) of the command and
every descendant (Beam's worker processes included), sampled every 50 ms; Linux only. Given a
folder, the peak of the disk space its file system used above what it used at the start is
sampled too (other writers on that file system count as well).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import threading
import time

__all__ = ["Measured", "run_measured"]


@dataclasses.dataclass(frozen=True)
class Measured:
    seconds: float
    peak_rss_bytes: int  # of the largest single process
    stdout: str
    stderr: str = ""
    peak_disk_bytes: int = 0  # above the start, on the file system of run_measured's disk_of


def _children_map() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    return children


def _descendants(root: int) -> list[int]:
    children, found, stack = _children_map(), [], [root]
    while stack:
        pid = stack.pop()
        found.append(pid)
        stack.extend(children.get(pid, []))
    return found


def _hwm_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def run_measured(
    cmd: list[str], env: dict[str, str] | None = None, disk_of: str | None = None
) -> Measured:
    """Runs `cmd`; raises CalledProcessError (with its stderr) when it fails."""
    used_before = shutil.disk_usage(disk_of).used if disk_of else 0
    disk = [0]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    peaks: dict[int, int] = {}
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            for pid in _descendants(proc.pid):
                peaks[pid] = max(peaks.get(pid, 0), _hwm_bytes(pid))
            if disk_of:
                disk[0] = max(disk[0], shutil.disk_usage(disk_of).used - used_before)
            done.wait(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = proc.communicate()
    seconds = time.perf_counter() - start
    done.set()
    sampler.join()
    if proc.returncode:
        raise subprocess.CalledProcessError(proc.returncode, cmd, out, err)
    return Measured(seconds, max(peaks.values(), default=0), out, err, disk[0])
