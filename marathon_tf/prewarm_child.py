"""The pre-warmed interpreter's side (runs in the *training program's* Python, stdlib only).

The bootstrap starts ``<python> [options] prewarm_child.py [--idle] STATUS_FD MODULE...`` before
the cluster spec is known (see :mod:`marathon_tf.prewarm`). This file then

1. imports every MODULE (an import that fails is reported and forgotten); with ``--idle`` (a
   standby, started while the program runs) at SCHED_IDLE priority, if it may return to its
   normal priority afterwards, which it does before anything else,
2. writes one JSON line to the file descriptor STATUS_FD: ``{"ready": true, "seconds": ...,
   "rss_kib": ..., "failed": {"module": "ImportError: ..."}}``,
3. reads one JSON line from stdin: ``{"argv": [...], "env": {...}, "cwd": "..."}`` (the
   command exactly as the bootstrap would have executed it), points stdin at /dev/null,
4. runs the program in this process as ``python [options] script.py args...`` /
   ``python [options] -m module args...`` would: ``sys.argv``, ``sys.path[0]``, a fresh
   ``__main__`` module, ``os.environ`` (TF_CONFIG), the working directory, exit codes, uncaught
   exceptions (the traceback shows the program's frames only, exit 1; KeyboardInterrupt dies
   of SIGINT like Python does).

Whenever running in place could differ from a fresh interpreter it does not try: it
``exec``\\ s the command instead (same pid, same pipes, same process group), which is exactly
the ordinary start, import included. That is the case when a pre-warm import failed, when
the environment differs from the one this interpreter started with in anything but
``TF_CONFIG`` (Python and many libraries read it at start-up), or when the target is not a
plain source file (a directory, a zip file, a ``.pyc``, a file that cannot be read).

Deliberately compatible with old Pythons (3.7+) and free of marathon_tf imports: the
training program's interpreter need not have marathon_tf installed.
"""

import os
import sys

_HERE = os.path.realpath(__file__)
if sys.path and sys.path[0] and os.path.realpath(sys.path[0]) == os.path.dirname(_HERE):
    del sys.path[0]  # this file's directory (marathon_tf/) must not shadow the program's modules

import json  # noqa: E402
import time  # noqa: E402

IN_PLACE_ENV_EXCEPTIONS = ("TF_CONFIG",)  # read lazily by TensorFlow (TFConfigClusterResolver)


def _rss_kib():
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def _prewarm(modules):
    import importlib

    failed = {}
    for name in modules:
        try:
            importlib.import_module(name)
        except BaseException as e:  # noqa: BLE001 - any failure: the program runs the ordinary way
            failed[name] = "%s: %s" % (type(e).__name__, e)
    return failed


def _tell(fd, message, close):
    try:
        os.write(fd, (json.dumps(message) + "\n").encode())
        if close:
            os.close(fd)
    except OSError:
        pass


def _read_order():
    chunks = []
    while True:
        chunk = os.read(0, 65536)
        if not chunk:
            break
        chunks.append(chunk)
        if chunk.endswith(b"\n"):
            break
    data = b"".join(chunks)
    if not data.strip():
        sys.exit(0)  # the bootstrap closed stdin without an order: it does not need us
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    return json.loads(data.decode("utf-8"))


def _parse(argv):
    """``python [options] (script | -m module) args`` -> ("script"|"module", target, args)."""
    i = 1
    while i < len(argv):
        arg = argv[i]
        if arg == "-m":
            return "module", argv[i + 1], argv[i + 2:]
        if arg.startswith("-m"):
            return "module", arg[2:], argv[i + 1:]
        if arg in ("-W", "-X"):
            i += 2
            continue
        if arg.startswith("-"):
            i += 1
            continue
        return "script", arg, argv[i + 1:]
    raise ValueError("not a python program: %r" % (argv,))


def _exec(order):
    """The ordinary start: replace this interpreter by the command (same pid, pipes, group)."""
    import signal

    env = order["env"]
    sys.stdout.flush()
    sys.stderr.flush()
    for name in ("SIGPIPE", "SIGXFSZ"):  # what subprocess restores before an exec (Python ignores them)
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_DFL)
    os.execvpe(order["argv"][0], order["argv"], env)


def _same_env(env, started_with):
    """Whether ``env`` is what this interpreter started with, TF_CONFIG aside. (Compared with the
    environment before the pre-warm imports: what those changed, the program's own imports
    would have changed the same way.)"""
    keys = (set(env) | set(started_with)) - set(IN_PLACE_ENV_EXCEPTIONS)
    return all(env.get(k) == started_with.get(k) for k in keys)


def _trimmed(tb):
    """The traceback without this file's frames (Python shows only the program's)."""
    while tb is not None and os.path.realpath(tb.tb_frame.f_code.co_filename) == _HERE:
        tb = tb.tb_next
    return tb


def _fresh_main(filename):
    import builtins
    import types

    main = types.ModuleType("__main__")
    main.__builtins__ = builtins
    if filename is not None:
        from importlib.machinery import SourceFileLoader

        main.__file__ = filename
        main.__cached__ = None
        main.__loader__ = SourceFileLoader("__main__", filename)
    sys.modules["__main__"] = main
    return main


