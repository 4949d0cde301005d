#ifndef STATS_H
#define STATS_H
double mean(const int *values, int count);
double stddev(const int *values, int count);
#endif
