"""The job spec as JSON Schema (draft 2020-12), for editors (``marathon-tf schema``)."""

from __future__ import annotations

from typing import Any

from marathon_tf.contract import naming
from marathon_tf.user.spec.fields import _MODULE
from marathon_tf.user.spec.model import (
    COMPLETIONS,
    CONSTRAINT_OPERATORS,
    DEFAULT_PREWARM,
    DISCOVERY_MODES,
    MAX_COUNT,
    SPEC_STYLES,
    STYLES,
)

__all__ = ["json_schema"]


#: The progress watchdog's limits (marathon_tf.task.watchdog).
_WATCHDOG = "seconds; not set: adaptive (the default), 0: off"


#: What admission is (marathon_tf.user.gang).
_ADMISSION = ("all-or-nothing start: a task that fits on no agent is refused before anything is sent; a job whose "
              "tasks are not all placed by the deadline holds nothing: every app scaled to 0, recorded NotPlaced")


#: What the job's and a role's constraints mean (marathon_tf.contract.spread).
_RULES = ("UNIQUE, MAX_PER, GROUP_BY and CLUSTER without a value hold across the tasks (the job's: of every role "
          "without constraints of its own), placed by the job's leader through Marathon; LIKE, UNLIKE, IS and "
          "CLUSTER value hold for each task")
_PER_TASK = ("copied into every app as they are: Marathon compares them among one app's instances, and each task is "
             "an app of its own, so UNIQUE, MAX_PER and GROUP_BY constrain nothing across tasks")


