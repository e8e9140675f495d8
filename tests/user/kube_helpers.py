"""What Kubernetes and JobSet would do with an exported manifest, offline:

* :func:`crd_errors`: JobSet v0.12.0's CRD schema (``tests/data/jobset``, its ``openAPIV3Schema`` of
  ``v1alpha2``, which embeds the Job and Pod template schemas) as a JSON Schema validator. A
  Kubernetes structural schema is OpenAPI v3 with extensions, each made real here, not skipped:
  ``x-kubernetes-int-or-string`` (an integer or a string), unknown fields (the API server prunes
  them and ``kubectl apply``'s default ``--validate=strict`` refuses them: an object with
  ``properties`` takes no others unless ``x-kubernetes-preserve-unknown-fields``),
  ``x-kubernetes-list-type: map`` / ``set`` (no two items with the same keys: two ``env`` entries of
  one name are refused), ``nullable``. Not checked: CEL rules (``x-kubernetes-validations``: in this
  CRD, immutability on update and two exclusions — startupPolicy InOrder with dependsOn,
  a namespace in volumeClaimPolicies — that exported JobSets never meet);
* :func:`admission_problems`: the rules a JobSet must pass besides its schema that an exported one
  could break: JobSet's webhook (kubernetes-sigs/jobset v0.12.0 ``pkg/webhooks/jobset_webhook.go``:
  names of the Jobs and pods it generates within 63 characters, failure policy rule names and
  reasons, targets that exist) and the Job rules the CRD's descriptions state (podFailurePolicy
  needs ``restartPolicy: Never`` and ``podReplacementPolicy: Failed``; exit codes sorted, unique,
  no 0 with ``In``; a Job ``successPolicy`` works only for Indexed Jobs);
* :func:`expand`: how the kubelet expands ``$(VAR)`` in a container's ``command`` and env values
  (kubernetes ``third_party/forked/golang/expansion/expand.go``), :func:`pod_environment` the env a
  pod of a given completion index gets, :func:`pods` every pod a JobSet makes with its host name.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import yaml

CRD = Path(__file__).resolve().parents[1] / "data" / "jobset" / "v0.12.0" / "jobset.x-k8s.io_jobsets.yaml"
INDEX_ANNOTATION = "metadata.annotations['batch.kubernetes.io/job-completion-index']"


# --- the CRD's schema ------------------------------------------------------------------------------


def _structural_to_json_schema(node: Any) -> Any:
    if isinstance(node, list):
        return [_structural_to_json_schema(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: _structural_to_json_schema(v) for k, v in node.items() if k != "description"}
    if out.get("x-kubernetes-int-or-string") and "anyOf" not in out:
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if "properties" in out and not out.get("x-kubernetes-preserve-unknown-fields") \
            and "additionalProperties" not in out:
        out["additionalProperties"] = False
    if out.get("x-kubernetes-embedded-resource"):
        props = out.setdefault("properties", {})
        props.setdefault("apiVersion", {"type": "string"})
        props.setdefault("kind", {"type": "string"})
        props.setdefault("metadata", {"type": "object"})
    if out.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
    return out


def _list_type(validator, list_type, instance, schema):
    """``x-kubernetes-list-type``: ``set`` items unique, ``map`` items unique by their keys."""
    if not isinstance(instance, list):
        return
    if list_type == "set":
        seen = [repr(i) for i in instance]
        if len(set(seen)) != len(seen):
            yield jsonschema.ValidationError(f"duplicate items in a list of type set: {instance!r}")
    elif list_type == "map":
        keys = schema.get("x-kubernetes-list-map-keys") or []
        seen_keys = [tuple(item.get(k) for k in keys) for item in instance if isinstance(item, dict)]
        dupes = sorted({k for k in seen_keys if seen_keys.count(k) > 1}, key=repr)
        if dupes:
            yield jsonschema.ValidationError(f"duplicate entries for keys {keys} = {dupes}")


_Validator = jsonschema.validators.extend(jsonschema.Draft4Validator, {"x-kubernetes-list-type": _list_type})


@functools.lru_cache(maxsize=1)
def crd() -> dict[str, Any]:
    return yaml.load(CRD.read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


@functools.lru_cache(maxsize=1)
def jobset_validator(version: str = "v1alpha2"):
    (schema,) = [v["schema"]["openAPIV3Schema"] for v in crd()["spec"]["versions"] if v["name"] == version]
    return _Validator(_structural_to_json_schema(schema))


def crd_errors(manifest: Any) -> list[str]:
    """Every place ``manifest`` breaks the CRD's schema, as ``path: message``."""
    errors = sorted(jobset_validator().iter_errors(manifest), key=lambda e: list(map(str, e.absolute_path)))
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message[:300]}" for e in errors]


