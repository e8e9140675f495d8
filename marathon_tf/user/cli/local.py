"""``marathon-tf local``: the built-in single-machine Marathon + Mesos + Mesos-DNS (``serve``), the web UI
it serves (``ui-install``), and removing what local runs left (``clean``). Heavy modules are imported inside
the commands.
"""

from __future__ import annotations

import click

from marathon_tf.contract.errors import Interrupted, UsageError
from marathon_tf.user import local_options
from marathon_tf.user.cli.params import CTX, DURATION, output_opt

__all__ = ["local"]


@click.group(context_settings=CTX)
def local() -> None:
    """The built-in single-machine Marathon + Mesos-DNS."""


@local.command("serve", context_settings=CTX)
@click.option("--port", type=click.IntRange(0, 65535), default=8080, show_default=True, help="Marathon API port.")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to bind (only loopback unless you say otherwise).")
@click.option("--dns-port", type=click.IntRange(0, 65535), default=8053, show_default=True,
              help="Mesos-DNS DNS port (UDP/TCP).")
@click.option("--dns-http-port", type=click.IntRange(0, 65535), default=8123, show_default=True,
              help="Mesos-DNS HTTP API port.")
@click.option("--state-dir", type=click.Path(file_okay=False), default=None,
              help="Where task sandboxes, job volumes and its state go (started again there, it brings its "
                   "jobs back; default: $MARATHON_TF_STATE_DIR/serve, else "
                   "$XDG_STATE_HOME/marathon-tf/serve, else ~/.local/state/marathon-tf/serve).")
@click.option("--auth", metavar="USER:PASSWORD|token=TOKEN|env", default=None,
              help="Require HTTP basic auth or a token (env: MARATHON_TOKEN or MARATHON_USER/MARATHON_PASSWORD). "
                   "Needed off loopback.")
@click.option("--allow-origin", "allow_origins", multiple=True, metavar="URL",
              help="Also accept browser requests from this origin (e.g. http://localhost:3000); repeatable.")
@click.option("--ui", "ui_dir", type=click.Path(file_okay=False), is_flag=False, flag_value="", default=None,
              metavar="[DIR]", help="Serve the Marathon web UI at /ui/: the build `marathon-tf local ui-install` "
                                    "made (--ui alone), or the mesosphere/marathon-ui build in DIR.")
@local_options.cluster_options(local_options.SERVE_DNS_REFRESH)
@click.option("--marathon-instances", type=click.IntRange(1, 9), default=1, show_default=True, metavar="N",
              help="HA Marathon: N API instances over one state on ports PORT, PORT+1, … (all free ones with "
                   "--port 0), one the leader; standbys proxy to it as Marathon 1.8 does (POST "
                   "/_local/instances/kill crashes the leader).")
@click.option("--election-gap", type=click.FloatRange(0, 600), default=3.0, show_default=True, metavar="SECONDS",
              help="How long after the leader's death (or abdication) another instance is elected; meanwhile "
                   "the standbys answer 502, as Marathon does until ZooKeeper notices (--zk_session_timeout, 10 s).")
def local_serve(port, host, dns_port, dns_http_port, state_dir, auth, allow_origins, ui_dir, marathon_instances,
                election_gap, **cluster_args) -> None:
    """Keep a local Marathon running, so that MARATHON_URL=http://127.0.0.1:8080
    marathon-tf deploy/scale/status/logs/delete work against it across commands.

    Tasks run as processes of this machine: they find this runner's Marathon and Mesos-DNS
    whatever the job file's discovery says; cpus/mem/disk/gpus/ports are enforced only with
    --agent-resources (then a task that fits no agent waits, as on a cluster)."""
    from marathon_tf.local.ports import PortInUse, busy_ports, runner_ports

    try:
        cluster = dict(marathon_instances=marathon_instances, election_gap=election_gap,
                       **local_options.to_cluster(**cluster_args))
    except ValueError as e:
        raise UsageError(str(e)) from None
    options = {"Marathon API": "--port", "Mesos-DNS": "--dns-port", "Mesos-DNS HTTP API": "--dns-http-port"}
    busy = busy_ports(host, runner_ports(port, dns_port, dns_http_port, instances=marathon_instances))  # first
    try:
        if busy:
            raise PortInUse(busy[0][0], host, busy[0][1], busy)
        _local_serve(port, host, dns_port, dns_http_port, state_dir, auth, allow_origins, ui_dir, cluster)
    except PortInUse as e:  # every busy port, in one line, before anything started
        message, hint = e.describe(options)
        raise UsageError(message, hint=hint) from None


