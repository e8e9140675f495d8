"""The pre-warmed interpreter's side (runs in the *training program's* Python, stdlib only).

A *fork server*: ``<python> [options] prewarm_child.py (--fd N | --listen N [--linger S])
--interpreter PATH --options JSON MODULE...`` imports every MODULE once (an import that fails is
reported and forgotten), then forks a fresh process for every program it is asked to start, so no
start after the first pays for the import (see :mod:`marathon_tf.task.prewarm`, the bootstrap's side,
and :mod:`marathon_tf.task.warmpool`, the local runner's, which shares one server between the
tasks of one machine).

Protocol: AF_UNIX SOCK_SEQPACKET, one JSON object per message.

* server -> client, once the imports are done: ``{"hello": {"ready": true, "seconds": ..., "rss_kib": ...,
  "failed": {"module": "ImportError: ..."}, "pid": ...}}``;
* client -> server: ``{"fork": {"argv": [...], "env": {...}, "cwd": "...", "interpreter": "...",
  "options": [...], "modules": [...]}}`` with two file descriptors (SCM_RIGHTS): the program's
  stdout and stderr;
* server -> client: ``{"forked": pid, "started": "in_place" | "ordinary", "reason": ...}``, and
  when that process ended ``{"exited": pid, "code": c}`` (``c`` as :class:`subprocess.Popen`
  reports it: the exit code, or -N when killed by signal N).
* a client that goes away (closes, or dies) takes its programs with it: SIGKILL to their groups.
  With ``--fd`` (one client, the bootstrap) the server then exits; with ``--listen`` (the local
  runner's shared server) it exits after ``--linger`` seconds without clients or programs.

The forked process is started like a program the bootstrap starts itself: its own session and
process group, stdin /dev/null, stdout/stderr the descriptors it was given, PR_SET_PDEATHSIG
(SIGKILL) relative to this server, which has it relative to whoever started it. It then runs the
program as ``python [options] script.py args...`` / ``python [options] -m module args...``
would: ``sys.argv``, ``sys.path[0]``, a fresh ``__main__`` module, ``os.environ`` (the task's,
TF_CONFIG included), the working directory, exit codes, uncaught exceptions (the traceback shows
the program's frames only, exit 1; KeyboardInterrupt dies of SIGINT like Python does).

Whenever running in place could differ from a fresh interpreter it does not try: the forked
process ``exec``\\ s the command instead (the ordinary start, import included). That is the
case when a pre-warm import failed, when the command asks for another interpreter, other options
or other modules, when the environment differs from the one this server started with in
anything but the per-task variables (:func:`per_task`: TF_CONFIG, HOST, PORT*, MESOS_*,
MARATHON_*, MTF_* — set by Marathon, Mesos and marathon-tf — and PWD, OLDPWD, SHLVL, ``_`` — set
by the shell that starts the task; no library reads them at import, while Python and many
libraries read the rest at start-up), or when the target is not a plain source file (a
directory, a zip file, a ``.pyc``, a file that cannot be read).

Deliberately compatible with old Pythons (3.7+) and free of marathon_tf imports: the training
program's interpreter need not have marathon_tf installed.
"""

import os
import sys

_HERE = os.path.realpath(__file__)
if sys.path and sys.path[0] and os.path.realpath(sys.path[0]) == os.path.dirname(_HERE):
    del sys.path[0]  # this file's directory (marathon_tf/task/) must not shadow the program's modules

import json  # noqa: E402
import re  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

_PER_TASK = re.compile(r"^(TF_CONFIG|HOST|PWD|OLDPWD|SHLVL|_|PORTS?|PORT\d+|PORT_\w+|MESOS_\w+|MARATHON_\w+|MTF_\w+)$")
MAX_MESSAGE = 1 << 20


def per_task(name):
    """Whether ``name`` is a variable that differs between the tasks of one job and that no
    library reads at import (Marathon's, Mesos', marathon-tf's own, TF_CONFIG)."""
    return bool(_PER_TASK.match(name))


def shared_env(env):
    """``env`` without its per-task variables: what a fork server for these tasks starts with."""
    return {k: v for k, v in env.items() if not per_task(k)}


def _exec_environment():
    """The environment this process was started with, before the interpreter changed its own
    (PEP 538 sets LC_CTYPE in a C locale): /proc/self/environ; os.environ where there is none."""
    try:
        with open("/proc/self/environ", "rb") as f:
            data = f.read()
    except OSError:
        return dict(os.environ)
    env = {}
    for item in data.split(b"\0"):
        if b"=" in item:
            key, value = item.split(b"=", 1)
            env[os.fsdecode(key)] = os.fsdecode(value)
    return env


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


def _trimmed(tb):
    """The traceback without this file's frames (Python shows only the program's)."""
    while tb is not None and os.path.realpath(tb.tb_frame.f_code.co_filename) == _HERE:
        tb = tb.tb_next
    return tb


