#!/bin/bash
cd /app
gdb -q ./vault
run
bt
pipe printf "%016lx\n", key | tee /app/key.txt
kill
y
quit
cat /app/key.txt
