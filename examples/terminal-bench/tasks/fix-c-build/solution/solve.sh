#!/bin/bash
cd /app
make 2>&1 | tail -n 5
# The header names the function mean; the source calls it average.
sed -i 's/^double average(/double mean(/' stats.c
# sqrt comes from libm, which the link line leaves out.
sed -i 's/^\t$(CC) -o $@ $^$/\t$(CC) -o $@ $^ -lm/' Makefile
make
./stats 2 4 4 4 5 5 7 9
