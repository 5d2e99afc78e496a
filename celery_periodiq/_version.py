"""The version of celery_periodiq: one place, read by the build and by the beat's heartbeat."""

__version__ = "0.1.0"
