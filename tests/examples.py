"""Texts several test modules share."""

# The spec's example telemetry.toml ("Laying it out"), comments and all.
SPEC_EXAMPLE = """\
x = "step"                       # what every panel is drawn against

[[panel]]
title = "Loss"
y = ["loss", "eval_loss"]        # up to 4 keys on one panel
scale = "log"

[[panel]]
title = "F1"
y = ["eval_strict_f1", "eval_typed_f1"]
min = 0.9
max = 1.0
rule = 0.95                      # one horizontal line, like a check's threshold

[[panel]]
y = "eval_leak_recall"
wide = true                      # spans both columns

[[stat]]
title = "Samples/s"
y = "eval_samples_per_second"
reduce = "last"                  # last, min or max
"""