def _fresh_main(filename):
    import builtins
    import types

    main: Any = types.ModuleType("__main__")  # a module's dunders are set as CPython's own __main__ has them
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
        runpy._run_module_as_main(target, alter_argv=True)  # type: ignore[attr-defined]  # what ``-m`` runs
        return
    filename = os.path.abspath(target)
    with open(filename, "rb") as f:
        source = f.read()
    sys.argv = [target] + list(args)
    sys.path.insert(0, os.path.dirname(os.path.realpath(filename)))
    main = _fresh_main(filename)
    code = compile(source, filename, "exec", dont_inherit=True)
    exec(code, main.__dict__)


def _exec(order):
    """The ordinary start: replace this process by the command (same pid, pipes, group)."""
    import signal

    sys.stdout.flush()
    sys.stderr.flush()
    for name in ("SIGPIPE", "SIGXFSZ"):  # what subprocess restores before an exec (Python ignores them)
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_DFL)
    try:
        os.execvpe(order["argv"][0], order["argv"], order["env"])
    except OSError as e:  # what a shell says, with its exit code
        sys.stderr.write("cannot execute %r: %s\n" % (order["argv"][0], e.strerror or e))
        sys.stderr.flush()
        os._exit(127 if isinstance(e, FileNotFoundError) else 126)


def _same_env(env, started_with):
    """Whether ``env`` is what this server started with, per-task variables aside. (Compared with
    the environment before the pre-warm imports: what those changed, the program's own imports
    would have changed the same way.)"""
    return shared_env(env) == shared_env(started_with)


def _runnable_in_place(kind, target, cwd):
    if kind == "module":
        return True
    path = os.path.join(cwd or os.getcwd(), target)
    if not os.path.isfile(path) or not os.access(path, os.R_OK) or path.endswith((".pyc", ".pyo")):
        return False
    with open(path, "rb") as f:
        return f.read(4) != b"PK\x03\x04"  # a zip application: runpy's business, start it the ordinary way


def _why_not_in_place(order, server):
    """None when ``order`` can run in this interpreter, else why it starts the ordinary way."""
    try:
        kind, target, _ = _parse(order["argv"])
    except (ValueError, IndexError, KeyError):
        return "not a python script or -m command"
    if order.get("interpreter") != server["interpreter"] or list(order.get("options") or []) != server["options"]:
        return "another interpreter or other interpreter options"
    if list(order.get("modules") or []) != server["modules"]:
        return "other modules to pre-import"
    if server["failed"]:
        return "a pre-warm import failed"
    if not _same_env(order.get("env") or {}, server["env"]):
        return "the environment differs from the pre-warmed one"
    try:
        if not _runnable_in_place(kind, target, order.get("cwd")):
            return "not a plain source file"
    except OSError:
        return "not a plain source file"
    return None


# -- the server ---------------------------------------------------------------------------------

def _send(sock, message):
    try:
        sock.send(json.dumps(message).encode())
        return True
    except OSError:
        return False


def _receive(sock):
    """(message, fds) of one message; (None, []) when the client is gone."""
    import array
    import socket

    fds = array.array("i")
    try:
        data, ancillary, _, _ = sock.recvmsg(MAX_MESSAGE, socket.CMSG_SPACE(4 * fds.itemsize))
    except OSError:
        return None, []
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[: len(payload) - (len(payload) % fds.itemsize)])
    if not data:
        for fd in fds:
            os.close(fd)
        return None, []
    try:
        message = json.loads(data.decode("utf-8"))
    except ValueError:
        message = None
    return message, list(fds)


def _kill_group(pid):
    import signal

    for kill in (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)
        except OSError:
            pass


