"""An agent as the offer matcher reads it and what it has free to offer (:mod:`marathon_tf.mesos.agents`).

Source: apache/mesos ``src/master/allocator/mesos/hierarchical.cpp`` (an agent offers its total less
what is allocated), ``include/mesos/v1/mesos.proto`` (``AgentInfo``).
"""

from __future__ import annotations

from marathon_tf.mesos.agents import AgentInfo, free_resources
from marathon_tf.mesos.resources import Resource, parse_resources


def test_free_is_the_total_less_what_is_used_per_name_and_role():
    agent = AgentInfo(hostname="a1", resources=parse_resources("cpus(ml):2;cpus:1;mem:1024;gpus:2;"
                                                                 "ports:[31000-31003];zones:{a}"))
    used = [Resource("cpus", 1.5, "ml"), Resource("cpus", 2.0), Resource("ports", ((31001, 31002),)),
            Resource("gpus", 1.0)]
    assert free_resources(agent, used) == [
        Resource("cpus", 0.5, "ml"), Resource("cpus", 0.0), Resource("mem", 1024.0), Resource("gpus", 1.0),
        Resource("ports", ((31000, 31000), (31003, 31003))), Resource("zones", frozenset({"a"}))]
    assert agent.gpus == 2 and agent.roles() == {"*", "ml"} and agent.enforced
