"""What every ``marathon-tf`` command module shares: the context settings, the DURATION type and the
output option (so that the verbs, :mod:`marathon_tf.user.cli`, and the local cluster's,
:mod:`marathon_tf.user.cli_local`, parse alike). Imports nothing heavy."""

from __future__ import annotations

import click

__all__ = ["CTX", "DURATION", "output_opt"]

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