# --- what else the API server and JobSet's webhook check --------------------------------------------

_DNS1035 = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_RULE_NAME = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
_JOB_FAILURE_REASONS = {"BackoffLimitExceeded", "DeadlineExceeded", "FailedIndexes", "MaxFailedIndexesExceeded",
                        "PodFailurePolicy"}


def _dns1035(name: str) -> bool:
    return len(name) <= 63 and bool(_DNS1035.fullmatch(name))


# Over ruff's complexity limit (C901), as one piece: the Kubernetes admission rules the export must pass: a branch per
# rule.
def admission_problems(manifest: dict[str, Any]) -> list[str]:  # noqa: C901
    """What JobSet's webhook and the Job rules would refuse (see the module docstring)."""
    out = []
    name = manifest["metadata"]["name"]
    if not _dns1035(name):
        out.append(f"metadata.name {name!r}: not an RFC 1035 label")
    spec = manifest["spec"]
    subdomain = (spec.get("network") or {}).get("subdomain")
    if subdomain is not None and not _dns1035(subdomain):
        out.append(f"network.subdomain {subdomain!r}: not an RFC 1035 label")
    rjobs = {r["name"]: r for r in spec["replicatedJobs"]}
    for rname, rjob in rjobs.items():
        job_spec = rjob["template"]["spec"]
        pod_spec = job_spec["template"]["spec"]
        longest_job = f"{name}-{rname}-{rjob.get('replicas', 1) - 1}"
        if not _dns1035(longest_job):
            out.append(f"{rname}: job name {longest_job!r} not an RFC 1035 label")
        if job_spec.get("completionMode") == "Indexed" and "completions" in job_spec:
            longest_pod = f"{longest_job}-{job_spec['completions'] - 1}-abcde"
            if not _dns1035(longest_pod):
                out.append(f"{rname}: pod name {longest_pod!r} not an RFC 1035 label")
        pfp = job_spec.get("podFailurePolicy")
        if pfp is not None:
            if pod_spec.get("restartPolicy") != "Never":
                out.append(f"{rname}: podFailurePolicy needs restartPolicy Never")
            if job_spec.get("podReplacementPolicy", "Failed") != "Failed":
                out.append(f"{rname}: podFailurePolicy allows only podReplacementPolicy Failed")
            containers = {c["name"] for c in pod_spec["containers"]}
            for i, rule in enumerate(pfp["rules"]):
                if ("onExitCodes" in rule) == bool(rule.get("onPodConditions")):
                    out.append(f"{rname}: podFailurePolicy.rules[{i}]: one of onExitCodes, onPodConditions")
                codes = rule.get("onExitCodes")
                if codes:
                    values = codes["values"]
                    if values != sorted(set(values)) or not values or len(values) > 255:
                        out.append(f"{rname}: podFailurePolicy.rules[{i}]: values must be sorted, unique, 1..255 items")
                    if codes["operator"] == "In" and 0 in values:
                        out.append(f"{rname}: podFailurePolicy.rules[{i}]: 0 with In")
                    if codes.get("containerName") not in (None, *containers):
                        out.append(f"{rname}: podFailurePolicy.rules[{i}]: no container {codes['containerName']!r}")
                if rule["action"] not in ("FailJob", "FailIndex", "Ignore", "Count"):
                    out.append(f"{rname}: podFailurePolicy.rules[{i}]: action {rule['action']!r}")
        if "successPolicy" in job_spec:
            if job_spec.get("completionMode") != "Indexed":
                out.append(f"{rname}: a Job successPolicy works only for Indexed Jobs")
            for rule in job_spec["successPolicy"]["rules"]:
                for part in rule.get("succeededIndexes", "").split(","):
                    if not all(0 <= int(x) < job_spec["completions"] for x in part.split("-")):
                        out.append(f"{rname}: succeededIndexes {rule['succeededIndexes']!r} out of range")
    for target in (spec.get("successPolicy") or {}).get("targetReplicatedJobs") or []:
        if target not in rjobs:
            out.append(f"successPolicy names no replicatedJob {target!r}")
    names = []
    for i, rule in enumerate((spec.get("failurePolicy") or {}).get("rules") or []):
        names.append(rule.get("name", f"failurePolicyRule{i}"))
        if not _RULE_NAME.match(names[-1]) or len(names[-1]) > 128:
            out.append(f"failurePolicy.rules[{i}]: name {names[-1]!r}")
        out += [f"failurePolicy.rules[{i}]: no replicatedJob {t!r}" for t in rule.get("targetReplicatedJobs") or []
                if t not in rjobs]
        out += [f"failurePolicy.rules[{i}]: reason {r!r}" for r in rule.get("onJobFailureReasons") or []
                if r not in _JOB_FAILURE_REASONS]
        for pattern in rule.get("onJobFailureMessagePatterns") or []:
            re.compile(pattern)
    if len(set(names)) != len(names):
        out.append(f"failurePolicy rule names not unique: {names}")
    return out


