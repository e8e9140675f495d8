"""How the in-process clusters of the end-to-end and placement tests offer resources to a task Marathon queues."""

#: ``--revive-interval 0`` (a user's option of ``local serve`` and ``deploy --local``): a relaunched task is
#: offered at once. Marathon's stock ``--min_revive_offers_interval`` (5 s: a killed task is relaunched up to 5 s
#: after its backoff) is played end to end by the one test marked ``stock_revive_interval``
#: (``tests/system/lifecycle/test_lifecycle_e2e.py``, named for it); the rate limiter itself is modelled and
#: tested in ``tests/local/test_local_stock.py``.
FAST_OFFERS = {"revive_interval": 0.0}
