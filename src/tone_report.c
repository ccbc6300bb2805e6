/* tone_report.c - statistics derived from what a backend measures, and their
 * table and JSON reports. */
#include "tone_report.h"

#include <math.h>
#include <string.h>

#include "util.h"

void gf_stats_summarize(const gf_channel_stats *s, gf_channel_summary *out)
{
    const int bins = gf_stats_bins(s);
    unsigned long long n = 0;
    for (int v = 0; v < bins; v++)
        n += s->histogram[v];
    out->min = s->min;
    out->max = s->max;
    out->median = 0;
    unsigned long long below = 0;
    for (int v = 0; v < bins; v++) {
        below += s->histogram[v];
        if (2 * below >= n) {
            out->median = v;
            break;
        }
    }
    /* population variance = (n * sum_sq - sum^2) / n^2, exact numerator */
    unsigned __int128 numerator = (unsigned __int128)n * s->sum_squares -
                                  (unsigned __int128)s->sum * s->sum;
    long double nn = (long double)n;
    out->mean = n ? (double)((long double)s->sum / nn) : 0.0;
    out->std = n ? (double)sqrtl((long double)numerator / (nn * nn)) : 0.0;
}

const char *gf_channel_name(int channels, int c)
{
    static const char *const names[4][4] = {
        {"gray"}, {"gray", "alpha"}, {"red", "green", "blue"}, {"red", "green", "blue", "alpha"}};
    return names[channels - 1][c];
}

static void print_json_string(FILE *out, const char *s)
{
    fputc('"', out);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            fprintf(out, "\\%c", ch);
        else if (ch < 0x20)
            fprintf(out, "\\u%04x", ch);
        else
            fputc(ch, out);
    }
    fputc('"', out);
}

/* One channel of a JSON report: its object, after a comma unless first. */
static void print_json_channel(FILE *out, const char *name, const gf_channel_stats *stats,
                               int first)
{
    gf_channel_summary s;
    gf_stats_summarize(stats, &s);
    fprintf(out, "%s\n  {\"name\": \"%s\", \"min\": %d, \"max\": %d, \"mean\": %.17g, "
                 "\"std\": %.17g, \"median\": %d, \"histogram\": [",
            first ? "" : ",", name, s.min, s.max, s.mean, s.std, s.median);
    for (int v = 0; v < gf_stats_bins(stats); v++)
        fprintf(out, "%s%llu", v ? ", " : "", stats->histogram[v]);
    fprintf(out, "]}");
}

/* One channel of a table report: its header row first. */
static void print_table_header(FILE *out)
{
    fprintf(out, "%-8s %5s %5s %10s %10s %7s\n", "channel", "min", "max", "mean", "std", "median");
}

static void print_table_channel(FILE *out, const char *name, const gf_channel_stats *stats)
{
    gf_channel_summary s;
    gf_stats_summarize(stats, &s);
    fprintf(out, "%-8s %5d %5d %10.4f %10.4f %7d\n", name, s.min, s.max, s.mean, s.std, s.median);
}

static void print_json(FILE *out, const char *file, int width, int height, int channels,
                       const gf_channel_stats *per_channel)
{
    fprintf(out, "{\"file\": ");
    print_json_string(out, file);
    fprintf(out, ", \"width\": %d, \"height\": %d, ", width, height);
    if (channels > 0 && per_channel[0].depth == 16)  /* 8-bit reports keep their keys */
        fprintf(out, "\"depth\": 16, ");
    fprintf(out, "\"channels\": [");
    for (int c = 0; c < channels; c++)
        print_json_channel(out, gf_channel_name(channels, c), &per_channel[c], c == 0);
    fprintf(out, "\n]}\n");
}

static void print_table(FILE *out, const char *file, int width, int height, int channels,
                        const gf_channel_stats *per_channel)
{
    fprintf(out, "%s: %dx%d, %d channel%s\n", file, width, height, channels, channels > 1 ? "s" : "");
    print_table_header(out);
    for (int c = 0; c < channels; c++)
        print_table_channel(out, gf_channel_name(channels, c), &per_channel[c]);
}

void gf_stats_print(FILE *out, gf_stats_format format, const char *file, int width, int height,
                    int channels, const gf_channel_stats *per_channel)
{
    if (format == GF_STATS_JSON)
        print_json(out, file, width, height, channels, per_channel);
    else
        print_table(out, file, width, height, channels, per_channel);
}

/* ---- the summary of a batch ----------------------------------------------- */

static const char *const summary_names[GF_SUMMARY_CHANNELS] = {"gray", "red", "green", "blue",
                                                               "alpha"};

static int summary_slot(const char *name)
{
    for (int i = 0; i < GF_SUMMARY_CHANNELS; i++)
        if (strcmp(summary_names[i], name) == 0)
            return i;
    return 0;
}

void gf_stats_summary_add(gf_stats_summary *summary, int width, int height, int channels,
                          const gf_channel_stats *per_channel)
{
    const int depth = per_channel[0].depth == 16 ? 16 : 8;
    if (summary->files == 0)
        summary->depth = depth;
    else if (depth != summary->depth) {
        summary->mixed = 1;
        return;
    }
    summary->files++;
    summary->pixels += (unsigned long long)width * (unsigned long long)height;
    for (int c = 0; c < channels; c++) {
        const int k = summary_slot(gf_channel_name(channels, c));
        gf_channel_stats *into = &summary->channel[k];
        const gf_channel_stats *from = &per_channel[c];
        if (!summary->present[k] || from->min < into->min)
            into->min = from->min;
        if (!summary->present[k] || from->max > into->max)
            into->max = from->max;
        summary->present[k] = 1;
        into->sum += from->sum;
        into->sum_squares += from->sum_squares;
        into->depth = depth;
        for (int v = 0; v < gf_stats_bins(from); v++)
            into->histogram[v] += from->histogram[v];
    }
}

int gf_stats_summary_print(FILE *out, gf_stats_format format, const gf_stats_summary *summary)
{
    if (summary->mixed) {
        gf_set_error("--summary: the files mix 8 and 16 bits a sample; summarize each depth "
                     "on its own");
        return -1;
    }
    if (format == GF_STATS_JSON)
        fprintf(out, "{\"summary\": {\"files\": %llu, \"pixels\": %llu%s}, \"channels\": [",
                summary->files, summary->pixels, summary->depth == 16 ? ", \"depth\": 16" : "");
    else {
        fprintf(out, "all %llu files: %llu pixels\n", summary->files, summary->pixels);
        print_table_header(out);
    }
    int first = 1;
    for (int k = 0; k < GF_SUMMARY_CHANNELS; k++) {
        if (!summary->present[k])
            continue;
        if (format == GF_STATS_JSON)
            print_json_channel(out, summary_names[k], &summary->channel[k], first);
        else
            print_table_channel(out, summary_names[k], &summary->channel[k]);
        first = 0;
    }
    if (format == GF_STATS_JSON)
        fprintf(out, "\n]}\n");
    return 0;
}
