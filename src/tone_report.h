/* tone_report.h - statistics derived from gf_channel_stats, and reports:
 * over 256 bins at depth 8, 65536 at depth 16 (gf_stats_bins); a 16-bit
 * image's JSON report has "depth": 16 and histograms of 65536 entries. */
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

/* --summary: the statistics of every pixel of every file of a batch, per
 * channel name (gray, red, green, blue, alpha), from the files' own, over
 * the bins of their depth. Files of one depth only: a file of the other
 * depth marks the summary mixed, and printing it then fails (-1 and an
 * error, nothing printed), a usage error. */
enum { GF_SUMMARY_CHANNELS = 5 };
typedef struct {
    unsigned long long files, pixels;
    int depth;  /* the files': 8 or 16 */
    int mixed;  /* a file of the other depth came */
    int present[GF_SUMMARY_CHANNELS];
    gf_channel_stats channel[GF_SUMMARY_CHANNELS];
} gf_stats_summary;
void gf_stats_summary_add(gf_stats_summary *summary, int width, int height, int channels,
                          const gf_channel_stats *per_channel);
int gf_stats_summary_print(FILE *out, gf_stats_format format, const gf_stats_summary *summary);

#endif
