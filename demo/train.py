"""A stand-in for a training run: writes the telemetry a real one would.

A falling, noisy loss; an eval every 50 steps; warm-up then cosine learning rate; throughput.
DEMO_STEPS and DEMO_DELAY (seconds a step) set its length and pace.
"""

import json
import math
import os
import random
import time

steps = int(os.environ.get("DEMO_STEPS", "2000"))
delay = float(os.environ.get("DEMO_DELAY", "0.05"))
warmup = steps // 20
rng = random.Random(7)
path = os.environ["DIVERGENT_TELEMETRY_PATH"]

print(f"training for {steps} steps")
with open(path, "a") as f:
    for step in range(1, steps + 1):
        progress = step / steps
        lr = 3e-4 * (step / warmup if step < warmup else 0.5 * (1 + math.cos(math.pi * progress)))
        loss = 2.3 * math.exp(-4 * progress) + 0.04 + rng.gauss(0, 0.03 * (1 - progress) + 0.005)
        point = {"step": step, "loss": round(max(loss, 0.01), 5), "lr": lr}
        point["grad_norm"] = round(abs(rng.gauss(1.0, 0.3)) * (1 - 0.5 * progress), 4)
        point["train_samples_per_second"] = round(rng.gauss(412, 12), 1)
        if step % 50 == 0:
            eval_loss = 1.9 * math.exp(-4 * progress) + 0.05 + rng.gauss(0, 0.01)
            point["eval_loss"] = round(eval_loss, 5)
            point["eval_strict_f1"] = round(
                min(0.999, 0.88 + 0.11 * progress + rng.gauss(0, 0.004)), 4
            )
            point["eval_typed_f1"] = round(
                min(0.999, 0.9 + 0.095 * progress + rng.gauss(0, 0.004)), 4
            )
            point["eval_samples_per_second"] = round(rng.gauss(1650, 40), 1)
            point["epoch"] = round(step / (steps / 3), 3)
            print(f"step {step}: eval_loss {point['eval_loss']}")
        f.write(json.dumps(point) + "\n")
        f.flush()
        time.sleep(delay)
print("done")
