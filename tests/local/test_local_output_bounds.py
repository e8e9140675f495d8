"""Output of any line length is streamed with bounded memory: the bootstrap's pump passes a huge line
through in pieces, the local runner's tailer cuts it at 64 KiB and says so."""

from __future__ import annotations

import io
import sys

from marathon_tf.task.supervisor import LINE_LIMIT, Trainer
from marathon_tf.user.localrun import SandboxTailer


class _CountingSink(io.RawIOBase):
    """Counts bytes and remembers the largest single write."""

    def __init__(self):
        self.total = self.largest = 0
        self.head = b""

    def writable(self):
        return True

    def write(self, b):
        self.total += len(b)
        self.largest = max(self.largest, len(b))
        if len(self.head) < 100:
            self.head += bytes(b[:100])
        return len(b)


def test_trainer_passes_a_huge_line_through_in_bounded_pieces():
    size = 20 * 1024 * 1024
    code = (f"import sys\nfor _ in range({size // 1024}): sys.stdout.write('y' * 1024)\n"
            "print(' step=7')\nsys.stderr.write('e' * 100000 + '\\n')\nsys.exit(3)")
    out, err = _CountingSink(), _CountingSink()
    steps = []
    trainer = Trainer([sys.executable, "-c", code], {"PATH": "/usr/bin:/bin"}, stdout=out, stderr=err,
                      on_step=steps.append)
    trainer.start()
    assert trainer.wait(60) == 3
    assert out.total == size + len(" step=7\n") and out.largest <= LINE_LIMIT  # every byte, in pieces
    assert steps == [7]
    tail = trainer.stderr_tail()
    assert tail.endswith(" [line cut]") and len(tail) < 2100


def test_tailer_cuts_long_lines_and_keeps_going(tmp_path):
    box = tmp_path / "sandboxes" / "job_worker-0.instance-1._app.1"
    box.mkdir(parents=True)
    (box / "stderr").write_bytes(b"")
    with open(box / "stdout", "wb") as f:
        f.write(b"first\n")
        f.write(b"z" * (3 * 1024 * 1024) + b"\n")  # 3 MiB line, longer than a read chunk
        f.write(b"after\n" + b"q" * 10 + b"\n" + b"w" * 200_000)  # and an unfinished long last line
    lines = []
    tailer = SandboxTailer(tmp_path, lambda task, stream, line: lines.append((task, stream, line)))
    tailer.poll()
    with open(box / "stdout", "ab") as f:
        f.write(b"w" * 10 + b"\nend\n")
    tailer.poll(final=True)
    texts = [line for _, _, line in lines]
    assert texts[0] == "first"
    cut = f" [marathon-tf: line longer than 64 KiB cut here; the whole line is in {box / 'stdout'}]"
    assert texts[1] == "z" * 65536 + cut
    assert texts[2:4] == ["after", "q" * 10]
    assert texts[4] == "w" * 65536 + cut
    assert texts[5:] == ["end"]
    assert {task for task, _, _ in lines} == {"worker-0"}


def test_a_tailer_given_a_job_reads_only_that_jobs_sandboxes(tmp_path):
    """A cluster that runs two jobs (a test's blocker beside the job it holds back): each one's tailer says only
    its own tasks' lines, though both have a worker-0 (their sandboxes: ``<group path>_<task>.<instance>``)."""
    for job, root in (("mnist", tmp_path / "sandboxes"), ("blocker", tmp_path / "agents" / "agent-4" / "sandboxes"),
                      ("ml_mnist", tmp_path / "sandboxes"), ("mnist2", tmp_path / "sandboxes")):
        box = root / f"{job}_worker-0.instance-1._app.1"
        box.mkdir(parents=True)
        (box / "stdout").write_text(f"I am {job}\n")
    seen: dict[str | None, list[str]] = {}
    for job in ("mnist", "blocker", "ml/mnist", None):
        tailer = SandboxTailer(tmp_path, lambda task, stream, line, job=job: seen.setdefault(job, []).append(line),
                               job=job)
        tailer.poll(final=True)
    everything = sorted(seen.pop(None))
    assert seen == {"mnist": ["I am mnist"], "blocker": ["I am blocker"], "ml/mnist": ["I am ml_mnist"]}, seen
    assert everything == ["I am blocker", "I am ml_mnist", "I am mnist", "I am mnist2"]
