#!/bin/bash
cd /app
python3
import vault
n = vault.challenge()
vault.unlock(n * n)
exit()
cat /app/unlocked.txt
