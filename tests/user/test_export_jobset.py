"""``marathon-tf export --to jobset``: the same job as one Kubernetes JobSet.

Checked offline against JobSet v0.12.0 (kubernetes-sigs/jobset, tag v0.12.0): its CRD's
``openAPIV3Schema`` (``config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml``, copied under
tests/data/jobset with its source) and its webhook's rules (``pkg/webhooks/jobset_webhook.go``), through
``kube_helpers``. Field names and values as ``api/jobset/v1alpha2/jobset_types.go`` of that tag defines
them: ``network.enableDNSHostnames`` / ``subdomain`` / ``publishNotReadyAddresses``, ``successPolicy``
(``operator: All|Any``, ``targetReplicatedJobs``), ``failurePolicy`` (``maxRestarts``,
``restartStrategy: Recreate|BlockingRecreate|InPlaceRestart``, ``rules[]``: ``name``, ``action``
``FailJobSet|RestartJobSet|RestartJobSetAndIgnoreMaxRestarts|RestartJob|RestartJobAndIgnoreMaxRestarts``,
``onJobFailureReasons``, ``onJobFailureMessagePatterns``, ``targetReplicatedJobs``); ``startupPolicy``
(deprecated for ``dependsOn``, ordering only: not used) and ``coordinator`` (an annotation naming one
pod: not used, TF_CONFIG names the chief) exist there too. A pod's DNS name is
``<jobset>-<replicatedJob>-<jobIndex>-<podIndex>.<subdomain>`` (``pkg/util/placement.GenPodName``,
``pkg/controllers/jobset_controller.go`` ``GetSubdomain``). The failure rules match the Job controller's
messages (jobset KEP 262); the first rule that matches acts (``pkg/controllers/failure_policy.go``).

Kubernetes' vocabulary (:mod:`marathon_tf.user.targets.kube`; Kubernetes 1.3x, kubernetes/kubernetes):
``k8s.io/apimachinery/pkg/util/validation`` (DNS-1035 / DNS-1123 names, qualified names, label values),
``third_party/forked/golang/expansion/expand.go`` (``$(VAR)`` in ``command``, ``args`` and ``env[].value``),
``k8s.io/apimachinery/pkg/api/resource`` (quantities).
"""

from __future__ import annotations

import copy
import json
import os
import shlex
from pathlib import Path

import pytest
import yaml
from kube_helpers import admission_problems, crd_errors, expand, pod_command, pod_environment, pods
from user_helpers import minimal

from marathon_tf.contract import cluster_spec
from marathon_tf.contract.errors import SpecError, UsageError
from marathon_tf.contract.taskenv import TaskContext
from marathon_tf.marathon.model import job_apps
from marathon_tf.user.render import RenderError, render_group
from marathon_tf.user.spec import load_dict, load_job
from marathon_tf.user.targets import TARGETS, Untranslatable, export
from marathon_tf.user.targets import jobset as jobset_mod

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).parent / "golden" / "jobset"
EXAMPLE_JOBS = sorted(ROOT.glob("examples/*/job*.json"))
IDS = [f"{p.parent.name}/{p.name}" for p in EXAMPLE_JOBS]

#: a job with every role, a shell-string command with placeholders, both spec styles
EVERY_ROLE = minimal(name="ml/every-role", style="custom", cluster_spec="both", image="img:1", logdir="ckpt",
                     command="python3 train.py --ps {ps_hosts} --me {job_name}:{task_index} | tee log",
                     roles={"chief": {"count": 1}, "ps": {"count": 3}, "worker": {"count": 5},
                            "evaluator": {"count": 2}, "tensorboard": {"count": 1}})


def _manifest(job, **options):
    return export(load_dict(job) if isinstance(job, dict) else load_job(job), **options).manifest


def _rjob(manifest, role):
    (rjob,) = [r for r in manifest["spec"]["replicatedJobs"] if r["name"] == role]
    return rjob


def _pod_spec(manifest, role):
    return _rjob(manifest, role)["template"]["spec"]["template"]["spec"]


# --- the CRD and the webhook accept every example ----------------------------------------------------


def test_examples_exist():
    assert len(EXAMPLE_JOBS) >= 3 and TARGETS == ("jobset",)


