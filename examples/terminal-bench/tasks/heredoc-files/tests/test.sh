#!/bin/bash
# Reward 1 when every file holds exactly the text the instruction gives.
mkdir -p /logs/verifier
expected=$(printf '%s\n' '# deploy settings' 'TARGET=$HOME/releases' 'STAMP=`date +%s`' 'GREETING="tabs	and  spaces"')
reward=1
[ "$(cat /app/deploy.env 2>/dev/null)" = "$expected" ] || reward=0
[ "$(wc -l < /app/deploy.env 2>/dev/null)" = 4 ] || reward=0
for host in alpha beta gamma; do
  [ "$(cat "/app/hosts/$host.conf" 2>/dev/null)" = "name=$host" ] || reward=0
done
[ "$(ls /app/hosts 2>/dev/null | wc -l)" = 3 ] || reward=0
echo "$reward" > /logs/verifier/reward.txt
