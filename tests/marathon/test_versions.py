"""What differs between Marathon versions (marathon_tf/marathon/versions.py): each answer at the releases
where Marathon's source changes it.

Sources (mesosphere/marathon; ``vX:`` a tag, ``releases/1.x:`` a branch tip; mirrored in /work/.mirror):

* unreachableStrategy: ``v1.4.5:`` vs ``v1.4.6:src/main/scala/mesosphere/marathon/state/UnreachableStrategy.scala``
  (validator ``>= 1.second``/``<`` → ``>= 0.second``/``<=``); default 5/10 min in ``v1.4.8:``, 0 s in ``v1.4.9:``;
  ``v1.4.6:changelog.md`` migrates 1/2 to 0/0 (``MIGRATION_1_4_6_UNREACHABLE_STRATEGY``). With 1/2 an instance
  becomes inactive only when a later status update for it is processed
  (``v1.4.3:src/main/scala/mesosphere/marathon/core/instance/update/InstanceUpdater.scala``), at the latest the
  next reconciliation (``--reconciliation_interval``, 10 min: ``v1.4.3:src/main/scala/mesosphere/marathon/
  MarathonConf.scala``).
* networks: ``v1.4.3:src/main/scala/mesosphere/marathon/api/v2/json/Formats.scala`` (portMappings only under
  container.docker), ``v1.5.0:docs/docs/rest-api/public/api/v2/types/app.raml`` (``networks?``).
* IS: ``v1.5.15:`` vs ``v1.6.322:src/main/proto/marathon.proto`` (``IS = 6``); @hostname:
  ``v1.6.322:src/main/scala/mesosphere/mesos/Constraints.scala`` ``hostnameField`` (only ``hostname`` at ``v1.5.15:``).
* plan-format=light: ``src/main/scala/mesosphere/marathon/core/event/impl/stream/HttpEventStreamServlet.scala`` on
  releases/1.5 (back-ported in commit ef75f5dd8, first tag v1.5.9), 1.6, 1.7; gone in ``releases/1.8:``.
* event redirect: ``v1.7.50:src/main/scala/mesosphere/marathon/api/LeaderProxyFilter.scala``; no leader 503 →
  502 between ``v1.7.50:`` and ``v1.7.149:`` (same file).
* "Connection to leader refused.": 502 in ``v1.4.7:``, 503 in ``v1.4.8:``, 502 in ``v1.5.0:`` (LeaderProxyFilter);
  HttpURLConnection (ConnectException only) through ``v1.6.392:``; akka-http (any StreamTcpException) in
  ``v1.6.486:src/main/scala/mesosphere/marathon/api/forwarder/AsyncUrlConnectionRequestForwarder.scala``.
* features: ``marathon_config.features`` in 1.4 – 1.11
  (``src/main/scala/mesosphere/marathon/api/v2/InfoResource.scala``).
* queue role: ``releases/1.9:docs/docs/rest-api/public/api/v2/types/queue.raml``; GPU scheduling:
  ``v1.5.7:src/main/scala/mesosphere/marathon/GpuSchedulingBehavior.scala``, ``releases/1.8:.../MarathonConf.scala``.
"""

from __future__ import annotations

import pytest

from marathon_tf.marathon.versions import NEWEST, Capabilities, MarathonVersion, capabilities, from_info, parse_version


@pytest.mark.parametrize("text, parsed", [
    ("1.4.3", (1, 4, 3)), ("1.11", (1, 11, 0)), ("1.6.322-2bf46b341", (1, 6, 322)), ("v1.7.50", (1, 7, 50)),
    ("1.5.0-SNAPSHOT", (1, 5, 0)), (" 1.10.17 ", (1, 10, 17)),
])
def test_versions_as_v2_info_says_them(text, parsed):
    v = parse_version(text)
    assert (v.major, v.minor, v.patch) == parsed and str(v) == text.strip()


@pytest.mark.parametrize("text", ["", "latest", "1", "one.two", None, 14, "1.4.3; rm -rf /"])
def test_what_is_not_a_version(text):
    assert parse_version(text) is None
    assert capabilities(text).version is None  # taken for the newest


def test_versions_compare_as_numbers():
    assert parse_version("1.4.10") > parse_version("1.4.9") > parse_version("1.4.3")
    assert parse_version("1.11.0") > parse_version("1.7.236") and parse_version("1.6.486") > parse_version("1.6.392")
    assert MarathonVersion(1, 4, 3, "1.4.3") == MarathonVersion(1, 4, 3, "v1.4.3")


def answers(version: str) -> Capabilities:
    return capabilities(version)


