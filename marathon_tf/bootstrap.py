"""``python -m marathon_tf.bootstrap [options] -- CMD…``: the command a rendered Marathon app runs
in its task (the same as ``marathon-tf bootstrap``), kept here so that the command line documented
and rendered into every app stays short and stable. The bootstrap itself is on the task side:
:mod:`marathon_tf.task.bootstrap`.
"""

import sys

from marathon_tf.task.bootstrap import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
