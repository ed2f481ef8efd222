"""Secret values are stored encrypted: the values stored before are encrypted in place."""

from __future__ import annotations

from django.db import migrations, models

import telemetry.models
from telemetry import encryption


def seal_values(apps, schema_editor):
    Secret = apps.get_model("telemetry", "Secret")
    for secret in Secret.objects.only("value").iterator():
        secret.sealed = encryption.seal(secret.value)
        secret.value = ""
        secret.save(update_fields=["sealed", "value"])


def unseal_values(apps, schema_editor):
    Secret = apps.get_model("telemetry", "Secret")
    for secret in Secret.objects.only("sealed").iterator():
        secret.value = encryption.unseal(secret.sealed)
        secret.save(update_fields=["value"])


class Migration(migrations.Migration):
    dependencies = [("telemetry", "0001_initial")]

    operations = [
        migrations.AddField(
            model_name="secret",
            name="sealed",
            field=telemetry.models.SealedField(default=""),
            preserve_default=False,
        ),
        migrations.AlterField(
            model_name="secret", name="value", field=models.TextField(blank=True)
        ),
        migrations.RunPython(seal_values, unseal_values, elidable=False),
        migrations.RemoveField(model_name="secret", name="value"),
    ]
