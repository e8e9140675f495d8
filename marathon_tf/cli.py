"""``python -m marathon_tf.cli`` and ``import marathon_tf.cli``: the command-line entry point under its
first, short name (scripts and checks that use it keep working). The CLI itself is on the user's side:
:mod:`marathon_tf.user.cli`; the ``marathon-tf`` console script calls it directly.
"""

from marathon_tf.user.cli import cli, main

__all__ = ["cli", "main"]

if __name__ == "__main__":
    main()
