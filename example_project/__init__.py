"""The example Celery project (see README); it grows with each capability."""