def _run(kind, target, args):
    if kind == "module":
        import runpy

        sys.argv = ["-m"] + list(args)  # runpy puts the module's path in sys.argv[0], as -m does
        sys.path.insert(0, os.getcwd())
        _fresh_main(None)
        runpy._run_module_as_main(target, alter_argv=True)
        return
    filename = os.path.abspath(target)
    with open(filename, "rb") as f:
        source = f.read()
    sys.argv = [target] + list(args)
    sys.path.insert(0, os.path.dirname(os.path.realpath(filename)))
    main = _fresh_main(filename)
    code = compile(source, filename, "exec", dont_inherit=True)
    exec(code, main.__dict__)


def _runnable_in_place(kind, target):
    if kind == "module":
        return True
    path = os.path.abspath(target)
    if not os.path.isfile(path) or not os.access(path, os.R_OK) or path.endswith((".pyc", ".pyo")):
        return False
    with open(path, "rb") as f:
        return f.read(4) != b"PK\x03\x04"  # a zip application: runpy's business, start it the ordinary way


def _may_leave_idle():
    """Whether this process may switch from SCHED_IDLE back to its normal policy (CAP_SYS_NICE,
    or an RLIMIT_NICE that allows nice 0); without it the program would stay at idle priority."""
    try:
        import resource

        limit = resource.getrlimit(resource.RLIMIT_NICE)[0]
        if limit == resource.RLIM_INFINITY or limit >= 20:
            return True
    except (ImportError, AttributeError, OSError, ValueError):
        pass
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("CapEff:"):
                    return bool(int(line.split()[1], 16) & (1 << 23))  # CAP_SYS_NICE
    except (OSError, ValueError):
        pass
    return False


def _threads():
    try:
        return [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        return [0]


def _set_policy(policy, priority=0):
    """Every thread of this process (threads started meanwhile inherited the idle policy too)."""
    for tid in _threads():
        try:
            os.sched_setscheduler(tid, policy, os.sched_param(priority))
        except ProcessLookupError:
            pass


def _import_at_idle_priority(modules):
    """A standby imports at SCHED_IDLE (it must not slow the running program down) when it may
    return to its normal policy afterwards; then it does, before anything else runs. Returns
    (failed imports, reason it cannot go on or None, whether it imported at idle priority)."""
    if not hasattr(os, "SCHED_IDLE") or not _may_leave_idle():
        return _prewarm(modules), None, False
    policy, priority = os.sched_getscheduler(0), os.sched_getparam(0).sched_priority
    _set_policy(os.SCHED_IDLE)
    failed = _prewarm(modules)
    try:
        _set_policy(policy, priority)
    except OSError as e:
        return failed, "could not leave idle priority: %s" % e, True
    return failed, None, True


def main():
    idle = sys.argv[1] == "--idle"
    if idle:
        del sys.argv[1]
    status_fd, modules = int(sys.argv[1]), sys.argv[2:]
    started, started_with = time.monotonic(), dict(os.environ)
    failed, fatal, idle = _import_at_idle_priority(modules) if idle else (_prewarm(modules), None, False)
    report = {"ready": fatal is None, "seconds": round(time.monotonic() - started, 3), "rss_kib": _rss_kib(),
              "failed": failed, "idle": idle, "error": fatal}
    _tell(status_fd, report, close=fatal is not None)
    if fatal is not None:
        sys.exit(0)  # unusable (a program must not run at idle priority): the bootstrap starts it the ordinary way
    order = _read_order()
    os.chdir(order.get("cwd") or os.getcwd())
    try:
        kind, target, args = _parse(order["argv"])
    except (ValueError, IndexError):
        kind = target = args = None
    reason = ("not a python script or -m command" if kind is None else
              "a pre-warm import failed" if failed else
              "the environment differs from the pre-warmed one" if not _same_env(order["env"], started_with) else
              None if _runnable_in_place(kind, target) else "not a plain source file")
    _tell(status_fd, {"started": "ordinary" if reason else "in_place", "reason": reason}, close=True)
    if reason:
        _exec(order)
    for key in IN_PLACE_ENV_EXCEPTIONS:
        if key in order["env"]:
            os.environ[key] = order["env"][key]
        else:
            os.environ.pop(key, None)
    if hasattr(sys, "orig_argv"):
        sys.orig_argv = list(order["argv"])
    try:
        _run(kind, target, args)
    except SystemExit:
        raise
    except BaseException as e:  # noqa: BLE001 - what Python does with an uncaught exception
        tb = _trimmed(e.__traceback__)
        sys.last_type, sys.last_value, sys.last_traceback = type(e), e, tb
        sys.excepthook(type(e), e.with_traceback(tb), tb)
        if isinstance(e, KeyboardInterrupt):
            import signal

            sys.stdout.flush()
            sys.stderr.flush()
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        raise SystemExit(1)


if __name__ == "__main__":
    main()
