"""A single-machine Marathon (1.8 REST API) and Mesos-DNS: ``marathon-tf deploy --local`` and the test bed.

``LocalCluster`` runs the aiohttp Marathon server, the Mesos-DNS DNS and HTTP
servers and the task processes on a background event loop; ``serve`` blocks
until SIGINT/SIGTERM (``marathon-tf local serve``).
"""

from .cluster import LocalCluster, serve
from .server import MARATHON_VERSION

__all__ = ["LocalCluster", "serve", "MARATHON_VERSION"]