def test_the_crd_check_is_real():
    """A manifest the API server would refuse is refused: a misspelt field, a wrong type, an action
    JobSet does not know, two env entries of one name (env is a list-map keyed by name), a quantity
    that is neither a number nor a string."""
    good = _manifest(EXAMPLE_JOBS[0])
    assert crd_errors(good) == []
    bad = copy.deepcopy(good)
    pod = bad["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    pod["containers"][0]["comand"] = ["x"]
    pod["containers"][0]["env"].append(dict(pod["containers"][0]["env"][-1]))
    pod["containers"][0]["resources"]["requests"]["cpu"] = 0.5
    bad["spec"]["failurePolicy"]["rules"][0]["action"] = "Restart"
    bad["spec"]["replicatedJobs"][0]["template"]["spec"]["completions"] = "2"
    found = "\n".join(crd_errors(bad))
    for expected in ("'comand' was unexpected", "duplicate entries for keys ['name']", "requests/cpu",
                     "'Restart' is not one of", "completions: '2' is not of type 'integer'"):
        assert expected in found
    long_name = copy.deepcopy(good)
    long_name["metadata"]["name"] = "x" * 60
    assert crd_errors(long_name) == []  # the schema has no rule for it: the webhook has
    assert any("pod name" in p for p in admission_problems(long_name))


@pytest.mark.parametrize("job_file", EXAMPLE_JOBS, ids=IDS)
@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_every_example_exports_to_a_jobset_the_crd_and_the_webhook_accept(job_file, fmt):
    result = export(load_job(job_file), fmt=fmt)
    manifest = yaml.safe_load(result.text) if fmt == "yaml" else json.loads(result.text)
    assert manifest == result.manifest
    assert crd_errors(manifest) == []
    assert admission_problems(manifest) == []
    assert [r["name"] for r in manifest["spec"]["replicatedJobs"]] == list(load_job(job_file).counts())


def test_a_job_with_every_role_and_option_is_accepted():
    manifest = _manifest(EVERY_ROLE, namespace="ml", volumes={}, name="every")
    assert crd_errors(manifest) == [] and admission_problems(manifest) == []
    assert manifest["metadata"]["namespace"] == "ml"


def _golden_name(job_file: Path) -> str:
    return f"{job_file.parent.name}__{job_file.stem}.yaml"


@pytest.mark.parametrize("job_file", EXAMPLE_JOBS, ids=IDS)
def test_golden_export_of_every_example(job_file):
    """The exported YAML is stable; UPDATE_GOLDEN=1 rewrites tests/user/golden/jobset/ after a deliberate change."""
    text = export(load_job(job_file)).text.replace(ROOT.as_uri(), "file://ROOT")
    golden = GOLDEN / _golden_name(job_file)
    if os.environ.get("UPDATE_GOLDEN") == "1":
        GOLDEN.mkdir(parents=True, exist_ok=True)
        golden.write_text(text)
    assert golden.is_file(), f"no golden file {golden.name}; run with UPDATE_GOLDEN=1 once"
    assert text == golden.read_text()


# --- TF_CONFIG and the flags: the other pods' DNS names, the indexes of the Marathon render -----------


def _marathon_spec(app, spec, endpoints):
    """What the bootstrap of a Marathon app writes, given the peers' addresses."""
    ctx = TaskContext.from_env(app["env"])
    if ctx.role == "tensorboard":
        return ctx, None
    argv = shlex.split(app["cmd"])
    argv = argv[argv.index("--") + 1:]
    return ctx, cluster_spec.render(ctx.cluster, endpoints, ctx.role, ctx.index, style=ctx.spec_style, argv=argv,
                                    shell=isinstance(spec.command, str), user_tf_config=app["env"].get("TF_CONFIG"))


@pytest.mark.parametrize("job", [*EXAMPLE_JOBS, EVERY_ROLE,
                                 minimal(style="parameter_server", cluster_spec="tf_config", image="i",
                                         roles={"chief": {"count": 1}, "ps": {"count": 2}, "worker": {"count": 12}})],
                         ids=[*IDS, "every-role", "pss-12-workers"])
def test_every_pods_tf_config_names_exactly_the_other_pods_and_lines_up_with_marathon(job):
    spec = load_dict(job) if isinstance(job, dict) else load_job(job)
    manifest = export(spec).manifest
    every = list(pods(manifest))
    address = {(role, index): f"{host}:{jobset_mod.TF_PORT}" for role, index, host, _ in every}
    members = [(r, i) for r in ("chief", "ps", "worker") for (role, i) in address if role == r]
    expected_cluster = {r: [address[(r, i)] for i in range(spec.role(r).count)]
                        for r in ("chief", "ps", "worker") if spec.role(r).count}
    apps = job_apps(render_group(spec))
    assert sorted(apps) == sorted(f"{r}-{i}" for r, i, _, _ in every)  # one pod per Marathon task
    for role, index, host, container in every:
        env = pod_environment(container, index)
        command = pod_command(container, env)
        ctx, marathon = _marathon_spec(apps[f"{role}-{index}"], spec, address)
        assert (ctx.role, ctx.index) == (role, index)
        if role == "tensorboard":
            assert "TF_CONFIG" not in env
            continue
        want_tf_config = spec.cluster_spec in ("tf_config", "both")
        assert ("TF_CONFIG" in env) == want_tf_config
        if want_tf_config:
            tf_config = json.loads(env["TF_CONFIG"])
            assert tf_config == {"cluster": expected_cluster, "task": {"type": role, "index": index}}
            if role != "evaluator":  # the pod's own address is its index's entry: every peer named once
                assert tf_config["cluster"][role][index] == f"{host}:{jobset_mod.TF_PORT}"
            assert sorted((r, i) for r, hosts in tf_config["cluster"].items() for i in range(len(hosts))) \
                == sorted(members)
            assert env["TF_CONFIG"] == marathon.tf_config_env  # what the bootstrap writes, byte for byte
        assert dict(ctx.cluster) == {r: len(h) for r, h in expected_cluster.items()}
        if isinstance(spec.command, str):
            assert command == ["/bin/sh", "-c", *marathon.argv]
        else:
            assert command == marathon.argv


def test_a_tf_config_the_job_sets_is_kept_as_the_bootstrap_keeps_it():
    manifest = _manifest(minimal(cluster_spec="both", image="i", env={"TF_CONFIG": '{"cluster": {}}'}))
    env = pod_environment(_pod_spec(manifest, "worker")["containers"][0], 1)
    assert env["TF_CONFIG"] == '{"cluster": {}}'
    assert [v["name"] for v in _pod_spec(manifest, "worker")["containers"][0]["env"]].count("TF_CONFIG") == 1
    assert pod_command(_pod_spec(manifest, "worker")["containers"][0], env)[-1] == "--task_index=1"


HOSTILE = ["$(HOME)", "$$", "a$", "$(JOB_COMPLETION_INDEX)", "${X}", "$1 $ (", "it's \"q\"", "new\nline", "ünï ✓",
           ""]


@pytest.mark.parametrize("value", HOSTILE)
def test_commands_and_env_reach_the_program_exactly(value):
    """Kubernetes expands $(VAR) in command and env values; the export doubles every $ so that what
    the program gets is what the job file says (Marathon expands nothing)."""
    result = export(load_dict(minimal(image="i:1", command=["python3", "t.py", value], env={"MSG": value})))
    manifest = result.manifest
    assert yaml.safe_load(result.text) == manifest
    container = _pod_spec(manifest, "worker")["containers"][0]
    env = pod_environment(container, 0)
    assert env["MSG"] == value
    assert pod_command(container, env)[:3] == ["python3", "t.py", value]
    shell = _manifest(minimal(image="i:1", command=f"echo {shlex.quote(value)} $HOME"))
    container = _pod_spec(shell, "ps")["containers"][0]
    script = pod_command(container, pod_environment(container, 0))
    assert script[:2] == ["/bin/sh", "-c"] and shlex.split(script[2])[:3] == ["echo", value, "$HOME"]


def test_the_expansion_helper_is_kubernetes():
    """Cases from kubernetes third_party/forked/golang/expansion/expand_test.go."""
    env = {"VAR_A": "A", "VAR_EMPTY": ""}
    for given, want in [("$(VAR_A)", "A"), ("___$(VAR_A)___", "___A___"), ("$$(VAR_A)", "$(VAR_A)"),
                        ("$(VAR_NOPE)", "$(VAR_NOPE)"), ("$(VAR_EMPTY)", ""), ("$$", "$"), ("$", "$"),
                        ("$(VAR_A", "$(VAR_A"), ("$VAR_A", "$VAR_A"), ("$$$$(VAR_A)", "$$(VAR_A)")]:
        assert expand(given, env) == want, given


# --- completion, restarts, preemptions ----------------------------------------------------------------


@pytest.mark.parametrize("completion,target,indexes", [("chief", "chief", None), ("worker0", "worker", "0"),
                                                       ("all_workers", "worker", None)])
def test_completion_becomes_the_success_policy(completion, target, indexes):
    manifest = _manifest(minimal(style="custom", completion=completion,
                                 roles={"chief": {"count": 1}, "ps": {"count": 1}, "worker": {"count": 3}}, image="i"))
    assert manifest["spec"]["successPolicy"] == {"operator": "All", "targetReplicatedJobs": [target]}
    policy = _rjob(manifest, "worker")["template"]["spec"].get("successPolicy")
    assert policy == (None if indexes is None else {"rules": [{"succeededIndexes": "0"}]})
    assert crd_errors(manifest) == [] and admission_problems(manifest) == []


def _survivable(manifest) -> int:
    """How many ordinary failures (no preemption, no permanent exit code) the JobSet survives at most. JobSet
    v0.12.0 (kubernetes-sigs/jobset): a Job fails past its backoffLimit (BackoffLimitExceeded); the first
    matching failurePolicy rule acts, an unmatched failure is RestartJobSet (pkg/controllers/failure_policy.go
    :45), which recreates every Job (their counts start again) and fails the JobSet once maxRestarts restarts
    were counted (:226). Worst case: every Job that fails alone at its limit, then a restart, each attempt."""
    policy = manifest["spec"]["failurePolicy"]
    failing = {r for rule in policy["rules"] if rule["action"] == "FailJobSet"
               and rule.get("onJobFailureReasons") == ["BackoffLimitExceeded"] for r in rule["targetReplicatedJobs"]}
    limits = {r["name"]: r["template"]["spec"]["backoffLimit"] for r in manifest["spec"]["replicatedJobs"]
              if r["name"] != "tensorboard"}
    restarts = policy["maxRestarts"] if set(limits) - failing else 0  # a Job past its limit restarts the JobSet
    return (restarts + 1) * sum(limits.values()) + restarts


def test_the_restart_budget_is_the_jobs_not_each_roles():
    # docs/restarts.md: "The budget is the job's, not a task's". Per role backoffLimits are renewed at every
    # JobSet restart (its Jobs recreated): the mnist-ps-strategy export survived 65 failures where the job
    # allows 5 (issue 41). Now every member restarts the JobSet, counted against maxRestarts = max_failures.
    manifest = _manifest(minimal(style="parameter_server", image="i", restart={"max_failures": 3},
                                 roles={"chief": {"count": 1}, "ps": {"count": 2}, "worker": {"count": 4},
                                        "evaluator": {"count": 1}}))
    assert _survivable(manifest) == 3
    limits = {r["name"]: r["template"]["spec"]["backoffLimit"] for r in manifest["spec"]["replicatedJobs"]}
    assert limits == {"chief": 0, "ps": 0, "worker": 0, "evaluator": 0}
    policy = manifest["spec"]["failurePolicy"]
    assert (policy["maxRestarts"], policy["restartStrategy"]) == (3, "BlockingRecreate")
    rules = {r["name"]: r for r in policy["rules"]}
    assert list(rules) == ["Preempted", "PermanentExitCode", "GroupRestart"]
    assert rules["Preempted"]["action"] == "RestartJobSetAndIgnoreMaxRestarts"
    assert rules["Preempted"]["targetReplicatedJobs"] == ["ps"]  # the others' preemptions: a new pod, uncounted
    assert rules["GroupRestart"]["targetReplicatedJobs"] == ["ps", "chief", "worker", "evaluator"]
    worker = _rjob(manifest, "worker")["template"]["spec"]["podFailurePolicy"]["rules"]
    assert worker[0] == {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}
    ps_job = load_job(ROOT / "examples" / "mnist-ps-strategy" / "job.json")
    assert _survivable(export(ps_job).manifest) == ps_job.restart.max_failures  # (it was 65 for 5)
    assert crd_errors(manifest) == [] and admission_problems(manifest) == []


def test_one_role_tensorflow_takes_back_alone_keeps_its_new_pod_of_the_index():
    one = _manifest(minimal(style="custom", image="i", restart={"max_failures": 4}, roles={"worker": {"count": 3}}))
    assert _rjob(one, "worker")["template"]["spec"]["backoffLimit"] == 4 and _survivable(one) == 4
    assert [r["name"] for r in one["spec"]["failurePolicy"]["rules"]] == ["PermanentExitCode", "RestartBudgetSpent"]
    mwms = _manifest(minimal(style="multi_worker_mirrored", image="i", roles={"worker": {"count": 3}}))
    assert _rjob(mwms, "worker")["template"]["spec"]["backoffLimit"] == 0
    assert [r["name"] for r in mwms["spec"]["failurePolicy"]["rules"]] == ["Preempted", "PermanentExitCode",
                                                                          "GroupRestart"]
    assert _survivable(mwms) == mwms["spec"]["failurePolicy"]["maxRestarts"]


def test_preemptions_are_never_counted_and_permanent_codes_end_the_job():
    job = minimal(image="i", restart={"permanent_exit_codes": [3, 1], "preemption_exit_codes": [42]})
    manifest = _manifest(job)
    worker = _rjob(manifest, "worker")["template"]["spec"]["podFailurePolicy"]["rules"]
    assert [r["action"] for r in worker] == ["Ignore", "FailJob", "Ignore"]  # a new pod of the index, uncounted
    assert worker[0]["onPodConditions"] == [{"type": "DisruptionTarget"}]
    assert worker[1]["onExitCodes"]["values"] == [1, 3, 126, 127] and worker[2]["onExitCodes"]["values"] == [42]
    ps_rules = _rjob(manifest, "ps")["template"]["spec"]["podFailurePolicy"]["rules"]
    assert [r["action"] for r in ps_rules] == ["FailJob", "FailJob", "FailJob"]  # the JobSet restarts, uncounted
    assert ps_rules[2]["onExitCodes"]["values"] == [42]
    messages = {r["name"]: r.get("onJobFailureMessagePatterns") for r in manifest["spec"]["failurePolicy"]["rules"]}
    assert messages["PermanentExitCode"] == ["failed with exit code (1|3|126|127) matching FailJob rule"]
    assert messages["Preempted"] == ["has condition DisruptionTarget matching FailJob rule",
                                     "failed with exit code (42) matching FailJob rule"]
    # the Job controller's messages (jobset KEP 262), matched by the rules that should take them
    import re
    for message, rule in [("Pod ns/p has condition DisruptionTarget matching FailJob rule at index 0", "Preempted"),
                          ("Container tensorflow for pod ns/p failed with exit code 42 matching FailJob rule at "
                           "index 2", "Preempted"),
                          ("Container tensorflow for pod ns/p failed with exit code 3 matching FailJob rule at "
                           "index 1", "PermanentExitCode")]:
        assert [n for n, patterns in messages.items() if patterns and any(re.search(p, message) for p in patterns)] \
            == [rule]
    assert crd_errors(manifest) == [] and admission_problems(manifest) == []


@pytest.mark.parametrize("style, counts", [
    ("tf1", {"ps": 1, "worker": 2}), ("parameter_server", {"chief": 1, "ps": 2, "worker": 4, "evaluator": 1}),
    ("multi_worker_mirrored", {"worker": 3}), ("custom", {"ps": 1, "worker": 2}), ("custom", {"worker": 3})])
def test_a_member_the_task_side_restarts_with_its_group_restarts_the_jobset(style, counts):
    """One rule (marathon_tf.contract.restartscope) says which members restart together, on Marathon (the
    keeper's round) and in the export (their Job fails at once; its preemption restarts the JobSet uncounted)."""
    from marathon_tf.contract.restartscope import group_scope

    manifest = _manifest(minimal(style=style, image="i", roles={r: {"count": n} for r, n in counts.items()}))
    group = {r for r in counts if group_scope(style, r, sum(counts.values()))}
    rules = {r["name"]: r for r in manifest["spec"]["failurePolicy"]["rules"]}
    assert set(rules["Preempted"]["targetReplicatedJobs"] if "Preempted" in rules else []) == group
    assert all(_rjob(manifest, r)["template"]["spec"]["backoffLimit"] == 0 for r in group)


# --- resources, constraints, volumes, labels ------------------------------------------------------------


def test_a_job_wide_rule_holds_across_every_role_that_takes_the_jobs_constraints():
    # a job-level ["hostname", "UNIQUE"] means no two of the job's tasks on one host (marathon-tf's placement,
    # user/render.py placement_scopes); selected on the replicatedJob it held only within a role. JobSet labels
    # every pod with both names (kubernetes-sigs/jobset v0.12.0 api/jobset/v1alpha2/jobset_types.go:24,32).
    manifest = _manifest(minimal(image="i", constraints=[["hostname", "UNIQUE"]],
                                 roles={"ps": {"count": 1}, "worker": {"count": 2},
                                        "evaluator": {"count": 1, "constraints": [["hostname", "UNIQUE"]]}}))
    job_wide = {"matchLabels": {"jobset.sigs.k8s.io/jobset-name": "mnist"},
                "matchExpressions": [{"key": "jobset.sigs.k8s.io/replicatedjob-name", "operator": "In",
                                      "values": ["ps", "worker"]}]}
    def anti(role):
        affinity = _pod_spec(manifest, role)["affinity"]["podAntiAffinity"]
        return affinity["requiredDuringSchedulingIgnoredDuringExecution"]

    for role in ("ps", "worker"):
        assert anti(role) == [{"labelSelector": job_wide, "topologyKey": "kubernetes.io/hostname"}]
    (own,) = anti("evaluator")
    assert own["labelSelector"] == {"matchLabels": {"jobset.sigs.k8s.io/jobset-name": "mnist",
                                                    "jobset.sigs.k8s.io/replicatedjob-name": "evaluator"}}
    assert crd_errors(manifest) == [] and admission_problems(manifest) == []


def test_the_export_names_the_kubernetes_it_needs_in_its_header():
    # JobSet v0.12 supports the latest three Kubernetes minors, tested on 1.32 - 1.34 (kubernetes-sigs/jobset
    # v0.12.0 README.md:40-48)
    text = export(load_job(ROOT / "examples" / "linear-regression-tf1" / "job.json")).text
    assert "needs Kubernetes 1.32 or later and the JobSet controller, v0.12 or later" in text.splitlines()[1]


def test_resources_become_requests_and_limits():
    manifest = _manifest(minimal(image="i", roles={"ps": {"count": 1, "cpus": 0.25, "mem": 1536.5, "disk": 100},
                                                   "worker": {"count": 1, "cpus": 4, "mem": 8192, "gpus": 2}}))
    assert _pod_spec(manifest, "ps")["containers"][0]["resources"] == {
        "requests": {"cpu": "250m", "memory": "1573376Ki", "ephemeral-storage": "100Mi"},
        "limits": {"memory": "1573376Ki"}}
    assert _pod_spec(manifest, "worker")["containers"][0]["resources"] == {
        "requests": {"cpu": "4", "memory": "8192Mi"}, "limits": {"memory": "8192Mi", "nvidia.com/gpu": "2"}}


def test_constraints_with_a_kubernetes_meaning_become_affinity():
    manifest = _manifest(minimal(image="i", constraints=[["hostname", "UNIQUE"], ["rack", "LIKE", "r1|r2"],
                                                         ["@zone", "UNLIKE", "z\\.3"], ["gpu", "IS", "a100"],
                                                         ["rack", "GROUP_BY"]],
                                 roles={"ps": {"count": 1, "constraints": []}, "worker": {"count": 2}}))
    assert "affinity" not in _pod_spec(manifest, "ps")
    worker = _pod_spec(manifest, "worker")
    selector = {"matchLabels": {"jobset.sigs.k8s.io/jobset-name": "mnist"},  # the job's rules: its scope's roles
                "matchExpressions": [{"key": "jobset.sigs.k8s.io/replicatedjob-name", "operator": "In",
                                      "values": ["worker"]}]}
    assert worker["affinity"]["podAntiAffinity"] == {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": selector, "topologyKey": "kubernetes.io/hostname"}]}
    terms = worker["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r1", "r2"]},
                                           {"key": "topology.kubernetes.io/zone", "operator": "NotIn",
                                            "values": ["z.3"]},
                                           {"key": "gpu", "operator": "In", "values": ["a100"]}]}]
    assert worker["topologySpreadConstraints"] == [{"labelSelector": selector, "maxSkew": 1, "topologyKey": "rack",
                                                    "whenUnsatisfiable": "DoNotSchedule"}]
    assert crd_errors(manifest) == [] and admission_problems(manifest) == []
    assert not export(load_dict(minimal(image="i", constraints=[["hostname", "UNIQUE"]]))).untranslatable


