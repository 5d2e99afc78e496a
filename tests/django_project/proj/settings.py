"""Settings of the test project: the schedule's Redis and the broker from TEST_REDIS_URL
and TEST_BROKER_URL, the database from TEST_DJANGO_DB; PERIODIQ_CELERY_APP from the
environment when a test names the app that way."""

import os

SECRET_KEY = "tests-only-not-secret"
DEBUG = True
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
USE_TZ = True
ROOT_URLCONF = "proj.urls"
STATIC_URL = "static/"
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "celery_periodiq.contrib.django",
]
MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ.get("TEST_DJANGO_DB", ":memory:"),
    }
}

CELERY_BROKER_URL = os.environ.get("TEST_BROKER_URL", "memory://")
CELERY_PERIODIQ_REDIS_URL = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:1/0")

if os.environ.get("TEST_PERIODIQ_CELERY_APP"):
    PERIODIQ_CELERY_APP = os.environ["TEST_PERIODIQ_CELERY_APP"]
