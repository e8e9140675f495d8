"""``python -m marathon_tf.user.cli``: the ``marathon-tf`` command."""

from marathon_tf.user.cli.root import main

if __name__ == "__main__":
    main()