def json_schema() -> dict[str, Any]:
    """The job spec as JSON Schema (draft 2020-12), for editors."""
    num = {"type": "number"}
    string = {"type": "string", "minLength": 1}
    strmap = {"type": "object", "additionalProperties": {"type": "string"}}
    command = {"oneOf": [string, {"type": "array", "items": {"type": "string"}, "minItems": 1}],
               "description": "argv list, or one shell command string"}
    constraint = {"type": "array", "minItems": 2, "maxItems": 3, "items": {"type": "string"},
                  "description": "Marathon constraint: [field, OPERATOR(, value)]; operators "
                                 + ", ".join(CONSTRAINT_OPERATORS)}
    rules = {"type": "array", "items": constraint, "description": _RULES}
    per_task = {"type": "array", "items": constraint, "description": _PER_TASK}
    role = {
        "type": "object", "additionalProperties": False,
        "properties": {
            "count": {"oneOf": [
                {"type": "integer", "minimum": 0, "maximum": MAX_COUNT},
                {"type": "object", "additionalProperties": False, "required": ["min", "max"],
                 "description": "an elastic count (the worker role of styles tf1, parameter_server, "
                                "multi_worker_mirrored): the job starts with min workers placed, the others wait "
                                "in Marathon's queue holding nothing and are taken in when placed (docs/elastic.md)",
                 "properties": {"min": {"type": "integer", "minimum": 1, "maximum": MAX_COUNT},
                                "max": {"type": "integer", "minimum": 1, "maximum": MAX_COUNT}}}]},
            "cpus": {**num, "minimum": 0.001}, "mem": {**num, "minimum": 1, "description": "MiB"},
            "disk": {**num, "minimum": 0}, "gpus": {"type": "integer", "minimum": 0},
            "image": string, "command": command, "env": strmap,
            "constraints": {**rules, "description": "the role's own rules (instead of the job's): " + _RULES},
            "constraints_per_task": {**per_task, "description": "instead of the job's: " + _PER_TASK},
        },
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://marathon-tf.dev/schema/job.json",
        "title": "marathon-tf job",
        "type": "object",
        "additionalProperties": False,
        "required": ["name", "roles"],
        "properties": {
            "name": {**string, "description": "Marathon group id, e.g. 'mnist' or 'ml/mnist'",
                     "pattern": r"^([a-z0-9]([a-z0-9.\-]*[a-z0-9])?)(/[a-z0-9]([a-z0-9.\-]*[a-z0-9])?)*$"},
            "image": {**string, "description": "container image (run with the Mesos containerizer, UCR)"},
            "command": command,
            "env": strmap,
            "style": {"enum": list(STYLES), "default": "custom"},
            "cluster_spec": {"enum": list(SPEC_STYLES),
                             "description": "how the program is told the cluster: TF_CONFIG, classic flags, or both; "
                                            "default: flags for style tf1, tf_config for every other style "
                                            "(custom included)"},
            "completion": {"enum": list(COMPLETIONS)},
            "containerizer": {"enum": ["mesos", "docker"], "default": "mesos"},
            "roles": {"type": "object", "additionalProperties": False,
                      "properties": {r: role for r in naming.ROLES}},
            "constraints": rules,
            "constraints_per_task": per_task,
            "volumes": {"type": "array", "items": {
                "type": "object", "additionalProperties": False, "required": ["host_path", "container_path"],
                "properties": {"host_path": string, "container_path": string, "mode": {"enum": ["RW", "RO"]}}}},
            "fetch": {"type": "array", "items": {"oneOf": [string, {
                "type": "object", "additionalProperties": False, "required": ["uri"],
                "properties": {"uri": string, "extract": {"type": "boolean"}, "executable": {"type": "boolean"},
                               "cache": {"type": "boolean"}, "dest_path": string}}]}},
            "labels": strmap,
            "logdir": {"type": "string"},
            "discovery": {"type": "object", "additionalProperties": False, "properties": {
                "mode": {"enum": list(DISCOVERY_MODES)}, "domain": string, "framework": string,
                "nameserver": {"type": "string"}, "http_api": {"type": "string"},
                "marathon_url": {"type": "string"}, "startup_timeout": {**num, "minimum": 1}}},
            "restart": {"type": "object", "additionalProperties": False, "properties": {
                "max_failures": {"type": "integer", "minimum": 0}, "window_seconds": {**num, "minimum": 1},
                "permanent_exit_codes": {"type": "array", "items": {"type": "integer", "minimum": 1, "maximum": 127}},
                "backoff_seconds": {**num, "minimum": 0}, "backoff_factor": {**num, "minimum": 1},
                "max_launch_delay_seconds": {**num, "minimum": 0},
                "progress_timeout_seconds": {**num, "minimum": 0, "description": _WATCHDOG},
                "first_step_timeout_seconds": {**num, "minimum": 0, "description": _WATCHDOG},
                "max_preemptions": {"type": "integer", "minimum": 0, "default": 100},
                "preemption_exit_codes": {"type": "array", "default": [42, 143],
                                          "items": {"type": "integer", "minimum": 1, "maximum": 255}},
                "grace_seconds": {**num, "minimum": 1, "maximum": 3600, "default": 30}}},
            "admission": {"type": "object", "additionalProperties": False, "description": _ADMISSION, "properties": {
                "timeout": {**num, "minimum": 1, "default": 600,
                            "description": "seconds from the submission until every task must be placed; "
                                           "env MARATHON_TF_ADMISSION_TIMEOUT overrides it at deploy"},
                "retries": {"type": "integer", "minimum": 0, "default": 0,
                            "description": "how often a job released at its deadline is submitted again"},
                "backoff_seconds": {**num, "minimum": 0, "default": 60,
                                    "description": "wait before the next attempt (doubling, jittered ×0.5–1.5)"}}},
            "network": {"type": "object", "additionalProperties": False, "properties": {
                "mode": {"enum": ["host", "container"]}, "name": string}},
            "bootstrap": {**string, "default": "marathon-tf bootstrap"},
            "progress": {"type": "object", "additionalProperties": False, "properties": {
                "target_step": {"type": "integer", "minimum": 1}}},
            "prewarm": {"oneOf": [{"type": "boolean"}, {"type": "array", "minItems": 1, "items": {
                "type": "string", "pattern": _MODULE.pattern}}], "default": list(DEFAULT_PREWARM),
                "description": "modules a Python trainer imports while its peers are discovered "
                               "(a pre-warmed interpreter); false: start the program the ordinary way"},
        },
    }
