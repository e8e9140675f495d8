"""A single-machine Marathon (1.8 REST API) and Mesos-DNS: ``marathon-tf deploy --local`` and the test bed.

``LocalCluster`` runs the aiohttp Marathon server, the Mesos-DNS DNS and HTTP
servers and the task processes on a background event loop; ``serve`` blocks
until SIGINT/SIGTERM (``marathon-tf local serve``). They are imported on first
use, so that ``local.ports`` (which ``local serve`` checks first) costs no aiohttp.
"""

from typing import Any

__all__ = ["LocalCluster", "serve", "MARATHON_VERSION"]

_WHERE = {"LocalCluster": "cluster", "serve": "cluster", "MARATHON_VERSION": "server"}


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'marathon_tf.local' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
    globals()[name] = value
    return value
