#!/bin/bash
# Reward 1 when /app/key.txt holds the key whose check value the last run left.
mkdir -p /logs/verifier
reward=0
if python3 - <<'PY'
import re, sys
key = open("/app/key.txt").read().strip()
check = open("/app/key.check").read().strip()
ok = re.fullmatch(r"[0-9a-f]{16}", key) and f"{int(key, 16) * 0x9E3779B97F4A7C15 % 2**64:016x}" == check
sys.exit(0 if ok else 1)
PY
then
  reward=1
fi
echo "$reward" > /logs/verifier/reward.txt
