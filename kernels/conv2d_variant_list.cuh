/* conv2d_variant_list.cuh - every instantiation of versions 2 to 4, the
 * initializer of a set's table (conv2d_variants.cuh includes it inside
 * the array; not a header of its own). */
    CONV2D_V2_LAYOUT(1, 1), CONV2D_V2_LAYOUT(2, 2), CONV2D_V2_LAYOUT(3, 3),
    CONV2D_V2_LAYOUT(4, 3), CONV2D_V2_LAYOUT(4, 4),
    CONV2D_V3(1, 1), CONV2D_V3(2, 2), CONV2D_V3(3, 3), CONV2D_V3(4, 3), CONV2D_V3(4, 4),
    CONV2D_V4(1, 1, 8, 8, 8, 0), CONV2D_V4(2, 2, 4, 4, 4, 0),
    CONV2D_V4(3, 3, 4, 4, 4, 0), CONV2D_V4(4, 3, 4, 2, 4, 0),
    CONV2D_V4(4, 4, 4, 2, 2, 0),
    CONV2D_V4M(1, 1, 1, 7, 8, 0u, 0), CONV2D_V4M(2, 2, 1, 7, 4, 0u, 0),
    CONV2D_V4M(4, 3, 1, 7, 2, 0u, 0), CONV2D_V4M(4, 4, 1, 7, 2, 0u, 0),
    /* integer weights of -128..127, gray and RGBA: DP4A */
    CONV2D_V4M(1, 1, 1, 3, 8, 0u, 1), CONV2D_V4M(1, 1, 2, 3, 8, CONV2D_GRADIENT_ZEROS, 1),
    CONV2D_V4Q(1, 1, 5, 8, 1), CONV2D_V4M(4, 3, 1, 3, 4, 0u, 1),
    CONV2D_V4M(4, 3, 2, 3, 2, CONV2D_GRADIENT_ZEROS, 1), CONV2D_V4Q(4, 3, 5, 4, 1),
    CONV2D_V4M(4, 4, 1, 3, 4, 0u, 1), CONV2D_V4M(4, 4, 2, 3, 2, CONV2D_GRADIENT_ZEROS, 1),
    CONV2D_V4Q(4, 4, 5, 2, 1),
    /* and 3x3 (gaussian3, box3) whose outputs stay in 0..255 */
    CONV2D_V4R(1, 1, 3, 8, 1, 1), CONV2D_V4R(4, 3, 3, 4, 1, 1), CONV2D_V4R(4, 4, 3, 4, 1, 1),
    CONV2D_V4Q(1, 1, 7, 8, 1), CONV2D_V4Q(4, 3, 7, 2, 1), CONV2D_V4Q(4, 4, 7, 2, 1),
    /* 7x7 of 16-bit integer weights, gray and RGBA: DP2A */
    CONV2D_V4Q(1, 1, 7, 8, 2), CONV2D_V4Q(4, 3, 7, 2, 2), CONV2D_V4Q(4, 4, 7, 2, 2),
    /* 5x5 and 7x7 that factor as an integer column times a row of bytes,
     * gray and RGBA: row pass DP4A, column pass FFMA (gaussian and box
     * masks take the kernels further down) */
    CONV2D_V4Q(1, 1, 5, 8, kSeparable4), CONV2D_V4Q(1, 1, 7, 8, kSeparable4),
    CONV2D_V4Q(4, 3, 5, 4, kSeparable4), CONV2D_V4Q(4, 3, 7, 2, kSeparable4),
    CONV2D_V4Q(4, 4, 5, 2, kSeparable4), CONV2D_V4Q(4, 4, 7, 2, kSeparable4),
    /* and 9x9 (box9), one RGBA pixel per thread (9 rows of accumulators) */
    CONV2D_V4Q(1, 1, 9, 4, kSeparable4), CONV2D_V4Q(4, 3, 9, 1, kSeparable4),
    CONV2D_V4Q(4, 4, 9, 1, kSeparable4),
    /* the same sizes and layouts, outputs in 0..255: binomial columns
     * prescaled (gaussian5, gaussian7), columns of ones over an odd
     * integer (box5, box7, box9) */
    CONV2D_V4R(1, 1, 5, 8, kBinomial4, kBox4), CONV2D_V4R(1, 1, 7, 8, kBinomial4, kBox4),
    CONV2D_V4R(4, 3, 5, 4, kBinomial4, kBox4), CONV2D_V4R(4, 3, 7, 2, kBinomial4, kBox4),
    CONV2D_V4R(4, 4, 5, 2, kBinomial4, kBox4), CONV2D_V4R(4, 4, 7, 2, kBinomial4, kBox4),
    CONV2D_V4X(1, 1, 1, 9, 4, 0u, kBox4, MODE_DIV_ODD + kInRange),
    CONV2D_V4X(4, 3, 1, 9, 1, 0u, kBox4, MODE_DIV_ODD + kInRange),
    CONV2D_V4X(4, 4, 1, 9, 1, 0u, kBox4, MODE_DIV_ODD + kInRange),
    /* box masks as prefix sums across a warp: gray from 9x9, RGBA from 15x15
     * (below, the column of ones and the running sums are faster) */
    CONV2D_V4SCAN1(1, 1, 9), CONV2D_V4SCAN1(1, 1, 11), CONV2D_V4SCAN1(1, 1, 13),
    CONV2D_V4SCAN(15), CONV2D_V4SCAN(17), CONV2D_V4SCAN(19), CONV2D_V4SCAN(21), CONV2D_V4SCAN(23),
    CONV2D_V4SCAN(25), CONV2D_V4SCAN(27), CONV2D_V4SCAN(29), CONV2D_V4SCAN(31),
    /* box masks as running sums on RGBA, 4 pixels a thread */
    CONV2D_V4RUN(5), CONV2D_V4RUN(7), CONV2D_V4RUN(9), CONV2D_V4RUN(11), CONV2D_V4RUN(13),
    CONV2D_V4RUN(15), CONV2D_V4RUN(17), CONV2D_V4RUN(19), CONV2D_V4RUN(21), CONV2D_V4RUN(23),
    CONV2D_V4RUN(25), CONV2D_V4RUN(27), CONV2D_V4RUN(29), CONV2D_V4RUN(31),
    /* gray box masks of 11x11 to 15x15 on the column of ones */
    CONV2D_V4X(1, 1, 1, 11, 4, 0u, kBox4, MODE_DIV_ODD + kInRange),
    CONV2D_V4X(1, 1, 1, 13, 4, 0u, kBox4, MODE_DIV_ODD + kInRange),
    CONV2D_V4X(1, 1, 1, 15, 4, 0u, kBox4, MODE_DIV_ODD + kInRange),
    /* 11x11 to 15x15 that factor as an integer column times a row of
     * bytes (sampled gaussians), any scaling */
    CONV2D_V4SEP(11), CONV2D_V4SEP(13), CONV2D_V4SEP(15),
    /* 11x11 to 31x31 of a column times a row of bytes 0..255 (sampled
     * gaussians): the tensor cores */
    CONV2D_V4MMA(11), CONV2D_V4MMA(13), CONV2D_V4MMA(15), CONV2D_V4MMA(17), CONV2D_V4MMA(19),
    CONV2D_V4MMA(21), CONV2D_V4MMA(23), CONV2D_V4MMA(25), CONV2D_V4MMA(27), CONV2D_V4MMA(29),
    CONV2D_V4MMA(31),
    /* 3x3 of a column times a row of small integers: row streams */
    CONV2D_V4STREAM(1, 1), CONV2D_V4STREAM(4, 3), CONV2D_V4STREAM(4, 4),
    /* the Sobel, Prewitt and Scharr pairs on RGBA: 16-bit lanes */
    CONV2D_V4G(4, 3, 0), CONV2D_V4G(4, 3, 1), CONV2D_V4G(4, 3, 2),
    CONV2D_V4G(4, 4, 0), CONV2D_V4G(4, 4, 1), CONV2D_V4G(4, 4, 2),
    /* 15x15 of integer weights of -128..127 (sums below 2^22), gray and
     * RGBA: DP4A */
    CONV2D_V4M(1, 1, 1, 15, 4, 0u, 1), CONV2D_V4M(4, 3, 1, 15, 1, 0u, 1),
    CONV2D_V4M(4, 4, 1, 15, 1, 0u, 1),
