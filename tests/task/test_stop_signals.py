"""The bootstrap's stop signals (marathon_tf.task.supervisor.relay_stop_signals)."""

from __future__ import annotations

import subprocess
import sys

import pytest

RELAY = """
import os, signal, sys, threading, time
from marathon_tf.task.supervisor import relay_stop_signals
stop = threading.Event()
if sys.argv[1] == "relay":
    restore = relay_stop_signals(lambda signum: stop.set())
else:  # the handler sets the stop itself, in the main thread (what the bootstrap did)
    signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())
with stop._cond:  # the main thread holds the Event's lock, as inside Event.wait or Event.set
    os.kill(os.getpid(), signal.SIGTERM)
    os.kill(os.getpid(), signal.SIGTERM)  # the parent-death SIGTERM right after the group's
    time.sleep(0.2)  # the handlers run here
print("stopped" if stop.wait(5) else "not stopped", flush=True)
"""


def test_a_stop_signal_cannot_deadlock_the_bootstrap():
    """A task's stop sends SIGTERM to its process group and, as its ``sh -c`` dies, the parent-death
    SIGTERM: a handler that set the stop Event in the main thread ran nested in the first one (or
    while the main thread held the Event's lock) and deadlocked; the task was SIGKILLed at the end of
    its grace period, its program never told (seen under load in
    test_sigterm_gives_the_training_program_its_grace_period: py-spy showed the main thread in
    ``Event.set`` inside ``Event.set``). The relay sets it from a thread of its own."""
    done = subprocess.run([sys.executable, "-c", RELAY, "relay"], capture_output=True, text=True, timeout=30)
    assert done.stdout.strip() == "stopped", done.stderr


def test_the_plain_handler_is_the_hazard():
    """The same with the handler that sets the Event itself: it hangs for good (what the test above
    guards against, so that it cannot pass for another reason)."""
    with pytest.raises(subprocess.TimeoutExpired):
        subprocess.run([sys.executable, "-c", RELAY, "handler"], capture_output=True, text=True, timeout=3)


EXIT = """
import sys, time
from concurrent.futures import ThreadPoolExecutor
pool = ThreadPoolExecutor(max_workers=1)
pool.submit(time.sleep, 60)  # a pool's thread in a lookup that does not come back (the rendezvous' group read)
time.sleep(0.2)
pool.shutdown(wait=False, cancel_futures=True)  # what the rendezvous' close does
print("ran")  # (not flushed yet)
if sys.argv[1] == "exit_now":
    from marathon_tf.task.bootstrap import exit_now
    exit_now(143)
sys.exit(143)
"""


def test_a_bootstrap_whose_run_is_over_ends_its_process_at_once():
    """Python's exit waits for every pool's thread: one still in a lookup would keep a stopped bootstrap alive
    into its grace period (read as the likely cause of a CI run's placed tasks not gone 10 s after their SIGTERM;
    not reproduced). ``main`` ends the process once the run is over, what it printed flushed."""
    done = subprocess.run([sys.executable, "-c", EXIT, "exit_now"], capture_output=True, text=True, timeout=30)
    assert (done.returncode, done.stdout) == (143, "ran\n"), done.stderr


def test_the_interpreters_own_exit_is_the_hazard():
    """The same with ``sys.exit``: the process waits for the pool's thread (what the test above guards against)."""
    with pytest.raises(subprocess.TimeoutExpired):
        subprocess.run([sys.executable, "-c", EXIT, "sys.exit"], capture_output=True, text=True, timeout=3)