def test_volumes_become_host_paths_or_claims():
    job = minimal(image="i", volumes=[{"host_path": "/shared/ckpt", "container_path": "ckpt"},
                                      {"host_path": "data", "container_path": "/data", "mode": "RO"},
                                      {"host_path": "/x", "container_path": "scratch"}])
    result = export(load_dict(job), volumes={"/data": "pvc:training-data", "scratch": "emptyDir"}, workdir="/app")
    pod = _pod_spec(result.manifest, "worker")
    assert pod["volumes"] == [{"name": "ckpt", "hostPath": {"path": "/shared/ckpt", "type": "Directory"}},
                              {"name": "data",
                               "persistentVolumeClaim": {"claimName": "training-data", "readOnly": True}},
                              {"name": "scratch", "emptyDir": {}}]
    assert pod["containers"][0]["volumeMounts"] == [{"name": "ckpt", "mountPath": "/app/ckpt"},
                                                    {"name": "data", "mountPath": "/data", "readOnly": True},
                                                    {"name": "scratch", "mountPath": "/app/scratch"}]
    assert pod["containers"][0]["workingDir"] == "/app" and result.untranslatable == []
    assert crd_errors(result.manifest) == []
    default = export(load_dict(job))
    assert _pod_spec(default.manifest, "worker")["volumes"][1]["persistentVolumeClaim"] == {
        "claimName": "mnist-data", "readOnly": True}
    assert default.keys == ["volumes[1].host_path"]


