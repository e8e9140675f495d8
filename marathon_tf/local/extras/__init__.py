"""What only ``local serve`` asks of the local cluster (see :mod:`marathon_tf.local` for the split).

The imitation imports these only when asked for: ``persist.py`` with ``LocalCluster(persist=True)``
(the state kept on disk and reloaded), ``ui.py`` with ``ui_dir`` (``local serve --ui``: the Marathon
web UI served at ``/ui/``).
"""
