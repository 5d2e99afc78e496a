"""``python -m celery_periodiq.localredis``: see :func:`celery_periodiq.localredis.main`."""

from celery_periodiq.localredis.command import main

if __name__ == "__main__":
    main()
