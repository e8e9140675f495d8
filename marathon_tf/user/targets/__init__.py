"""The same job for another orchestrator: ``marathon-tf export JOB_FILE --to jobset``
(``Job.export("jobset")``). The way off Mesos: one validated job file, one manifest.

==============  ==================================================================================
``jobset``      ``JobSpec`` → a Kubernetes JobSet (``jobset.x-k8s.io/v1alpha2``), through
                ``app_templates/jobset/`` (the Jinja environment and the roles' facts of
                :mod:`marathon_tf.user.render`)
``kube``        Kubernetes' vocabulary: names, labels, quantities, ``$(VAR)`` references,
                Marathon's constraints as affinity
``losses``      the job keys no target carries (Mesos-DNS discovery, fetch URIs, admission …)
``manifest``    the manifest as YAML (the untranslatable keys in a comment at the top) or JSON
==============  ==================================================================================

All pure: no I/O; the CLI reads the job file and prints. docs/leaving-mesos.md has the mapping,
field by field, and what a team does on the Kubernetes side.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

from marathon_tf import __version__
from marathon_tf.contract.errors import SpecError, UsageError
from marathon_tf.user.spec import JobSpec
from marathon_tf.user.targets import jobset
from marathon_tf.user.targets.manifest import FORMATS, to_text

__all__ = ["export", "ExportResult", "Untranslatable", "TARGETS", "FORMATS"]

#: the targets ``export`` writes, by the name ``--to`` takes
TARGETS = ("jobset",)


@dataclass(frozen=True)
class ExportResult:
    """``text``: the manifest for stdout; ``untranslatable``: ``"<job-file key>: <why>"`` for each key
    the manifest does not carry (also in the text); ``lines``: the same as the lines for stderr
    (``job.json: fetch[0]: not translated to jobset: …``, as :class:`Untranslatable` words them under
    ``--strict``); ``manifest``: the object itself."""

    target: str
    fmt: str
    text: str
    manifest: dict[str, Any]
    untranslatable: list[str] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)

    @property
    def keys(self) -> list[str]:
        """The job-file keys that did not translate (``fetch[0]``, ``discovery.startup_timeout`` …)."""
        return [entry.split(": ", 1)[0] for entry in self.untranslatable]


class Untranslatable(SpecError):
    """``--strict`` and the job has keys the target cannot carry: exit 2, one line per key."""

    def __init__(self, source: str, problems: list[tuple[str, str]], target: str):
        super().__init__(source, [(path, f"not translated to {target}: {why}") for path, why in problems])
        self.hint = "without --strict the manifest is written anyway, these keys listed in it"


def export(spec: JobSpec, target: str = "jobset", *, fmt: str = "yaml", strict: bool = False,
           name: str | None = None, namespace: str | None = None, image: str | None = None,
           volumes: Mapping[str, str] | None = None, workdir: str = jobset.DEFAULT_WORKDIR,
           templates_dir: str | None = None) -> ExportResult:
    """The job as a manifest for ``target`` (``jobset``: one Kubernetes JobSet, v1alpha2).

    What the CLI does with it (``marathon-tf export JOB_FILE --to jobset [-o yaml|json] [--strict]``):
    stdout gets ``result.text``, the manifest; stderr gets ``result.lines``, one per entry of
    ``result.untranslatable`` (``job.json: fetch[0]: not translated to jobset: …``), each also named in
    the text: in a comment at the top of the YAML, and in the JSON's (and YAML's) annotation
    ``marathon-tf/untranslatable`` (a JSON list of the keys). Exit 0. With ``strict`` a non-empty
    list raises :class:`Untranslatable` (a ``SpecError``: exit 2, its ``lines()`` the list, nothing
    on stdout). A bad option or a job that cannot become a JobSet at all (no image, a name too long
    for Kubernetes) raises ``UsageError`` (exit 2) with a hint.

    ``name``, ``namespace``, ``image``, ``volumes`` (a job volume's ``container_path`` or
    ``host_path`` → ``pvc:CLAIM`` | ``hostPath:/ABS`` | ``emptyDir``), ``workdir``: see
    :class:`marathon_tf.user.targets.jobset.JobSetOptions`. ``templates_dir`` overrides
    ``app_templates/`` file by file (``jobset/jobset.json.j2``, ``jobset/replicated_job.json.j2``).
    """
    if target not in TARGETS:
        raise UsageError(f"--to {target}: not a target marathon-tf exports to (one of {', '.join(TARGETS)})")
    if fmt not in FORMATS:
        raise UsageError(f"-o {fmt}: not an output format of export (one of {', '.join(FORMATS)})")
    options = jobset.JobSetOptions(name=name, namespace=namespace, image=image, volumes=dict(volumes or {}),
                                   workdir=workdir)
    manifest, losses = jobset.build(spec, options, templates_dir=templates_dir)
    report = Untranslatable(spec.source, losses, target)
    if strict and losses:
        raise report
    entries = [f"{path}: {why}" for path, why in losses]
    header = [f"marathon-tf {__version__}: job {spec.name!r} ({PurePath(spec.source).name}) as a JobSet "
              f"({jobset.API_VERSION}).",
              f"Apply it with: kubectl apply -f FILE (needs Kubernetes {jobset.MIN_KUBERNETES} or later and the "
              "JobSet controller, v0.12 or later); see docs/leaving-mesos.md."]
    return ExportResult(target=target, fmt=fmt, manifest=manifest, untranslatable=entries,
                        lines=report.lines() if losses else [],
                        text=to_text(manifest, fmt, header=header, untranslatable=entries))