def test_labels_become_labels_or_annotations():
    result = export(load_dict(minimal(image="i", labels={"team": "ml", "cost-center": "a b/c", "bad key!": "x"})))
    meta = result.manifest["metadata"]
    assert meta["labels"] == {"team": "ml"}
    assert meta["annotations"]["cost-center"] == "a b/c" and meta["annotations"]["marathon-tf/job"] == "mnist"
    assert result.keys == ["labels.bad key!"]


# --- what does not translate ---------------------------------------------------------------------------

#: a job that uses every key the JobSet cannot carry, with the key it is reported under
UNTRANSLATABLE = {
    "fetch": (["https://example.com/train.tgz"], ["fetch[0]"]),
    "discovery": ({"mode": "mesos-dns-http", "http_api": "http://10.0.0.1:8123", "nameserver": "10.0.0.1:53",
                   "domain": "dcos", "framework": "mara", "marathon_url": "http://m:8080", "startup_timeout": 60},
                  ["discovery.mode", "discovery.domain", "discovery.framework", "discovery.nameserver",
                   "discovery.http_api", "discovery.marathon_url", "discovery.startup_timeout"]),
    "admission": ({"timeout": 60, "retries": 2, "backoff_seconds": 5},
                  ["admission.timeout", "admission.retries", "admission.backoff_seconds"]),
    "restart": ({"window_seconds": 60, "max_preemptions": 3, "backoff_seconds": 2, "backoff_factor": 2,
                 "max_launch_delay_seconds": 60, "progress_timeout_seconds": 120, "first_step_timeout_seconds": 0},
                ["restart.window_seconds", "restart.max_preemptions", "restart.backoff_seconds",
                 "restart.backoff_factor", "restart.max_launch_delay_seconds", "restart.progress_timeout_seconds",
                 "restart.first_step_timeout_seconds"]),
    "progress": ({"target_step": 100}, ["progress.target_step"]),
    "prewarm": (["tensorflow", "numpy"], ["prewarm"]),
    "bootstrap": ("/opt/mtf/bin/marathon-tf bootstrap", ["bootstrap"]),
    "network": ({"mode": "container", "name": "dcos"}, ["network.name"]),
    "labels": ({"Marathon only!": "x"}, ["labels.Marathon only!"]),
    "constraints": ([["hostname", "MAX_PER", "2"], ["rack", "LIKE", "r[0-9]+"], ["hostname", "CLUSTER"],
                     ["@region", "IS", "eu"]],
                    ["constraints[0]", "constraints[1]", "constraints[2]"]),
    "volumes": ([{"host_path": "ckpt", "container_path": "ckpt"}], ["volumes[0].host_path"]),
}


