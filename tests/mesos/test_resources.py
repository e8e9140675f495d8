"""Agents' resources and attributes in Mesos's syntax, and their arithmetic (:mod:`marathon_tf.mesos.resources`).

Sources: apache/mesos ``src/common/resources.cpp`` (``Resources::fromSimpleString``),
``src/common/values.cpp`` (``parse``; ranges written ``[a-b, c-d]``, kept sorted and merged),
``src/common/attributes.cpp`` (``Attributes::parse``),
``src/common/http.cpp`` (``json(ObjectWriter*, ResourceIterable)``: cpus/gpus/mem/disk always);
Marathon ``releases/1.8`` ``Constraints.getValueString`` (an attribute's text).
"""

from __future__ import annotations

import pytest

from marathon_tf.mesos.resources import (
    Resource,
    attribute_text,
    coalesce,
    parse_attributes,
    parse_resources,
    ports_resource,
    ranges_minus,
    ranges_size,
)
from marathon_tf.mesos.views import attributes_json, full_json, summary_json


def test_the_issues_example_parses_as_mesos_does():
    res = parse_resources("cpus:4;mem:8192;disk:20000;gpus:2;ports:[31000-32000]")
    assert res == [Resource("cpus", 4.0), Resource("mem", 8192.0), Resource("disk", 20000.0),
                   Resource("gpus", 2.0), Resource("ports", ((31000, 32000),))]
    assert summary_json(res) == {"cpus": 4.0, "gpus": 2.0, "mem": 8192.0, "disk": 20000.0, "ports": "[31000-32000]"}


def test_roles_ranges_and_sums():
    res = parse_resources("cpus(ml):2; cpus:1 ;cpus(ml):1;ports:[31005-31010,31000-31004, 32000-32001]")
    assert Resource("cpus", 3.0, "ml") in res and Resource("cpus", 1.0) in res
    assert Resource("ports", ((31000, 31010), (32000, 32001))) in res  # coalesced, sorted
    assert summary_json(res)["ports"] == "[31000-31010, 32000-32001]"
    assert summary_json(res)["cpus"] == 4.0 and summary_json([])["gpus"] == 0.0
    full = full_json(res)
    assert {"name": "cpus", "type": "SCALAR", "role": "ml", "scalar": {"value": 3.0},
            "reservations": [{"type": "STATIC", "role": "ml"}]} in full
    assert {"name": "ports", "type": "RANGES", "role": "*",
            "ranges": {"range": [{"begin": 31000, "end": 31010}, {"begin": 32000, "end": 32001}]}} in full


@pytest.mark.parametrize("text, message", [
    ("cpus", "expecting name:value"),
    ("cpus:4:5", "expecting name:value"),
    ("cpus(:4", "mismatched parentheses"),
    ("cpus:four", "'four' is not a number"),
    ("gpus:1.5", "whole number"),
    ("ports:31000", "must be ranges"),
    ("ports:[32000-31000]", "begin <= end"),
    ("mem:-1", "non-negative"),
    ("cpus:{a,b}", "must be a number"),
])
def test_bad_resources_are_one_line_naming_the_part(text, message):
    with pytest.raises(ValueError) as e:
        parse_resources(text)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_attributes_text_scalars_ranges():
    attrs = parse_attributes("rack:r1;level:2;slots:[1-4];zone:eu-1a")
    assert attrs == {"rack": "r1", "level": 2.0, "slots": ((1, 4),), "zone": "eu-1a"}
    assert attributes_json(attrs) == {"rack": "r1", "level": 2.0, "slots": "[1-4]", "zone": "eu-1a"}
    assert [attribute_text(v) for v in attrs.values()] == ["r1", "2", "[1-4]", "eu-1a"]
    assert attribute_text(0.5) == "0.5"
    with pytest.raises(ValueError, match="expecting name:value"):
        parse_attributes("rack")


def test_ranges_are_kept_merged_and_single_ports_taken_out():
    assert coalesce([(5, 6), (1, 3), (4, 4), (9, 9)]) == ((1, 6), (9, 9))
    assert ranges_minus(((31000, 31004),), [31000, 31002, 40000]) == ((31001, 31001), (31003, 31004))
    assert ranges_size(((1, 3), (10, 10))) == 4
    assert ports_resource([31002, 31000, 31001], "ml") == Resource("ports", ((31000, 31002),), "ml")
