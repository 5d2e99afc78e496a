"""One unmanaged model: it gives the admin its page and Django the view, add, change and
delete permissions of "periodic entry", and no table (the schedule stays in Redis)."""

from __future__ import annotations

from django.db import models


class PeriodicEntry(models.Model):  # type: ignore[misc]
    """An entry of the schedule, as far as Django's admin and permissions know it."""

    name = models.CharField(max_length=200, primary_key=True)

    class Meta:
        managed = False
        db_table = "periodiq_entry_never_created"
        verbose_name = "periodic entry"
        verbose_name_plural = "periodic entries"

    def __str__(self) -> str:
        return str(self.name)
