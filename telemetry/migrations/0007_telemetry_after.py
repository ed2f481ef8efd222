import time

from django.db import migrations, models


def rotated_files_so_far_are_read(apps, schema_editor):
    """A run made before rotated files were read one by one has read them the old way: only
    those rotated from now on are unread."""
    Run = apps.get_model("telemetry", "Run")
    Run.objects.update(telemetry_after=time.time_ns())


class Migration(migrations.Migration):
    dependencies = [("telemetry", "0006_dashboard")]

    operations = [
        migrations.AddField(
            model_name="run",
            name="telemetry_after",
            field=models.BigIntegerField(default=0),
        ),
        migrations.RunPython(rotated_files_so_far_are_read, migrations.RunPython.noop),
    ]