def test_every_untranslatable_key_is_reported_in_the_result_the_yaml_and_the_annotation():
    job = minimal(image="i", **{k: v for k, (v, _) in UNTRANSLATABLE.items()})
    spec = load_dict(job)
    expected = sorted(key for _, keys in UNTRANSLATABLE.values() for key in keys)
    result = export(spec)
    assert sorted(result.keys) == expected
    head = result.text.split("\napiVersion:")[0]
    assert all(f"#   {entry}" in head for entry in result.untranslatable)
    annotation = result.manifest["metadata"]["annotations"][jobset_mod.UNTRANSLATABLE_ANNOTATION]
    assert sorted(json.loads(annotation)) == expected
    as_json = export(spec, fmt="json")
    assert json.loads(json.loads(as_json.text)["metadata"]["annotations"][jobset_mod.UNTRANSLATABLE_ANNOTATION]) \
        == json.loads(annotation)
    assert crd_errors(result.manifest) == [] and admission_problems(result.manifest) == []
    assert len(result.lines) == len(expected) and all(line.startswith("job.json: ") for line in result.lines)
    with pytest.raises(Untranslatable) as e:
        export(spec, strict=True)
    assert e.value.lines() == result.lines
    assert isinstance(e.value, SpecError) and e.value.exit_code == 2
    assert sorted(line.split(": ")[1] for line in e.value.lines()) == expected
    assert all(line.startswith("job.json: ") and "not translated to jobset" in line for line in e.value.lines())