def _die_with_parent():
    """PR_SET_PDEATHSIG SIGKILL (Linux): this process never outlives the one that forked it."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, 9)
    except (OSError, AttributeError):
        pass


# Over ruff's complexity limit (C901), as one piece: the fork server's event loop, stdlib only, in the program's own
# interpreter.
def _serve(server, listener, client, linger):  # noqa: C901
    """Fork a process for every order until no client is left; returns (order, fds) in a forked
    process (which then becomes the program), never in the server."""
    import select
    import signal

    wake_r, wake_w = os.pipe()
    for fd in (wake_r, wake_w):
        os.set_blocking(fd, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_w)
    clients: dict[Any, set[int]] = {}   # socket -> set of the pids it started
    owner: dict[int, Any] = {}          # pid -> socket
    if client is not None:
        clients[client] = set()
        _send(client, {"hello": server["hello"]})
    idle_since = time.monotonic()

    def drop(sock):
        for pid in clients.pop(sock, ()):
            _kill_group(pid)  # its client went away: so does the program (PDEATHSIG, one level up)
        sock.close()

    while True:
        if not clients and not owner:
            if listener is None or time.monotonic() - idle_since >= linger:
                os._exit(0)
        else:
            idle_since = time.monotonic()
        watched = list(clients) + [wake_r] + ([listener] if listener is not None else [])
        try:
            ready, _, _ = select.select(watched, [], [], 1.0)
        except InterruptedError:
            ready = []
        for item in ready:
            if item is wake_r:
                try:
                    while os.read(wake_r, 512):
                        pass
                except OSError:
                    pass
            elif item is listener:
                try:
                    sock, _ = listener.accept()
                except OSError:
                    continue
                clients[sock] = set()
                _send(sock, {"hello": server["hello"]})
            else:
                message, fds = _receive(item)
                if message is None:
                    drop(item)
                    continue
                order = message.get("fork") if isinstance(message, dict) else None
                if not isinstance(order, dict) or len(fds) != 2:
                    for fd in fds:
                        os.close(fd)
                    _send(item, {"error": "a fork order takes a JSON order and two file descriptors"})
                    continue
                reason = _why_not_in_place(order, server)
                sys.stdout.flush()
                sys.stderr.flush()
                try:
                    pid = os.fork()
                except OSError as e:
                    for fd in fds:
                        os.close(fd)
                    _send(item, {"error": "fork: %s" % e})
                    continue
                if pid == 0:  # the program's process
                    order["interpreter_env"] = server["added"]
                    signal.set_wakeup_fd(-1)
                    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                    for fd in (wake_r, wake_w):
                        os.close(fd)
                    for sock in list(clients) + ([listener] if listener is not None else []):
                        sock.close()
                    order["reason"] = reason
                    return order, fds
                for fd in fds:
                    os.close(fd)
                clients[item].add(pid)
                owner[pid] = item
                _send(item, {"forked": pid, "started": "ordinary" if reason else "in_place", "reason": reason})
        while owner:  # reap
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            sock = owner.pop(pid, None)
            if sock is not None and sock in clients:
                clients[sock].discard(pid)
                code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
                _send(sock, {"exited": pid, "code": code})


def _sigterm(ignore):
    """SIGTERM as the program starts with it: ignored in a job with save rounds
    (``marathon_tf.task.supervisor.ignore_sigterm``),
    else its default (a bootstrap's own server ignores it, and its forks would inherit that)."""
    import signal

    signal.signal(signal.SIGTERM, signal.SIG_IGN if ignore else signal.SIG_DFL)


def _become(order, fds, server_pid):
    """In the forked process: the program's session, descriptors, directory and environment."""
    os.setsid()
    _die_with_parent()
    if os.getppid() != server_pid:  # the server died before the parent-death signal was set
        os._exit(137)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(fds[0], 1)
    os.dup2(fds[1], 2)
    for fd in fds:
        os.close(fd)
    os.chdir(order.get("cwd") or os.getcwd())
    env = order.get("env") or {}
    _sigterm(order.get("ignore_term"))
    if order.get("pidfile"):  # the local agent's kill reaches it there, as a real agent's reaches its bootstrap's child
        try:
            with open(order["pidfile"], "w") as f:
                f.write("%d\n" % os.getpid())
        except OSError:
            pass
    if order.get("reason"):
        _exec(order)
    os.environ.clear()
    os.environ.update(env)
    os.environ.update(order.get("interpreter_env") or {})  # what a fresh interpreter would add, too
    _reseed()


def _reseed():
    """Forked processes share their parent's random state; fresh interpreters do not. Python's
    ``random`` reseeds itself after a fork; NumPy's global generator (seeded from the OS when
    ``numpy`` is imported) does not: reseed it the same way, or every task would draw the same
    numbers."""
    legacy = sys.modules.get("numpy.random")
    if legacy is not None:
        try:
            legacy.seed()
        except Exception:  # noqa: BLE001 - a numpy without it: nothing to reseed
            pass


def _options(argv):
    values = {"--fd": None, "--listen": None, "--linger": "300", "--interpreter": sys.executable, "--options": "[]"}
    rest = list(argv)
    while rest and rest[0] in values:
        values[rest[0]] = rest[1]
        rest = rest[2:]
    return values, rest


def main():
    import socket

    values, modules = _options(sys.argv[1:])
    started, started_with = time.monotonic(), _exec_environment()
    added = {k: v for k, v in os.environ.items() if started_with.get(k) != v}  # by this interpreter itself
    if values["--listen"] is not None:
        listener = socket.socket(fileno=int(values["--listen"]))
        client = None
    else:
        listener = None
        client = socket.socket(fileno=int(values["--fd"]))
    failed = _prewarm(modules)
    server = {"interpreter": values["--interpreter"], "options": json.loads(values["--options"]),
              "modules": modules, "failed": failed, "env": started_with, "added": added,
              "hello": {"ready": True, "seconds": round(time.monotonic() - started, 3), "rss_kib": _rss_kib(),
                        "failed": failed, "pid": os.getpid()}}
    import warnings

    server_pid = os.getpid()
    with warnings.catch_warnings():  # Python 3.12+ warns on fork() with threads; TensorFlow has an idle one
        warnings.simplefilter("ignore", DeprecationWarning)
        order, fds = _serve(server, listener, client, float(values["--linger"]))
    _become(order, fds, server_pid)
    kind, target, args = _parse(order["argv"])
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
        raise SystemExit(1) from None  # the traceback is already printed, as Python would


if __name__ == "__main__":
    main()
