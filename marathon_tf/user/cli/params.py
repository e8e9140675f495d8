"""What every ``marathon-tf`` command module shares, so that the verbs parse alike: the context settings,
the DURATION type, the output option (``-o``), the connection options (``--marathon``, the credentials,
TLS, ``--max-response``: one decorator whose values go to ``ctx.obj``, a :class:`Connection`, from which
the API object is built once per command), and the options several verbs take (``--timeout``,
``--mesos``, ``--wait-for-resources``, ``--templates``). Imports nothing heavy.
"""

from __future__ import annotations

from typing import Any

import click

__all__ = ["CTX", "DURATION", "output_opt", "Connection", "connection_options", "VERB_LIMIT", "verb_timeout_opt",
           "mesos_opt", "resources_opt", "templates_opt"]

CTX = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


class Duration(click.ParamType):
    """Seconds, or a duration with units: 90, 90s, 5m, 1h30m."""

    name = "DURATION"

    def convert(self, value, param, ctx):
        if isinstance(value, (int, float)):
            return float(value)
        from marathon_tf.contract.progress import parse_duration

        try:
            return parse_duration(str(value))
        except ValueError as e:
            self.fail(str(e), param, ctx)


DURATION = Duration()

output_opt = click.option("-o", "--output", "fmt", type=click.Choice(["text", "json"]), default="text",
                          show_default=True, help="Output format on stdout.")


class Connection:
    """A verb's connection options (``ctx.obj``: each option's callback puts its value here), and
    the API's :class:`~marathon_tf.user.api.Marathon` built from them, once (:meth:`marathon`)."""

    def __init__(self) -> None:
        self.options: dict[str, Any] = {}
        self.max_response: int | None = None
        self._marathon: Any = None

    def marathon(self, *, limit: float | None = None, mesos: str | None = None):
        """The API object for this Marathon; every request is over within ``limit`` seconds from now
        (None: each request within its own deadline only); ``mesos``: the master read for the cluster's
        capacity."""
        if self._marathon is None:
            from marathon_tf.user import output
            from marathon_tf.user.api import Marathon, connect

            o = self.options
            if o.get("insecure"):
                output.warn("TLS verification is off (--insecure): the connection to Marathon can be intercepted")
            client = connect(o.get("url"), user=o.get("user"), password=o.get("password"), token=o.get("token"),
                             ca_bundle=o.get("ca_bundle"), insecure=bool(o.get("insecure")),
                             max_bytes=self.max_response)
            client.limit(limit)
            self._marathon = Marathon(client=client, mesos=mesos)
        return self._marathon


def _remember(name: str):
    def callback(ctx: click.Context, param: click.Parameter, value: Any) -> None:
        ctx.ensure_object(Connection).options[name] = value

    return callback


def _max_response(ctx, param, value):
    connection = ctx.ensure_object(Connection)
    if value is None:
        return None
    from marathon_tf.marathon.transport import parse_size

    try:
        connection.max_response = parse_size(value)
    except ValueError as e:
        raise click.BadParameter(str(e), ctx, param) from None
    return None


def connection_options(f):
    """--marathon and credentials, each fed by an environment variable, for every verb that talks to
    Marathon: their values go to ``ctx.obj`` (a :class:`Connection`), which the verb gets first."""
    opts = [
        click.option("--marathon", envvar="MARATHON_URL", show_envvar=True, metavar="URL[,URL…]",
                     expose_value=False, callback=_remember("url"),
                     help="Marathon base URL; a comma-separated list fails over to the next on errors."),
        click.option("--user", envvar="MARATHON_USER", show_envvar=True, expose_value=False,
                     callback=_remember("user"), help="HTTP basic auth user."),
        click.option("--password", envvar="MARATHON_PASSWORD", show_envvar=True, expose_value=False,
                     callback=_remember("password"),
                     help="HTTP basic auth password (prefer the environment variable)."),
        click.option("--token", envvar="MARATHON_TOKEN", show_envvar=True, expose_value=False,
                     callback=_remember("token"), help="DC/OS token, sent as 'Authorization: token=…'."),
        click.option("--ca-bundle", envvar="MARATHON_CA_BUNDLE", show_envvar=True, type=click.Path(dir_okay=False),
                     expose_value=False, callback=_remember("ca_bundle"),
                     help="CA bundle to verify Marathon's TLS certificate."),
        click.option("--insecure", is_flag=True, expose_value=False, callback=_remember("insecure"),
                     help="Do not verify TLS certificates (not recommended)."),
        click.option("--max-response", envvar="MARATHON_TF_MAX_RESPONSE", show_envvar=True, metavar="SIZE",
                     expose_value=False, callback=_max_response,
                     help="Refuse a Marathon answer larger than this, e.g. 64M (default 32M)."),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return click.pass_obj(f)


#: How long a verb that does not wait for a job may take at most, unless ``--timeout`` says otherwise.
VERB_LIMIT = 120.0


verb_timeout_opt = click.option("--timeout", type=DURATION, default=None, metavar="DURATION",
                                help=f"Give up after this long (exit 3); default {VERB_LIMIT:g}s.")

mesos_opt = click.option("--mesos", "mesos_url", envvar="MESOS_URL", show_envvar=True, metavar="URL",
                         help="The Mesos master, read for the cluster's capacity (default: the one Marathon's "
                              "/v2/info names; skipped with a note when it cannot be read).")
resources_opt = click.option("--wait-for-resources/--no-wait-for-resources", "wait_for_resources", default=True,
                             show_default=True,
                             help="A job that does not fit what the cluster has free now waits (up to "
                                  "admission.timeout), or is refused (exit 4, nothing sent).")
templates_opt = click.option("--templates", "templates_dir", type=click.Path(file_okay=False, exists=True),
                             envvar="MARATHON_TF_TEMPLATES", show_envvar=True,
                             help="Directory of Jinja templates overriding app_templates/.")
