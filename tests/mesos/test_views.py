"""Mesos's and Marathon's JSON of resources and attributes, written and read back
(:mod:`marathon_tf.mesos.views`).

Sources: apache/mesos ``src/common/http.cpp`` (the summary, ``json(ObjectWriter*, ResourceIterable)``;
``*_full`` in the ENDPOINT format, ``convertResourceFormat``; attributes, ``json(ObjectWriter*, const
Attributes&)``), ``src/master/readonly_handler.cpp`` (``/master/slaves``, ``SlaveWriter``/``SlavesWriter``);
Marathon ``releases/1.8`` ``raml/OfferConversion.scala`` (``lastUnusedOffers``: ``OfferResource``,
``AgentAttribute``).
"""

from __future__ import annotations

from marathon_tf.mesos.resources import Resource, parse_attributes, parse_resources
from marathon_tf.mesos.views import (
    attributes_from_json,
    attributes_json,
    full_json,
    offer_attributes_json,
    offer_resources_json,
    resources_from_full,
    resources_from_summary,
    summary_json,
)


def test_marathons_offer_json_for_last_unused_offers():
    res = parse_resources("cpus:1;ports:[31000-31001]")
    assert offer_resources_json(res) == [{"name": "cpus", "role": "*", "scalar": 1.0},
                                         {"name": "ports", "role": "*", "ranges": [{"begin": 31000, "end": 31001}]}]
    assert offer_attributes_json(parse_attributes("rack:r1;level:2;slots:[1-4]")) == [
        {"name": "rack", "text": "r1"}, {"name": "level", "scalar": 2.0},
        {"name": "slots", "ranges": [{"begin": 1, "end": 4}]}]


def test_what_mesos_writes_reads_back_the_same():
    res = parse_resources("cpus(ml):2;cpus:1;mem:1024;ports:[31000-31002,31005-31005];zones:{a,b}")
    assert sorted(resources_from_full(full_json(res)), key=repr) == sorted(res, key=repr)
    # the summary adds the roles up and writes the four scalars always; zeros are left out again
    assert sorted(resources_from_summary(summary_json(res)), key=repr) == sorted(
        [Resource("cpus", 3.0), Resource("mem", 1024.0), Resource("ports", ((31000, 31002), (31005, 31005))),
         Resource("zones", frozenset({"a", "b"}))], key=repr)
    assert resources_from_summary({"cpus": 2, "gpus": 0}, "ml") == [Resource("cpus", 2.0, "ml")]
    attrs = parse_attributes("rack:r1;level:2;slots:[1-4]")
    assert attributes_from_json(attributes_json(attrs)) == attrs


def test_a_reserved_resource_is_of_its_reservations_role():
    item = {"name": "cpus", "type": "SCALAR", "scalar": {"value": 2}, "role": "*",
            "reservations": [{"type": "STATIC", "role": "ml"}, {"type": "DYNAMIC", "role": "ml/team"}]}
    assert resources_from_full([item, {"name": "odd"}, "not an object"]) == [Resource("cpus", 2.0, "ml/team")]
