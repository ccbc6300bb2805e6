/* tone_report.h - statistics derived from gf_channel_stats, and reports. */
#ifndef GF_TONE_REPORT_H
#define GF_TONE_REPORT_H

#include <stdio.h>

#include "tone.h"

typedef enum { GF_STATS_NONE = 0, GF_STATS_TABLE, GF_STATS_JSON } gf_stats_format;

typedef struct {
    int min, max;
    int median;   /* the smallest v with at least half of the pixels <= v */
    double mean;
    double std;   /* population standard deviation */
} gf_channel_summary;

void gf_stats_summarize(const gf_channel_stats *stats, gf_channel_summary *out);
/* "gray", "alpha", "red", "green", "blue" */
const char *gf_channel_name(int channels, int c);
void gf_stats_print(FILE *out, gf_stats_format format, const char *file, int width, int height,
                    int channels, const gf_channel_stats *per_channel);

#endif