def test_a_job_with_nothing_untranslatable_passes_strict():
    result = export(load_dict(minimal(image="i", volumes=[{"host_path": "/nfs/ckpt", "container_path": "ckpt"}])),
                    strict=True)
    assert result.untranslatable == [] and "Not translated" not in result.text
    assert jobset_mod.UNTRANSLATABLE_ANNOTATION not in result.manifest["metadata"]["annotations"]


def test_fetch_names_the_file_not_this_machines_path(tmp_path):
    (tmp_path / "train.py").write_text("")
    (tmp_path / "job.json").write_text(json.dumps(minimal(image="i", fetch=["train.py"])))
    result = export(load_job(tmp_path / "job.json"))
    assert result.keys == ["fetch[0]"] and "'train.py' in the image" in result.untranslatable[0]
    assert str(tmp_path) not in result.text


# --- options and refusals --------------------------------------------------------------------------------


@pytest.mark.parametrize("job,options,message", [
    (minimal(), {}, "role ps has no image"),
    (minimal(image="i"), {"target": "tfjob"}, "--to tfjob"),
    (minimal(image="i"), {"fmt": "toml"}, "-o toml"),
    (minimal(image="i"), {"name": "Bad_Name"}, "JobSet name 'Bad_Name' (--name)"),
    (minimal(name="a" * 48, image="i", roles={"ps": {"count": 1}, "worker": {"count": 100}}), {}, "is too long"),
    (minimal(name="9lives", image="i"), {}, "starting with a letter"),
    (minimal(image="i", style="custom", cluster_spec="both",
             roles={"ps": {"count": 10_000}, "worker": {"count": 10_000}}),
     {}, "MiB Kubernetes stores"),
    (minimal(image="i"), {"namespace": "Not OK"}, "--namespace"),
    (minimal(image="i"), {"workdir": "rel"}, "--workdir"),
    (minimal(image="i"), {"volumes": {"nope": "emptyDir"}}, "--volume nope"),
    (minimal(image="i", volumes=[{"host_path": "/a", "container_path": "a"}]), {"volumes": {"a": "nfs:x"}},
     "--volume a=nfs:x"),
])
def test_what_cannot_become_a_jobset_is_refused_with_exit_2(job, options, message):
    with pytest.raises(UsageError) as e:
        export(load_dict(job), **options)
    assert message in str(e.value) and e.value.exit_code == 2


