"""docker/Dockerfile.cpu and Dockerfile.gpu: pinned official TF base, marathon-tf installed from the
copied source, no ENTRYPOINT that would swallow Marathon's cmd. (They cannot be built here.)"""

import io
import os
import re

import pytest
from dockerfile_parse import DockerfileParser

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def parse(kind):
    with open(os.path.join(ROOT, "docker", f"Dockerfile.{kind}"), "rb") as f:
        parser = DockerfileParser(fileobj=io.BytesIO(f.read()))
    return parser, [(i["instruction"], i["value"]) for i in parser.structure]


@pytest.mark.parametrize("kind,tag", [("cpu", "2.21.0"), ("gpu", "2.21.0-gpu")])
def test_base_image_is_the_pinned_official_tensorflow_release(kind, tag):
    parser, _ = parse(kind)
    image, _, digest = parser.baseimage.partition("@")
    assert image == f"tensorflow/tensorflow:{tag}"
    assert digest == "" or re.fullmatch(r"sha256:[0-9a-f]{64}", digest)


@pytest.mark.parametrize("kind", ["cpu", "gpu"])
def test_marathon_tf_is_installed_from_the_copied_source(kind):
    _, steps = parse(kind)
    copies = [v.split() for i, v in steps if i == "COPY"]
    for *sources, _dest in copies:
        for source in sources:
            assert os.path.exists(os.path.join(ROOT, source)), f"COPY source {source} missing from the repo"
    copied = {s for *sources, _ in copies for s in sources}
    assert {"pyproject.toml", "marathon_tf", "app_templates"} <= copied
    runs = " ".join(v for i, v in steps if i == "RUN")
    assert re.search(r"pip install --no-cache-dir /tmp/marathon-tf\b", runs)
    assert "import marathon_tf.bootstrap" in runs  # the entry point a rendered cmd runs
    assert "tensorflow" not in runs.replace("/tmp/marathon-tf", "")  # TF comes from the base, not pip


@pytest.mark.parametrize("kind", ["cpu", "gpu"])
def test_no_entrypoint_swallows_marathons_cmd(kind):
    parser, steps = parse(kind)
    assert [i for i, _ in steps if i == "ENTRYPOINT"] == []
    assert parser.cmd == '["marathon-tf", "--help"]'
    assert parser.envs.get("PYTHONUNBUFFERED") == "1"


def test_the_gpu_image_asks_old_mesos_agents_for_the_nvidia_driver_volume():
    # apache/mesos src/slave/containerizer/mesos/isolators/gpu/volume.cpp, NvidiaVolume::shouldInject: agents
    # before 1.8 mount the driver volume only into images with the com.nvidia.volumes.needed label.
    parser, _ = parse("gpu")
    assert parser.labels.get("com.nvidia.volumes.needed") == "nvidia_driver"
    assert "com.nvidia.volumes.needed" not in parse("cpu")[0].labels