def _local_serve(port, host, dns_port, dns_http_port, state_dir, auth, allow_origins, ui_dir, cluster) -> None:
    import threading
    from pathlib import Path

    from marathon_tf.local import serve
    from marathon_tf.local.extras.ui import check_ui_dir
    from marathon_tf.local.security import Security, parse_auth
    from marathon_tf.task.warmpool import WarmPool
    from marathon_tf.user import announce, localstate, output
    from marathon_tf.user.config import state_home
    from marathon_tf.user.localrun import LOCAL_RESOURCES

    if ui_dir == "":  # --ui alone: the build `local ui-install` made
        ui_dir = str(state_home() / localstate.UI_DIR / "build")
        if not (Path(ui_dir) / "index.html").is_file():
            raise UsageError(f"--ui: no web UI build in {ui_dir}",
                             hint="build it once with `marathon-tf local ui-install` (needs the internet and "
                                  "node/npm), or give --ui DIR")
    try:  # local/security.py: what local serve refuses, and why
        security = dict(auth=parse_auth(auth) if auth else None, allow_origins=allow_origins,
                        ui_dir=check_ui_dir(ui_dir) if ui_dir else None)
        Security(host, allow_origins, security["auth"])
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if host not in ("127.0.0.1", "localhost", "::1"):
        output.warn(f"binding {host}: reachable from the network over plain HTTP (credentials are not encrypted)")

    following = threading.Event()  # the jobs' metrics URLs and TensorBoard, printed once each

    def ready(runner) -> None:
        urls = ",".join(runner.marathon_urls)
        output.info(f"Marathon API  {urls}   (export MARATHON_URL={urls})")
        output.info(f"Mesos-DNS     {runner.mesos_dns} (DNS), {runner.mesos_dns_http} (HTTP)")
        output.info(f"sandboxes     {runner.state_dir}/sandboxes    — Ctrl-C stops everything")
        output.info(announce.scrape_hint(runner.marathon_url))
        announce.follow_in_background(runner.marathon_url, security["auth"], output.info, following)
        if ui_dir:
            output.info(f"web UI        {runner.marathon_url}/ui/")
        if not cluster["agent_resources"]:
            output.warn(LOCAL_RESOURCES)

    state = Path(state_dir).absolute() if state_dir else state_home() / "serve"
    held = localstate.hold(state, "local serve")  # `local clean` leaves it alone while it runs
    try:
        signum = serve(port=port, host=host, dns_port=dns_port, dns_http_port=dns_http_port, state_dir=state,
                       on_ready=ready, on_stopping=lambda n, grace: output.info(output.stopping_line(n, grace)),
                       warm_pool=WarmPool, persist=True, **cluster, **security)
    except ValueError as e:  # what the cluster refuses of its options (e.g. agents' addresses on this OS)
        raise UsageError(str(e)) from None
    finally:
        following.set()
        held.release()
    from marathon_tf.user.stopsignals import signal_name

    output.info(f"stopped by {signal_name(signum)}: every task was stopped")
    stopped = Interrupted(f"stopped by {signal_name(signum)}", signum=signum)  # exit 128 + its number
    stopped.shown = True
    raise stopped


@local.command("ui-install", context_settings=CTX)
@click.option("--from-tarball", "tarball", type=click.Path(dir_okay=False, exists=True), default=None,
              help="Build from this copy of the source release (marathon-ui-1.3.1.tar.gz) instead of downloading it.")
def local_ui_install(tarball) -> None:
    """Build the Marathon web UI (mesosphere/marathon-ui 1.3.1) from its source release into the state
    directory, where `local serve --ui` finds it. Needs node and npm, and the internet once (the source
    from GitHub, its dependencies from the npm registry); takes minutes. Prints the build's folder."""
    from pathlib import Path

    from marathon_tf.user import localstate, output, uibuild
    from marathon_tf.user.config import state_home

    build = uibuild.install(state_home() / localstate.UI_DIR, tarball=Path(tarball) if tarball else None,
                            log=output.info)
    click.echo(str(build))
    output.info("serve it with: marathon-tf local serve --ui   (then open the Marathon URL it prints)")


@local.command("clean", context_settings=CTX)
@click.option("--older-than", type=DURATION, default=None, metavar="DURATION",
              help="Only runs idle for at least this long, e.g. 7d, 12h (default: every ended run).")
@click.option("--dry-run", is_flag=True, help="List what would be removed; remove nothing.")
@click.option("--serve-state", "serve", multiple=True, metavar="NAME",
              help="Also remove this stopped `local serve`'s state folder: every job it remembers, their volumes "
                   "and checkpoints, its sandboxes. NAME: the folder in the state directory (serve, by default) "
                   "or its path. Repeatable.")
@click.option("--ui", "ui", is_flag=True, help="Also remove the web UI build `local ui-install` made.")
@output_opt
def local_clean(older_than, dry_run, serve, ui, fmt) -> None:
    """Remove the folders of ended `deploy --local` runs, in the state directory
    ($MARATHON_TF_STATE_DIR, else $XDG_STATE_HOME/marathon-tf, else ~/.local/state/marathon-tf):
    each run's sandboxes (the tasks' output), volumes (its checkpoints) and pre-warm logs.

    Never removed: a run whose runner is alive (its lock says so), or whose runner's process still
    exists, stopped or not; a run any live process uses (a task working in it, a file in it open);
    a `local serve`'s state folder
    (the jobs it remembers, their volumes and checkpoints), stopped or running, unless named with
    --serve-state (and then only when stopped); the web UI build, unless --ui."""
    from marathon_tf.user import localstate, output, uibuild
    from marathon_tf.user.config import state_home

    home = state_home()
    removed, kept = localstate.clean(home, older_than=older_than, dry_run=dry_run, serve=serve)
    built = uibuild.remove(home / localstate.UI_DIR, dry_run=dry_run) if ui else None
    if fmt == "json":
        output.emit_json({"stateDir": str(home), "dryRun": dry_run, "removed": [r.to_dict() for r in removed],
                          "kept": [r.to_dict() for r in kept],
                          **({"ui": {"path": str(built[0]), "bytes": built[1]} if built else None} if ui else {})})
    else:
        output.clean_report(home, removed, kept, dry_run=dry_run)
        if ui:
            output.ui_clean_report(home / localstate.UI_DIR, built, dry_run=dry_run)