def test_names_namespace_and_image_from_the_options():
    manifest = _manifest(minimal(name="ml/mnist.v2"), image="reg/tf:2", namespace="team-a")
    assert manifest["metadata"]["name"] == "ml-mnist-v2" and manifest["metadata"]["namespace"] == "team-a"
    assert {c["image"] for r in manifest["spec"]["replicatedJobs"]
            for c in r["template"]["spec"]["template"]["spec"]["containers"]} == {"reg/tf:2"}
    hosts = {host for _, _, host, _ in pods(manifest)}
    assert "ml-mnist-v2-worker-0-1.ml-mnist-v2" in hosts
    assert _manifest(minimal(name="ml/mnist"), image="i", name="short")["metadata"]["name"] == "short"


def test_tensorboard_runs_on_the_logdir_outside_the_cluster():
    manifest = _manifest(EVERY_ROLE)
    tb = _rjob(manifest, "tensorboard")["template"]["spec"]
    container = tb["template"]["spec"]["containers"][0]
    assert container["command"] == ["tensorboard", "--logdir", "ckpt", "--port", "6006", "--bind_all"]
    assert container["ports"] == [{"name": "http", "containerPort": 6006, "protocol": "TCP"}]
    assert "podFailurePolicy" not in tb and tb["template"]["spec"]["restartPolicy"] == "OnFailure"
    assert "tensorboard" not in manifest["spec"]["successPolicy"]["targetReplicatedJobs"]
    assert all("tensorboard" not in r.get("targetReplicatedJobs", [])
               for r in manifest["spec"]["failurePolicy"]["rules"])


