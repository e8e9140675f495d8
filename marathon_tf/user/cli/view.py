"""The verbs that look at jobs on Marathon, changing nothing: ``status`` (also ``--watch``), ``events`` (what
happened to a job, in time order), ``list`` (the marathon-tf jobs) and ``logs`` (task output from the
agents' sandboxes).
"""

from __future__ import annotations

import click

from marathon_tf.contract.errors import UsageError
from marathon_tf.user.cli.follow import follow_job, raise_for_outcome
from marathon_tf.user.cli.params import (
    CTX,
    DURATION,
    VERB_LIMIT,
    connection_options,
    mesos_opt,
    output_opt,
    verb_timeout_opt,
)

__all__ = ["status", "events", "list_jobs", "logs"]


@click.command(context_settings=CTX)
@click.argument("job", required=False)
@connection_options
@click.option("--watch", "follow", is_flag=True,
              help="Follow the job until it ends (Ctrl-C to stop); exit 0 Succeeded, 1 Failed, 4 NotPlaced.")
@click.option("-o", "--output", "fmt", type=click.Choice(["text", "wide", "json"]), default="text",
              show_default=True, help="text fits 80 columns; wide adds health, phase, rate and task ids.")
@click.option("--timeline", is_flag=True,
              help="Add the timeline: the start's phases and every recovery (cause, restart, training again).")
@click.option("--timeout", type=DURATION, default=None, metavar="DURATION",
              help=f"Give up after this long (exit 3); default {VERB_LIMIT:g}s, with --watch none.")
@mesos_opt
def status(connection, job, follow, fmt, timeline, timeout, mesos_url) -> None:
    """Show a job: state, progress (step S/T, steps/s, ETA), logdir, tasks waiting for a peer,
    stragglers, and per task its state, host:port, step, restarts, age and last failure. A job that
    waits to be placed: per role how many tasks are placed and why the rest wait, and its admission
    deadline; past it the job is released (NotPlaced), and a Queued one whose next attempt is due is
    submitted again."""
    from marathon_tf.user import output

    marathon = connection.marathon(limit=None if follow else timeout or VERB_LIMIT, mesos=mesos_url)
    name = marathon.resolve(job)
    if follow:
        st = follow_job(marathon, name, None, wait=True, timeout=timeout, decide=False)
        st = st.updated(timeline=marathon.timeline(name, st)) if timeline else st
    else:
        st = marathon.status(name, timeline=timeline)
    shown = st.to_dict()
    if fmt == "json":
        output.emit_json(shown)
    else:
        output.status_table(shown, wide=fmt == "wide")
        if timeline:
            click.echo("\n" + output.timeline_text(shown["timeline"]))
    if follow:
        raise_for_outcome(st)


@click.command(context_settings=CTX)
@click.argument("job", required=False)
@connection_options
@output_opt
@verb_timeout_opt
def events(connection, job, fmt, timeout) -> None:
    """What happened to JOB, in time order (like kubectl describe): its start, every failure with
    its whole message, hangs, restarts, preemptions, scale, placement waits, the end."""
    from marathon_tf.user import output

    found = connection.marathon(limit=timeout or VERB_LIMIT).events(job)
    if fmt == "json":
        output.emit_json(found)
    else:
        click.echo(output.events_text(found["events"], found["omitted"]))


@click.command("list", context_settings=CTX)
@connection_options
@output_opt
@verb_timeout_opt
def list_jobs(connection, fmt, timeout) -> None:
    """List the marathon-tf jobs on Marathon."""
    from marathon_tf.user import output

    rows = [row.to_dict() for row in connection.marathon(limit=timeout or VERB_LIMIT).jobs()]
    if fmt == "json":
        output.emit_json(rows)
    else:
        output.jobs_table(rows)


@click.command(context_settings=CTX)
@click.argument("job")
@click.argument("task", required=False)
@connection_options
@click.option("-f", "--follow", "follow_", is_flag=True,
              help="Keep printing new output, also of relaunched tasks, until the job ends (exit 0).")
@click.option("-p", "--previous", is_flag=True,
              help="The task's instance before the current (or last) one: a restarted or earlier run.")
@click.option("--stream", type=click.Choice(["stdout", "stderr", "both"]), default="both", show_default=True,
              help="Which of the task's files; both are printed on stdout.")
@click.option("--tail", "tail_lines", type=click.IntRange(min=-1), default=-1, metavar="N",
              help="Only the last N lines of each stream of each task (default: all): with --stream both, up "
                   "to N of stdout then N of stderr, as the Python API's logs(tail=N).")
@click.option("--since", type=DURATION, default=None, metavar="DURATION",
              help="Only task instances (sandboxes) that wrote output within DURATION (90s, 10m, 2h): Mesos "
                   "keeps no time per line, so whole instances are chosen; add --tail for their last lines.")
@click.option("--agent-port", type=click.IntRange(1, 65535), default=5051, show_default=True,
              envvar="MESOS_AGENT_PORT", show_envvar=True, help="The Mesos agents' HTTP port.")
@click.option("--agent-url", default=None, help="Read from this agent URL instead of <task host>:<agent port>.")
@click.option("--timeout", type=DURATION, default=None, metavar="DURATION",
              help=f"Give up after this long (exit 3); default {VERB_LIMIT:g}s, with -f none.")
def logs(connection, job, task, follow_, previous, stream, tail_lines, since, agent_port, agent_url, timeout) -> None:
    """Print a job's task output (TASK like worker-1; all tasks if left out), read from the
    Mesos agents' sandboxes (and from the local runner's), also after the task ended.

    Every line is printed on stdout as `[worker-1] …`; errors go to stderr (exit 1: a task or instance
    that has no output to read; exit 2: a job or task that does not exist, conflicting options).
    A task's stdout comes before its stderr (two files without times: see the note it prints).
    """
    from marathon_tf.user import output

    if since is not None and previous:
        raise UsageError("--since and --previous choose instances in two ways: give one of them")
    marathon = connection.marathon(limit=None if follow_ else timeout or VERB_LIMIT)
    first: dict[str, str] = {}  # task -> the stream it printed first
    noted = False
    try:
        for line in marathon.logs(job, task, stream=stream, tail=None if tail_lines < 0 else tail_lines,
                                  follow=follow_, previous=previous, since=since, agent_port=agent_port,
                                  agent_url=agent_url):
            if not noted and first.setdefault(line.task, line.stream) != line.stream:
                noted = True
                output.info(output.TWO_FILES)
            click.echo(f"[{line.task}] {line.text}")
    except KeyboardInterrupt:
        return
