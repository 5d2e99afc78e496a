"""Make the test project's users (run with DJANGO_SETTINGS_MODULE=proj.settings):

- ``viewer``: staff, may view periodic entries;
- ``clerk``: staff, may view and add them;
- ``keeper``: staff, in the group "schedulers" that may view, add, change and delete them.

Every password is ``pw-<name>``.
"""

import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "proj.settings")
django.setup()

from django.contrib.auth.models import Group, Permission, User  # noqa: E402


def perms(*actions: str) -> list[Permission]:
    return [
        Permission.objects.get(content_type__app_label="periodiq", codename=f"{a}_periodicentry")
        for a in actions
    ]


def staff(name: str) -> User:
    return User.objects.create_user(name, password=f"pw-{name}", is_staff=True)


staff("viewer").user_permissions.set(perms("view"))
staff("clerk").user_permissions.set(perms("view", "add"))
schedulers = Group.objects.create(name="schedulers")
schedulers.permissions.set(perms("view", "add", "change", "delete"))
staff("keeper").groups.add(schedulers)
