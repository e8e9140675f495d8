"""The tracer of ``benchmarks/bench_paths.py``: put on a task's ``PYTHONPATH`` with ``PATHTRACE_DIR=<folder>``.

In a process that runs marathon-tf's own code (a bootstrap: its command line names ``marathon-tf`` or
``marathon_tf``, not the pre-warmed interpreter's ``prewarm_child``, not a training program) it records, from
its first line on, which of marathon-tf's modules had a function called (not a module's or class's body: its
import) in each quarter second (wall clock), and every HTTP request ``requests`` sent (method, URL, when); twice a
second it writes them to ``<folder>/<pid>.json``. Anything else (a training program, TensorFlow's interpreters) is
left alone. Nothing of this is imported by marathon-tf; only the benchmark puts it on a path.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time

#: a code object's flag: a function's (a module's or class's body has none)
_NEWLOCALS = 0x02
_FOLDER = os.environ.get("PATHTRACE_DIR")


def _ours() -> bool:
    try:
        with open("/proc/self/cmdline", "rb") as f:
            argv = f.read().decode(errors="replace").split("\0")
    except OSError:
        argv = list(sys.argv)
    line = " ".join(argv)
    return ("marathon-tf" in line or "marathon_tf" in line) and "prewarm_child" not in line


def profiler(called, sent):
    """A profile function (``sys.setprofile``'s): ``called(module)`` for each call of a function of marathon-tf's
    (``marathon_tf/…``; a module's or class's body is its import, not a call), ``sent(method, url)`` for each request
    ``requests`` sends. The tasks' tracer and ``bench_paths``' user side both use it."""
    def profile(frame, event, arg):  # noqa: ARG001 (the profiler's signature)
        if event != "call":
            return
        code = frame.f_code
        path = code.co_filename
        at = path.rfind("marathon_tf/")
        if at >= 0:
            if code.co_flags & _NEWLOCALS:
                called(path[at:])
        elif code.co_name == "send" and path.endswith("requests/sessions.py"):
            request = frame.f_locals.get("request")
            if request is not None and getattr(request, "url", None):
                sent(str(request.method), str(request.url))
    return profile


def _install(folder: str) -> None:
    calls: dict[str, set[int]] = {}
    requests_sent: list[tuple[float, str, str]] = []
    lock = threading.Lock()
    started = time.time()

    def called(module: str) -> None:
        seen = calls.get(module)
        if seen is None:
            with lock:
                seen = calls.setdefault(module, set())
        seen.add(int(time.time() * 4))

    def sent(method: str, url: str) -> None:
        with lock:
            requests_sent.append((time.time(), method, url))

    profile = profiler(called, sent)

    def dump() -> None:
        out = os.path.join(folder, f"{os.getpid()}.json")
        while True:
            time.sleep(0.5)
            with lock:
                data = {"pid": os.getpid(), "app": os.environ.get("MARATHON_APP_ID", ""), "started": started,
                        "calls": {m: sorted(b) for m, b in calls.items()}, "requests": list(requests_sent)}
            tmp = out + ".tmp"
            with open(tmp, "w") as f:
                json.dump(data, f)
            os.replace(tmp, out)

    sys.setprofile(profile)
    threading.setprofile(profile)
    threading.Thread(target=dump, daemon=True, name="pathtrace").start()


if _FOLDER and _ours():
    _install(_FOLDER)
