"""Untrusted ``job.json`` → an immutable, validated :class:`JobSpec`.

Validation is done with marshmallow; unknown keys are errors (every one of
them is listed), and every problem is reported as one line naming the file and
the field path, e.g. ``job.json: roles.worker.gpus: must be >= 0``.

Pure: it reads the job file (and, for relative ``fetch`` paths, checks that the
file exists) but does no network I/O. One concern per module:

=================  ====================================================================
``model``          the dataclasses (:class:`JobSpec` …), allowed values and defaults
``fields``         the spec's own marshmallow fields (strict numbers, clean strings …)
``schema``         the marshmallow schemas: every key's shape, rules across keys
``load``           file → JSON → schema → :class:`JobSpec`, problems as one SpecError; ``with_counts``
``json_schema``    the spec as JSON Schema, for editors
``hints``          which key the user meant: the closest allowed key to a misspelt one
``lint``           warnings about a valid job that will likely fail at run time
=================  ====================================================================
"""

from marathon_tf.user.spec.json_schema import json_schema
from marathon_tf.user.spec.load import load_dict, load_job, parse_json, with_counts
from marathon_tf.user.spec.model import MAX_COUNT, STYLES, Admission, Discovery, Fetch, JobSpec, Restart, Role, Volume

__all__ = ["JobSpec", "Role", "Discovery", "Restart", "Admission", "Volume", "Fetch", "STYLES", "load_job", "load_dict",
           "parse_json", "with_counts", "json_schema", "MAX_COUNT"]
