#!/bin/bash
# Reward 1 when a clean build of /app succeeds and the program's answers are right.
mkdir -p /logs/verifier
reward=0
if cd /app && make clean >/dev/null && make >/logs/verifier/make.log 2>&1 &&
  [ "$(./stats 2 4 4 4 5 5 7 9)" = "mean 5.00 sd 2.00" ] &&
  [ "$(./stats 1 2 3 4)" = "mean 2.50 sd 1.12" ]; then
  reward=1
fi
echo "$reward" > /logs/verifier/reward.txt
