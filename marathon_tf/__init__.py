"""marathon-tf: run distributed TensorFlow on Apache Mesos through Marathon.

Importing this package is cheap: it never imports TensorFlow, and the heavy
modules (the CLI, the local runner) are imported only when used.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