@pytest.mark.parametrize("version, zero, rendered", [
    ("1.4.0", False, {"inactiveAfterSeconds": 1, "expungeAfterSeconds": 2}),
    ("1.4.3", False, {"inactiveAfterSeconds": 1, "expungeAfterSeconds": 2}),
    ("1.4.5", False, {"inactiveAfterSeconds": 1, "expungeAfterSeconds": 2}),
    ("1.4.6", True, {"inactiveAfterSeconds": 0, "expungeAfterSeconds": 0}),
    ("1.4.8", True, {"inactiveAfterSeconds": 0, "expungeAfterSeconds": 0}),
    ("1.4.9", True, {"inactiveAfterSeconds": 0, "expungeAfterSeconds": 0}),
    ("1.11.24", True, {"inactiveAfterSeconds": 0, "expungeAfterSeconds": 0}),
])
def test_unreachable_strategy_per_version(version, zero, rendered):
    caps = answers(version)
    assert (caps.accepts_zero_unreachable, caps.unreachable_strategy) == (zero, rendered)
    inactive, expunge = rendered["inactiveAfterSeconds"], rendered["expungeAfterSeconds"]
    if zero:  # v1.4.6+: inactiveAfter >= 0 and <= expungeAfter
        assert 0 <= inactive <= expunge
    else:  # v1.4.0-v1.4.5: inactiveAfter >= 1 s and < expungeAfter; 1/2 is the closest to 0/0 that passes
        assert 1 <= inactive < expunge and (inactive, expunge) == (1, 2)


@pytest.mark.parametrize("strategy, old, new", [
    ({"inactiveAfterSeconds": 0, "expungeAfterSeconds": 0}, False, True),
    ({"inactiveAfterSeconds": 1, "expungeAfterSeconds": 2}, True, True),
    ({"inactiveAfterSeconds": 1, "expungeAfterSeconds": 1}, False, True),
    ({"inactiveAfterSeconds": 300, "expungeAfterSeconds": 600}, True, True),
    ({"inactiveAfterSeconds": 5, "expungeAfterSeconds": 2}, False, False),
    ("disabled", True, True), ({"inactiveAfterSeconds": 0.5, "expungeAfterSeconds": 2}, False, False),
    (None, False, False),
])
def test_which_unreachable_strategies_each_validator_takes(strategy, old, new):
    assert answers("1.4.5").accepts_unreachable(strategy) is old
    assert answers("1.4.6").accepts_unreachable(strategy) is new


@pytest.mark.parametrize("version, networks, is_op, pseudo", [
    ("1.4.0", False, False, False), ("1.4.13", False, False, False), ("1.5.0", True, False, False),
    ("1.5.15", True, False, False), ("1.6.322", True, True, True), ("1.11", True, True, True),
])
def test_what_an_app_may_use(version, networks, is_op, pseudo):
    caps = answers(version)
    assert (caps.has_networks, caps.has_constraint_is, caps.has_pseudo_fields) == (networks, is_op, pseudo)


@pytest.mark.parametrize("version, light, only_light", [
    ("1.4.3", False, False), ("1.5.8", False, False), ("1.5.9", True, False), ("1.6.322", True, False),
    ("1.7.37", True, False), ("1.7.236", True, False), ("1.8.180", False, True), ("1.11.0", False, True),
])
def test_the_event_stream_per_version(version, light, only_light):
    caps = answers(version)
    assert (caps.reads_plan_format_light, caps.light_plans_only) == (light, only_light)


@pytest.mark.parametrize("version, no_leader, unsent", [
    ("1.4.3", 503, True), ("1.4.8", 503, True), ("1.6.392", 503, True), ("1.6.486", 503, False),
    ("1.7.50", 503, False), ("1.7.149", 502, False), ("1.11.0", 502, False),
])
def test_what_a_standby_answers_per_version(version, no_leader, unsent):
    caps = answers(version)
    assert (caps.no_leader_status, caps.leader_refused_means_unsent) == (no_leader, unsent)


@pytest.mark.parametrize("version, gpu", [
    ("1.4.3", None), ("1.5.6", None), ("1.5.7", "undefined"), ("1.7.236", "undefined"), ("1.8.180", "restricted"),
    ("1.11.0", "restricted"),
])
def test_the_gpu_scheduling_default_per_version(version, gpu):
    assert answers(version).gpu_scheduling_default == gpu


def test_an_unknown_version_is_taken_for_the_newest_except_where_only_proof_will_do():
    unknown, newest = Capabilities(), capabilities(str(NEWEST))
    for name in ("accepts_zero_unreachable", "unreachable_strategy", "has_networks", "has_constraint_is",
                 "has_pseudo_fields", "reads_plan_format_light", "light_plans_only", "no_leader_status",
                 "gpu_scheduling_default"):
        assert getattr(unknown, name) == getattr(newest, name), name
    assert unknown.leader_refused_means_unsent is False  # not known: a refused write is looked for first
    assert unknown.shown == "Marathon (version unknown)" and answers("1.4.3").shown == "Marathon 1.4.3"
    assert not answers("1.3.10").supported and answers("1.4.0").supported and unknown.supported


def test_from_info_reads_the_version_and_the_features():
    caps = from_info({"version": "1.4.8", "marathon_config": {"features": ["gpu_resources"]}})
    assert caps.version == parse_version("1.4.8") and caps.features == ("gpu_resources",)
    assert from_info({"version": "1.4.8"}).features is None  # not listed: not known
    assert from_info(None) == Capabilities() and from_info({"marathon_config": []}).features is None
