#!/bin/bash
# Reward 1 when /app/unlocked.txt holds the last challenge and its digest.
mkdir -p /logs/verifier
reward=0
if python3 - <<'PY'
import hashlib, sys
number = open("/app/.challenge").read().strip()
got = open("/app/unlocked.txt").read().split()
sys.exit(0 if got == [number, hashlib.sha256(f"{number}:interactive".encode()).hexdigest()] else 1)
PY
then
  reward=1
fi
echo "$reward" > /logs/verifier/reward.txt