def _templates(tmp_path, name, text):
    (tmp_path / name / "jobset").mkdir(parents=True)
    (tmp_path / name / "jobset" / "replicated_job.json.j2").write_text(text)
    return str(tmp_path / name)


def test_custom_templates_override_and_broken_ones_are_reported(tmp_path):
    default = (ROOT / "app_templates" / "jobset" / "replicated_job.json.j2").read_text()
    custom = _templates(tmp_path, "custom", default.replace('"replicas": 1,', '"replicas": 1, "groupName": "tf",'))
    manifest = _manifest(minimal(image="i"), templates_dir=custom)
    assert {r["groupName"] for r in manifest["spec"]["replicatedJobs"]} == {"tf"} and crd_errors(manifest) == []
    with pytest.raises(RenderError, match="must keep the name 'ps'"):
        _manifest(minimal(image="i"), templates_dir=_templates(tmp_path, "renamed", '{"name": "other"}'))
    with pytest.raises(RenderError, match="undefined"):
        _manifest(minimal(image="i"), templates_dir=_templates(tmp_path, "undefined", '{"name": {{ nope }}}'))


# --- the verb: marathon-tf export (CLI) and Job.export (API) -----------------------------------------

def test_the_export_verb_prints_the_manifest_and_lists_what_did_not_translate_on_stderr():
    from click.testing import CliRunner

    from marathon_tf.user.cli import cli

    job = str(ROOT / "examples" / "mnist-ps-strategy" / "job.json")
    r = CliRunner().invoke(cli, ["export", job])
    assert r.exit_code == 0, r.output
    manifest = yaml.safe_load(r.stdout)
    assert manifest["kind"] == "JobSet" and not crd_errors(manifest)
    said = [line for line in r.stderr.splitlines() if "not translated to jobset" in line]
    assert said and all(line.startswith(f"warning: {job}: ") for line in said)
    assert json.loads(manifest["metadata"]["annotations"]["marathon-tf/untranslatable"]) == \
        [line.split(": ")[2] for line in said]
    as_json = CliRunner().invoke(cli, ["export", job, "-o", "json", "--name", "moved", "--volume", "ckpt=pvc:shared"])
    assert as_json.exit_code == 0, as_json.output
    moved = json.loads(as_json.stdout)
    assert moved["metadata"]["name"] == "moved" and "shared" in as_json.stdout
    assert "volumes[0].host_path" not in as_json.stderr  # the volume was named: nothing lost
    # --strict: exit 2, the list, nothing on stdout
    strict = CliRunner().invoke(cli, ["export", job, "--strict"])
    assert strict.exit_code == 2 and strict.stdout == "" and "fetch[0]: not translated" in strict.stderr
    bad = CliRunner().invoke(cli, ["export", job, "--volume", "ckpt"])
    assert bad.exit_code == 2 and "PATH=SOURCE" in bad.stderr


def test_job_export_is_the_same_as_the_verb():
    from marathon_tf import Job

    job = Job.from_file(ROOT / "examples" / "keras-multiworker" / "job.json")
    result = job.export("jobset", fmt="json")
    assert json.loads(result.text) == result.manifest and result.keys == [e.split(": ")[0] for e in
                                                                        result.untranslatable]
    with pytest.raises(Exception) as raised:
        job.export("jobset", strict=True)
    assert getattr(raised.value, "exit_code", None) == 2


def test_constraints_per_task_carry_what_meant_something_per_task():
    result = export(load_dict(minimal(image="i", constraints_per_task=[["hostname", "UNIQUE"],
                                                                       ["rack", "LIKE", "r1|r2"]])))
    assert result.untranslatable == ["constraints_per_task[0]: UNIQUE per task compared each task with its own app's "
                                     "instances on Marathon: it constrained nothing across pods"]
    manifest = yaml.safe_load(result.text)
    worker = next(j for j in manifest["spec"]["replicatedJobs"] if j["name"] == "worker")
    terms = worker["template"]["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert {"key": "rack", "operator": "In", "values": ["r1", "r2"]} in terms[0]["matchExpressions"]


def test_what_the_doc_says_is_listed_is_what_is_listed():
    """Issue 43, item 10: docs/leaving-mesos.md said a key is "listed when set", but a key set to the default
    (every example writes ``"window_seconds": 600``) is not listed. The doc says what the code does: listed
    when not the default."""
    base = minimal(image="i", restart={"max_failures": 3})
    default = export(load_dict({**base, "restart": {"max_failures": 3, "window_seconds": 600}}), "jobset")
    changed = export(load_dict({**base, "restart": {"max_failures": 3, "window_seconds": 900}}), "jobset")
    assert not any("restart.window_seconds" in line for line in default.untranslatable)
    assert any("restart.window_seconds" in line for line in changed.untranslatable)
    doc = (ROOT / "docs" / "leaving-mesos.md").read_text()
    assert "listed when set" not in doc and "| `restart.window_seconds`, `max_preemptions` | listed when not the " \
                                            "default:" in doc