# --- the pods: names, environment, command ----------------------------------------------------------


def expand(text: str, variables: dict[str, str]) -> str:
    """The kubelet's ``$(VAR)`` expansion (expansion.Expand with MappingFuncFor(variables))."""
    out, i = [], 0
    while i < len(text):
        if text[i] == "$" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "$":
                out.append("$")
                i += 2
                continue
            if nxt == "(":
                close = text.find(")", i + 2)
                if close != -1:
                    name = text[i + 2:close]
                    out.append(variables.get(name, f"$({name})"))
                    i = close + 1
                    continue
                out.append("$(")
                i += 2
                continue
            out.append("$" + nxt)
            i += 2
            continue
        out.append(text[i])
        i += 1
    return "".join(out)


def pod_environment(container: dict[str, Any], completion_index: int) -> dict[str, str]:
    """The container's environment in the pod of ``completion_index``: each value expanded with the
    variables defined before it (the kubelet's order), ``fieldRef``s of the completion index resolved."""
    env: dict[str, str] = {}
    for var in container.get("env") or []:
        if "valueFrom" in var:
            assert var["valueFrom"] == {"fieldRef": {"fieldPath": INDEX_ANNOTATION}}, var
            env[var["name"]] = str(completion_index)
        else:
            env[var["name"]] = expand(var.get("value", ""), dict(env))
    return env


def pod_command(container: dict[str, Any], environment: dict[str, str]) -> list[str]:
    return [expand(a, environment) for a in container.get("command") or []]


def pods(manifest: dict[str, Any]) -> Iterator[tuple[str, int, str, dict[str, Any]]]:
    """Every pod of the JobSet: (replicatedJob, completion index, fully qualified host name, its
    container), named as JobSet names them: host ``<jobset>-<replicatedJob>-<jobIndex>-<podIndex>``
    (``pkg/util/placement.GenPodName``; an Indexed Job's pod is ``<job>-<index>``), subdomain
    ``network.subdomain``, else the JobSet's name (``GetSubdomain``)."""
    name = manifest["metadata"]["name"]
    subdomain = (manifest["spec"].get("network") or {}).get("subdomain") or name
    for rjob in manifest["spec"]["replicatedJobs"]:
        job_spec = rjob["template"]["spec"]
        (container,) = job_spec["template"]["spec"]["containers"]
        for job_index in range(rjob.get("replicas", 1)):
            for index in range(job_spec["completions"]):
                yield rjob["name"], index, f"{name}-{rjob['name']}-{job_index}-{index}.{subdomain}", container
