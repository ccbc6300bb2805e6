/* test_rng.h - the unit tests' random numbers: xorshift64*, seeded from the
 * clock unless GF_TEST_SEED replays a run. Included once per test program. */
#ifndef GF_TEST_RNG_H
#define GF_TEST_RNG_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static uint64_t rng_state;

static uint64_t rng_next(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1DULL;
}

/* uniform integer in lo..hi */
static int rng_int(int lo, int hi)
{
    return lo + (int)(rng_next() % (uint64_t)(hi - lo + 1));
}

/* Seed from GF_TEST_SEED or the clock, and print the seed. */
static void rng_seed(const char *program)
{
    const char *s = getenv("GF_TEST_SEED");
    uint64_t seed = s ? strtoull(s, NULL, 0) : ((uint64_t)time(NULL) << 20) ^ (uint64_t)getpid();
    if (seed == 0)
        seed = 1;
    rng_state = seed;
    printf("%s: seed %llu (replay with GF_TEST_SEED=%llu)\n", program, (unsigned long long)seed,
           (unsigned long long)seed);
    fflush(stdout);
}

#endif
