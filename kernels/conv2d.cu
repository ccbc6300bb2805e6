/* conv2d.cu - 2-D correlation of an interleaved 8-bit image with 1..4
 * matrices of up to 31x31, combined per pixel (magnitude, max, min, sum).
 *
 * Version ladder
 *   0 naive     one thread per output pixel; every tap reads global memory
 *               through the border mapping. The correctness baseline: each
 *               input byte is fetched mask_width * mask_height times (L1/L2
 *               absorb most of it) and every tap pays the index arithmetic.
 *   1 tiled     a block loads its tile plus the halo (tile + mask - 1 in each
 *               direction) into shared memory once, border mapping applied
 *               while loading, weights staged in shared memory as well; the
 *               taps then read shared memory only. Fixes the repeated global
 *               reads and moves the border logic out of the inner loop.
 *               What is left, per tap and channel: a shared load of a byte,
 *               an I2F (a quarter-rate conversion), a shared load of the
 *               weight, the FMA; one output per thread, so nothing loaded is
 *               reused from registers. ~10x below the roofline.
 *   2 blocked   register blocking, for any mask. Each thread computes P x Q
 *               outputs (P rows, Q adjacent columns) with a window of Q
 *               pixels sliding along each input row in registers: a row
 *               costs Q + w - 1 shared loads for P * Q * w FMA per channel
 *               and matrix. The shared tile is float (each byte converted
 *               once, when staged; one LDS.128 per RGBA pixel and tap
 *               window step), the weights are kernel parameters (constant
 *               bank: FFMA operands, no loads). 3x3 (1 or 2 matrices), 5x5
 *               and 7x7 are fully unrolled with compile-time weight indices;
 *               every other size runs one generic kernel per matrix count
 *               (P = 1, the column loop unrolled to 31 with a run-time exit,
 *               weights read with uniform constant loads). A block walks
 *               down a column of tiles keeping the last h - 1 input rows in
 *               a ring, so each input row is staged once per column of
 *               blocks. Interior steps stage whole words per group of Q
 *               pixels without border arithmetic; edge steps map each pixel.
 *               Outputs are packed with PRMT and written as 16-, 8- or
 *               4-byte stores, alpha merged from the source word. Rounding
 *               uses the 2^23 trick (v + 8388608.0f holds rint(v) in its low
 *               byte) instead of F2I. Zero taps of the gradient pairs
 *               (sobel, prewitt, scharr) are skipped (an instantiation of
 *               its own). Bit-identical to version 1 (see Arithmetic).
 *   3 separable one-matrix masks that factor as column x row (gaussian,
 *               box): one fused kernel. Per step the new input rows are
 *               staged, a row pass (8 outputs per thread, window of 8 + w - 1
 *               pixels) writes float rows into a ring in shared memory (XOR
 *               swizzled: conflict-free both ways), then a column pass (8
 *               rows of one column per thread) reads the ring. w + h FMA per
 *               pixel and channel instead of w * h, no scratch memory, any
 *               size up to 31 with one kernel.
 *   4 direct    what versions 2 and 3 measured: their time hardly moved
 *               with the mask (gray 3x3 to 7x7 all ~0.4 ms on an H200), so
 *               they were bound by their structure (a block staging rows,
 *               a barrier, then computing: each SM had one step's loads in
 *               flight at a time, at 25-30% occupancy), not by FMAs. Version
 *               4 drops shared memory and barriers: each thread computes 8
 *               rows x Q columns of one tile, streaming its Q + M - 1 input
 *               columns row by row straight from global memory (a 4-, 8-,
 *               12- or 16-byte load of its own bytes, halo words beside it
 *               from L1), 2 rows fetched ahead, bytes converted with PRMT +
 *               FADD, weights in the parameter bank, M rows of accumulators
 *               in registers, each output row finished and stored (16-byte
 *               stores) as soon as its last input row is in. One matrix of
 *               3x3, 5x5 or 7x7, or a 3x3 gradient pair with its zero taps
 *               left out; version 1's summation order, so version 1's bytes.
 *               Registers capped at 80 (3 blocks per SM, 37.5% occupancy)
 *               for the variants that fit without spilling (gray and
 *               2-channel 3x3, the RGBA gradient pair with alpha copied):
 *               17-21% faster on the H100 (bench/RESULTS.md); 128 for the rest.
 *               Revised after profiling (bench/RESULTS.md), which showed
 *               instruction issue, not memory latency, to be the bound
 *               (gray 3x3: 42.7 instructions per pixel): rows are copied
 *               into a per-thread ring in shared memory with cp.async, 7
 *               rows ahead, instead of 2 rows into registers; masks of
 *               integer weights in -128..127 on gray and RGBA images take
 *               a DP4A path (four byte products and their sum in one
 *               instruction, no byte-to-float conversion; exact integer
 *               sums, so the same bytes; accumulators biased so that one
 *               FFMA and a clamp finish a prescaled output); one copy of
 *               the 3x3 loop per scaling mode, so no output branches on
 *               it; rows inside the image skip the border mapping; RGBA
 *               5x5, 7x7 and gradient pairs take 16 rows per thread.
 *               Gray gaussian3 0.132 -> ~0.09 ms, RGBA 0.442 -> ~0.23.
 *               Third round: 5x5 and 7x7 masks that factor as an integer
 *               column times a row of -128..127 (gaussian5, gaussian7,
 *               box5) take a separable integer path: the row pass per
 *               input row with DP4A, the column pass as one FFMA per
 *               mask row into the rows in progress (exact integers below
 *               2^22, so the same bytes); masks prescaled without an
 *               offset get kernels of their own (one FFMA and a clamp per
 *               output, no mode test); 15x15 masks of byte weights take
 *               the DP4A path with 32 rows per thread and a 4-row ring;
 *               rows inside the image are fetched, and prescaled outputs
 *               of all channels stored, through running pointers (the
 *               SASS showed ~45 and ~15 instructions a row of address
 *               arithmetic and alignment tests). RGBA gaussian7 0.995 ->
 *               ~0.52 ms, gaussian5 0.49 -> ~0.39, random15 3.43 (version
 *               2) -> ~2.35, gray gaussian3 0.0896 -> ~0.087.
 *               Fourth round, strips: ncu on gray gaussian3 showed 11
 *               waves of 10 row steps for each thread's 8 outputs (2 halo
 *               rows, 25%), the last wave a third full. Where one tile
 *               per block would run past the blocks the device holds at
 *               once, a block now walks down h.steps tiles, each thread's
 *               rows going on through its ring: one wave (conv2d_steps4),
 *               the halo paid once a strip, 25% fewer instructions. The
 *               first try ran 2x slower: the threads at the image's edges
 *               gather their rows at a memory latency each, and their
 *               strips set the kernel's time (ncu: one SM busy 2.2x the
 *               average), so edge blocks, the first rows of the grid,
 *               take those columns a tile at a time (conv2d_strips4).
 *               Static strips also made the data-dependent slow path of
 *               the IEEE division (a zero dividend: black regions) set
 *               the time; conv2d_div does without it (box3 on a photo
 *               0.156 -> 0.082 ms, on noise 0.111 -> 0.082). Gray, and
 *               RGBA from 5x5 on (RGBA 3x3 is near the copy rate, and
 *               strips cost it 8%). Gray gaussian3 ~0.087 -> ~0.068 ms,
 *               gaussian5 0.13 -> 0.079, RGBA gaussian5 0.39 -> 0.31,
 *               gaussian7 0.52 -> 0.38. The separable integer path also
 *               takes 9x9 (box9: RGBA 1.10 ms in version 3 -> 0.83).
 *               Tried and not kept (bench/RESULTS.md): equal
 *               shares of rows in strips, gray 3x3 at 4 blocks per SM,
 *               the separable loop written out M times, and two copies
 *               of the 3x3 loop, one for threads whose columns are all
 *               inside the image (no branch around the gathers each row):
 *               7% faster on gray gradient pairs, 2% slower on RGBA ones,
 *               5% on gray box3 (it spilled). Sixth round: the gray
 *               gradient pairs alone keep those two copies: gray sobel
 *               0.106 -> 0.099 ms. Seventh round: 3x3 integer masks
 *               divided by an odd integer with no offset (box3) take one
 *               FFMA per output in a loop of their own (MODE_DIV_ODD)
 *               instead of a division: box3 gray 0.080 -> 0.068 ms,
 *               RGBA 0.330 -> 0.221 (as fast as gaussian3). Eighth
 *               round: the separable integer path's column pass without
 *               multiplies for binomial columns (a cascade of M - 1 FADD)
 *               and columns of ones (a running sum, 2 FADD), and kernels
 *               of their own, with no clamp, for masks whose outputs
 *               cannot leave 0..255 (gaussian, box; kInRange): RGBA
 *               gaussian7 0.393 -> 0.362 ms (half the copy rate), box5
 *               0.53 -> 0.31, box9 0.84 -> 0.62, gaussian3 0.222 ->
 *               0.212; gray box9 0.197 -> 0.137, gaussian3 0.067 ->
 *               0.066, box3 0.071 -> 0.066. Ninth round: the Sobel,
 *               Prewitt and Scharr pairs on RGBA in 16-bit lanes (two
 *               channels per integer instruction: row passes right -
 *               left and p (left + right) + w centre, column passes the
 *               same; ~60 instructions a pixel instead of 140), MUFU.SQRT
 *               alone where the sums of squares are integers, alpha
 *               merged from the centre row's words in registers: RGBA
 *               sobel 0.386 -> 0.269 ms (48% -> 69% of the copy rate),
 *               prewitt 0.384 -> 0.262, scharr 0.384 -> 0.320; the
 *               tool's sobel with alpha copied 0.330 -> 0.253. In strips
 *               (the halo rows and the first rows' wait paid once a
 *               strip): sobel 0.27 -> 0.244 ms (76%), the tool's 0.254 ->
 *               0.230. Tenth round: RGBA box masks of ones over an odd
 *               integer (box9) as running sums in 16-bit lanes, 4 pixels
 *               a thread: each output row's column sums are the last
 *               one's plus the entering row's pass minus the leaving
 *               row's, that row fetched again into a second set of ring
 *               slots (no delay line of 9 row passes in registers), each
 *               row pass a running sum along the row; halo copies of 16
 *               bytes; the edge columns' two rows gathered with every
 *               load issued before the first is used (one at a time, the
 *               edge strips had set the time). RGBA box9 0.62 -> 0.265
 *               ms (30% -> 70% of the copy rate), the tool's 0.58 ->
 *               0.29. Eleventh round, more sizes: the running sums for
 *               RGBA box masks of 5x5 to 15x15 (box5 0.312 -> 0.247 ms,
 *               box13 0.37, box15 1.61 on the 15x15 DP4A path -> 0.59:
 *               128 registers and a spill, 4-byte halo copies), the
 *               column of ones for gray box masks to 15x15 (box15 0.41
 *               -> 0.34) and the separable integer path for 11x11 to
 *               15x15 (a sampled gaussian15: RGBA 1.51 ms on version 3
 *               -> 1.18, gray 0.58 -> 0.29). Past 15x15, version 3:
 *               box31 and gaussian31 at 7-9% of the copy rate. Three
 *               slots ahead instead of four for the running sums from
 *               11x11 on (two blocks an SM instead of one) was no
 *               faster (box15 0.587 -> 0.639 ms) and was not kept.
 *               Twelfth round: the running sums' halo in 16-byte
 *               copies, padded to whole vectors (box7 0.33 -> 0.26 ms,
 *               box11 0.41 -> 0.34, box13 0.37 -> 0.35, box15 0.58 ->
 *               0.49); RGBA box masks of 17x17 to 31x31 as running sums
 *               with 32-bit column sums a channel (box17 1.59 ms on
 *               version 3 -> 0.60, box31 2.53 -> 1.22); 8 pixels a
 *               thread for those was slower (box31 1.28 ms) and was not
 *               kept. From 15x15 on L1/TEX is the busiest unit (74-78%,
 *               ncu): each thread copies and reads back its own halo.
 *               Thirteenth round: box masks as prefix sums across a
 *               warp (kBoxScan4): each lane reads only its own 16 bytes
 *               of the entering and the leaving row and keeps their
 *               column sums; a row's window sums are differences of the
 *               warp's prefix sums of those, shuffled between lanes, so
 *               neither the halo nor the work grows with the mask. Lanes
 *               off an aligned image take their sums from the lanes they
 *               mirror: their bytes gathered at a memory latency a row
 *               had made the edge warps set the time (gray box31 0.54
 *               ms; 0.14 without). Gray box9 0.137 ms -> ~0.10, box15
 *               0.34 -> ~0.11, box31 0.78 (version 3) -> ~0.14; RGBA
 *               box15 0.49 -> 0.34, box31 1.22 -> 0.40. Below 9x9 (gray)
 *               and 15x15 (RGBA) the older paths stay faster. Fetching
 *               the entering row two steps ahead spilled at 80
 *               registers and was slower (box31 0.40 -> 0.45 ms); not
 *               kept. Fourteenth round: ncu's stall samples put a
 *               quarter of the time on the loop's end, where the next
 *               row's registers were copied into the current ones and
 *               waited for the loads just issued. The strips inside an
 *               aligned image now walk in a loop of their own
 *               (conv2d_scan_walk: no border, no load tiers, two sets
 *               of registers taken in turn), and gray windows take the
 *               lanes' own prefixes, no scan across the warp: gray box9
 *               0.107 -> 0.096 ms, box15 0.111 -> 0.103, box31 0.143 ->
 *               0.136; RGBA box31 0.40 -> 0.38. Rows prefetched into L2
 *               3 to 12 steps ahead were slower (RGBA box31 0.38 ->
 *               0.39-0.44 ms); 2 blocks an SM at up to 128 registers
 *               (no spill) no faster. Not kept. Eighteenth round: the
 *               walk's rows through a ring in shared memory a warp,
 *               copied in by cp.async 3 to 11 steps ahead, were slower:
 *               every row (48-96 KB a block) 20-35%, the entering rows
 *               only (16-32 KB) 5-15% (gray box31 0.133-0.141 ms ->
 *               0.143-0.193); likely, not profiled: the shared memory
 *               comes out of L1, which held the leaving rows. Not kept.
 *               Nineteenth round: ncu put gray box31's DRAM reads at
 *               2.5 times the image (168 MB): each strip's first M - 1
 *               rows, read again by the strip above at its end, and
 *               leaving rows L2 no longer held (3168 warps x 31 rows x
 *               512 B is the H100's 50 MB). Every other strip now walks
 *               up, so that two strips read the rows they share near the
 *               same time, and the leaving rows and the outputs are
 *               marked evict-first (ld/st.global.cs): gray box31's DRAM
 *               reads 168 -> 119 MB, 0.138 -> 0.125-0.130 ms; RGBA box15
 *               0.330-0.333 -> 0.316-0.324; the others within the
 *               spread. The time fell less than the bytes: the walk is
 *               back to its rows' latency (ncu, gray box31: 60% of the
 *               stall cycles on the long scoreboard, issue active 47%).
 *               Fewer warps with taller strips were slower (gray box31
 *               at 16 warps an SM 0.145 ms, at 8 0.19).
 *               Fifteenth round: the tensor cores (conv2d_mma.cuh).
 *               Masks of 11x11 to 31x31 that factor as a column times
 *               a row of integers 0..255 (sampled Gaussians: the column
 *               pass took M FFMA a pixel and channel, and past 15x15 only
 *               version 3 ran them) take both passes as products of
 *               8-bit matrices, mma.sync m16n8k32 into exact 32-bit
 *               sums, a Toeplitz matrix of the weights times the bytes
 *               (the column pass on the row sums split into their low
 *               and high bytes), then the separable integer path's
 *               scaling: the same bytes. Blocks of 256 threads walk
 *               tiles (a persistent grid), the next tile's rows copied
 *               in (cp.async) while the current one is computed. Gray
 *               gaussian15 0.290 -> 0.177 ms, gaussian31 0.733 (version
 *               3, same run) -> 0.173; RGBA gaussian15 1.193 -> 0.620,
 *               gaussian31 1.985 (version 3, same run) -> 0.738: 25-31%
 *               of the copy rate.
 *               Sixteenth round: that path at ~0.75 instruction a pixel
 *               (ncu, gray 31x31: 77 M -> 50 M): tile coordinates
 *               stepped, not divided; the row sums in two planes of
 *               bytes read by ldmatrix; the scaling mode chosen once a
 *               tile; constant address steps; the edge bytes gathered a
 *               thread a byte; one input buffer (RGBA 31x31 at 32x64: 3
 *               blocks an SM, from 2). In the bench on the H100: gray
 *               gaussian15 0.177 -> 0.111 ms, gaussian31 0.173 -> 0.129,
 *               RGBA 0.620 -> 0.435 and 0.738 -> 0.489 (38-47% of the
 *               copy rate); on an H200 0.0992, 0.114, 0.420, 0.487 ms
 *               (27-38% of its faster copy). Measured alone on the H200,
 *               one input: 0.143 -> 0.090, 0.147 -> 0.101, 0.527 ->
 *               0.399, 0.681 -> 0.474 ms.
 *               Twentieth round: the direct kernel's and this path's
 *               outputs stored evict-first (st.global.cs), as the
 *               prefix sums' are: RGBA 3x3 0.5-1% faster, within the
 *               spread, the tensor-core rows unchanged, gray gaussian7
 *               7-10% slower. Not kept.
 *               Twenty-first round, the host's part of a launch:
 *               conv2d_gpu plans every launch, and the plan scanned the
 *               weights six times (~12 us a 31x31 plan on the development
 *               machine's CPU) and version 3's searched its strides with
 *               the bank model; in the bench's timing (each run launched
 *               on an idle stream) the GPU waited for it: launch calls of
 *               20-27 us at 31x31 on version 4, 50-130 us on version 3.
 *               What a plan learns of a mask's weights is now kept per
 *               host thread for the last two masks (compared by value),
 *               the strides per arguments: 3.5-10 us a call on version
 *               4 (the launch itself), gray box31 0.122 -> 0.112 ms,
 *               gaussian31 0.114 -> 0.100, RGBA box31 0.373 -> 0.364, the
 *               kernels unchanged. Queued back to back (the bench's
 *               --timing queued), where the host's part does not count,
 *               gray 3x3 stays at 1.46-1.48x NPP: its gap to 1.5x is the
 *               kernel's, not the launch's.
 *               Twenty-second round: the tensor-core path finished every
 *               mask whose scale is not a power of two with conv2d_value's
 *               division, a long loop per output (ncu, gray gaussian15,
 *               whose scale is 15625: 54.3 M instructions);
 *               odd scales with outputs in range now take MODE_DIV_ODD's
 *               FADD and FFMA (36.9 M): gray gaussian15 0.098 -> 0.081 ms,
 *               RGBA 0.417 -> 0.342 (44% -> 54% of the copy rate). With
 *               that finish gray box masks of 11x11 to 31x31 run faster
 *               there than as prefix sums (box15 0.094 -> 0.082 ms, box31
 *               0.113 -> 0.099; box19 0.099 -> 0.102, the one loss), so
 *               the plan tries the tensor cores first for them.
 *               Twenty-third round, row streams (conv2d_stream.cuh): 3x3
 *               masks of a column times a row of small integers in range
 *               (gaussian3, box3) on gray and RGBA rows of whole 16-byte
 *               words. Each thread owns 16 bytes of a row and walks 16 rows
 *               of them, one 16-byte load and store a row as in a copy,
 *               its neighbours' bytes by shuffles, both passes in 16-bit
 *               lanes (IADD, or IMAD for other weights) and an exact
 *               integer rounding (a shift, or a multiply-high by the odd
 *               divisor's reciprocal); bands of 16 rows walk down and up
 *               in turn so that shared halo rows are read close together.
 *               A first version mapped every row through gf_border_index
 *               in the loop: 8% slower; the rows past the image are now
 *               mapped once. H100, bench: gray gaussian3 0.0669 ->
 *               0.0577 ms (79% -> 90% of the copy, 1.65x NPP), box3 1.67x;
 *               RGBA gaussian3 0.212 -> 0.201 (91%, 2.88x NPP).
 *               Twenty-fourth round: each batch of two rows a stream
 *               loads also prefetches the next batch's first row into L2
 *               (prefetch.global.L2): a third row in flight a thread
 *               without a register. In a standalone side-by-side run
 *               (H100, 8192x8192, the streams' kernel itself): RGBA
 *               gaussian3 at 256x64 0.2004 -> 0.1958 ms (92.3% -> 94.5%
 *               of the copy), gray at 512x16 0.0562 -> 0.0560; prefetching
 *               2 to 8 rows further ran slower (79-94%), so did the edge
 *               words' prefetch (93.5%). The same kernel without its edge
 *               words (wrong outputs) ran at 96.3%, a copy kernel of the
 *               streams' shape (16 bytes a thread, 16 rows) at 95.4%.
 *               Twenty-fifth round (tried, not kept): rows fed by bulk
 *               copies (cp.async.bulk) into a ring in shared memory, the
 *               neighbours read there: RGBA 55-87% of the copy, gray
 *               18-84% (each block held by its ring's turnaround); 32
 *               bytes a lane, the group's edges half as often: RGBA
 *               86-93%, gray 74-88% (64 to 80 registers; 46-56% where
 *               96 bytes spilled).
 *               Kept: the RGBA streams' automatic tile is 512x16 (one
 *               band of 128 lanes a block, conv2d_preferred_tile), 94.9-
 *               95.1% of the copy against 256x64's 94.1-94.3%.
 *               Twenty-sixth round: the tensor-core path's RGBA tiles
 *               (conv2d_mma.cuh, step 7).
 *               Thirty-first round: gray on the tensor cores from 19x19
 *               at four blocks an SM (conv2d_mma.cuh, step 10).
 *               Thirty-second round: the row streams walk bands of 8
 *               rows (16 before) and prefetch both rows of the next
 *               batch (its first only before). Standalone side-by-side
 *               runs (H100, 8192x8192, the streams' kernel itself):
 *               RGBA gaussian3 0.194 -> 0.189 ms (95% -> 98% of the
 *               copy), gray at 256x64 0.0563 -> 0.0546 (92% -> 95%);
 *               bands of 8 alone gave RGBA 97%, the second prefetch
 *               alone nothing. The RGBA automatic tile is now 512x8.
 *               The bench, side by side with the kernels before (two
 *               rounds in one call): RGBA box3 0.195 -> 0.189-0.191 ms
 *               (2.94-2.95x -> 3.02-3.05x NPP), gaussian3 0.194-0.203 ->
 *               0.189-0.191 (2.84-2.96x -> 3.00-3.04x).
 *               Thirty-third round: the streams' blocks may have up to
 *               1024 threads (__launch_bounds__(1024, 1), the same 64
 *               registers as four blocks of 256 an SM, the same SASS),
 *               so that the tiles bands of 8 rows made larger than 256
 *               threads (RGBA 256x64, 512x32) run them again.
 *
 *   P x Q per instantiation (version 2): 3x3 one matrix, 5x5, 7x7: 4 x 4;
 *   3x3 two matrices: 2 x 4; generic one or two matrices: 1 x 8; three or
 *   four: 1 x 4. Version 3: 8 (row pass) and 8 (column pass). A tile is
 *   the block's output pixels per step: blocks of (tw / Q, th / P) threads
 *   (version 3: (tw, th / 8)), tw a multiple of 8, th of 4 (version 3: 8),
 *   at most 256 threads (registers capped at 96 where that spills nothing,
 *   else 128; version 4's row streams: at most 1024).
 *
 * Roofline budget (per output pixel, C channels, K matrices, T = w*h taps)
 *   bytes: C read + C written (each input read once, each output written
 *          once): 8 B/px for RGBA, 2 B/px for gray.
 *   work:  2 * T * C * K flops (one FMA per tap, channel and matrix), plus
 *          one shared-memory load per tap and channel.
 *   H100: ~3.0 TB/s copy bandwidth and ~60 TFLOP/s FP32, a balance near
 *   20 flop/B. RGBA 3x3 (72 flop / 8 B = 9 flop/B) is memory-bound; 5x5
 *   (200 / 8 = 25) sits at the balance; 7x7 and above are compute-bound
 *   (in practice bound by shared-memory load issue, one LDS per FMA).
 *
 *   Versions 2 and 3 on an H200 (132 SMs at ~1.8 GHz: ~30 T instructions
 *   per second issued, FFMA included, and 128 B per clock of shared memory
 *   per SM, ~30 TB/s; ~4.0 TB/s copy: RGBA is memory-bound below ~500
 *   Gpx/s, gray below ~2000). Instructions per output pixel counted in the
 *   SASS, RGBA with alpha copied (3 channels computed), tile 64x32:
 *     3x3      27 FFMA + 2.3 LDS.128 + ~4 addressing + ~16 staging (load,
 *              PRMT + FADD per byte, STS.128) + ~16 finishing and storing
 *              = ~66: ~455 Gpx/s of issue; shared loads+stores ~65 B/px:
 *              ~480 Gpx/s; memory ~500. Expect ~400 (80% of copy; NPP ~3x
 *              slower by the brief's figures).
 *     sobel    36 FFMA (zero taps skipped) + 3 LDS + 17 + 36 (two squares,
 *              MUFU.RSQ and a Newton step per channel) = ~95: ~320 Gpx/s
 *              issue-bound, expect ~280-300 (60% of copy).
 *     version 4's sobel in 16-bit lanes, RGBA, per pixel: ~3 splitting
 *              words into lanes + 12 row and column passes (6 per lane
 *              pair) + 4 x 9 finishing (2 PRMT + 2 FADD to floats, FMUL,
 *              FFMA, FMNMX, MUFU.SQRT, FADD) + ~3 packing + ~3 fetch =
 *              ~57 (the DP4A pair: 140, ncu): issue no longer the bound;
 *              at 16 warps an SM (99-118 registers) latency is.
 *     version 4's box9 as running sums in 16-bit lanes, RGBA, per pixel:
 *              (12 + 12 splitting words into lanes + 2 x 14 row passes
 *              (entering and leaving row) + 8 column sums) / 4 + 4 x 3
 *              finishing (PRMT, FADD, FFMA) + ~3 packing + ~4 fetch (6
 *              16-byte copies and reads a row for 4 pixels) = ~40 (kBox4:
 *              one pixel a thread, 9 copies and 32 moves a row, ~110):
 *              issue is not the bound; ~75% of the copy rate, as sobel's
 *              lanes reach. 15x15: rows of 18 words instead of 12 and
 *              first sums of 15 pixels instead of 9: ~55, still not
 *              issue-bound (measured: 31% of the copy rate, at 128
 *              registers with a spill and with 4-byte halo copies; 37%
 *              with 16-byte ones). 31x31, 32-bit column sums: (68 + 68
 *              splitting + 2 x 2 x 31 first sums + 40 column sums) / 4
 *              + ~20 = ~95: ~350 Gpx/s of issue, but the halo copies
 *              and reads, ~144 B of L1/TEX a pixel, bound it (measured
 *              15%, L1/TEX 78% busy).
 *     version 4's prefix sums across a warp, per row and lane of 16
 *              values (4 RGBA or 16 gray pixels): 2 16-byte loads, ~24
 *              column sums in 16-bit lanes, 16 widening, ~15 prefix
 *              sums in the lane, 5 x 2 a channel across the lanes (RGBA;
 *              gray needs none), 16 offsets, 2 shuffles + 3 a value for
 *              the windows and the finish, ~12 packing: ~240 for RGBA (4
 *              channels), ~170 for gray, whatever the mask (ncu, gray
 *              box9: 267 a row before the fourteenth round, ~200 after
 *              the walk alone); the warp's outputs are 32 x
 *              16 / C pixels less the 2 M / 2 or so of its halo (RGBA
 *              31x31: 96 of 128). RGBA ~2.5 instructions a pixel (~400
 *              Gpx/s of issue), gray ~0.45: neither issue-bound; ncu
 *              (31x31): DRAM 51-57%, SM 43-58%, 7-8 cycles between a
 *              warp's instructions, 25-31% achieved occupancy at 80
 *              registers: latency with one row fetched ahead. After the
 *              walk, the first use of each loaded row holds 38% (gray
 *              box9) and 47% (RGBA box31) of the stall samples: still
 *              the loads' latency, now with two rows in flight.
 *     5x5      75 FFMA + 4 LDS + ~40 = ~120: ~250 Gpx/s, expect ~220
 *              (NPP ~60: 3.5x).
 *     7x7      147 FFMA + 6 LDS + ~40 = ~195: ~155, expect ~140 (2.3x NPP
 *              if NPP runs 7x7 at about half its 5x5 rate).
 *     15x15    generic: 675 FFMA + 41 LDS.128 (660 B of shared loads) +
 *              ~120 (weight loads, loop exits, staging, finish): ~35 Gpx/s,
 *              issue- and shared-bound alike.
 *     gray 3x3 9 FFMA + 2.3 LDS.32 + ~7 staging + ~5 finishing = ~25:
 *              ~1200 Gpx/s of issue (copy ~2000): expect ~1000.
 *     version 4's separable integer path, RGBA w x w, per pixel and
 *              channel: (w + 3) / 4 DP4A + 1 FADD + w FFMA, plus ~4 PRMT
 *              regrouping bytes and ~3 finishing: 7x7 ~15 per channel,
 *              ~65 per pixel with the fetch and store (direct DP2A: 28
 *              DP2A per channel, ~130 per pixel): expect ~2x faster.
 *     version 4's 15x15 DP4A, RGBA: 60 DP4A per pixel and channel, times
 *              46 / 32 for the 14 rows each thread reads before its first
 *              output: ~350 DP4A per pixel against version 2's 900 FFMA +
 *              ~40 LDS.128: ~2x faster if DP4A issues at the FFMA rate.
 *     version 4 on the tensor cores, per 16 output bytes and 8 rows: the
 *              row pass (2 to 5 chunks of 32 bytes of K: gray 2, RGBA
 *              31x31 5) one ldmatrix per two chunks and one mma a chunk,
 *              times (TH + M - 1) / TH for the halo rows, and one
 *              stmatrix (the seventeenth round; 8 16-bit stores before);
 *              the column pass 4 mma (two chunks, low and high bytes) and
 *              2 ldmatrix (a plane each), ~2 instructions an output to
 *              finish and pack. ncu, gray 31x31, tile 128x64: 50 M warp
 *              instructions (~0.75 a pixel; 76 M before the sixteenth
 *              round), 8-9 cycles between issues at 6 warps a scheduler;
 *              ~20 M mma for RGBA 31x31, a tenth of the tensor cores'
 *              rate. Not memory-bound: issue and the latency between
 *              the phases of a tile, 40-52% of the H100's copy rate.
 *     version 4's row streams, per 16 bytes of a row: one 16-byte load
 *              and store, 2 shuffles, 8 PRMT to unpack, 2-3 integer ops
 *              per 32-bit register a pass (gray: 10 and 8 registers;
 *              RGBA 12 and 8), 4-7 to round a register, 4 PRMT to pack:
 *              ~100 instructions, ~6 a gray pixel and ~25 an RGBA one,
 *              under the copy's time at the H100's issue rate; 1 + 2/16
 *              rows read per row written (halo rows, mostly from L2).
 *              Memory-bound: the copy rate is its budget.
 *     separable w x h: 3 (w + h) FFMA + ((w + 7) + (h + 7)) / 8 LDS.128 +
 *              ~50 (staging, ring stores, loop exits, finish); shared
 *              traffic 32 + 2 ((w + 7) + (h + 7)) B/px. 5x5: ~75
 *              instructions, ~80 B/px: ~330 Gpx/s (70% of copy); 15x15:
 *              ~150, ~120 B/px: ~190 (40%); 31x31: ~260, ~185 B/px: ~110.
 *              One read and one write of the image whatever the size (a
 *              two-pass version would add 32 B/px of float scratch).
 *
 * Arithmetic: float sums of pixel * weight. Integer weights give exact
 * integer sums (below 2^24), so the division by the scale and the rounding
 * (rintf: half to even) match the double-precision CPU reference exactly
 * for the built-in masks; fractional weights may differ by one level where
 * a value sits on a rounding boundary. Version 2 accumulates every output in
 * version 1's order (mask rows, then columns, one fmaf each) and finishes
 * with version 1's operations: a scale that is a power of two is folded
 * into the weights (every partial sum scales by the same power of two:
 * exact), an offset of 0 is not added (r + 0 is r), the magnitude's sqrt is
 * sqrt.rn's own fast path on a clamped argument. So it returns version 1's
 * bytes for any mask, fractional ones included. Version 3 sums in another
 * order: equal for integer factors (the launcher derives them from integer
 * 2-D weights), within one level otherwise. */
#include <assert.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <type_traits>

#include "kernels.h"

extern "C" {
#include "../src/border.h"
#include "../src/mask.h"
}

#define CONV2D_MAX_MATRICES GF_MASK_MAX_MATRICES

/* Every element of a register array (of any rank) to 0, fully unrolled. */
template <int N>
__device__ __forceinline__ void conv2d_zero(float (&a)[N])
{
#pragma unroll
    for (int i = 0; i < N; i++)
        a[i] = 0.0f;
}

template <int N>
__device__ __forceinline__ void conv2d_zero(int (&a)[N])
{
#pragma unroll
    for (int i = 0; i < N; i++)
        a[i] = 0;
}

template <class T, int N>
__device__ __forceinline__ void conv2d_zero(T (&a)[N])
{
#pragma unroll
    for (int i = 0; i < N; i++)
        conv2d_zero(a[i]);
}

/* Combine the K matrix responses of one channel, round half to even, clamp. */
__device__ __forceinline__ unsigned char conv2d_finish(const float (&acc)[CONV2D_MAX_MATRICES],
                                                       const conv2d_launch &p)
{
    float v = 0.0f;
#pragma unroll
    for (int k = 0; k < CONV2D_MAX_MATRICES; k++) {
        if (k >= p.mask_count)
            break;
        float r = acc[k] / p.scale[k] + p.offset[k];
        switch (p.combine) {
        case GF_COMBINE_MAGNITUDE: v += r * r; break;
        case GF_COMBINE_MAX:       v = k == 0 ? r : fmaxf(v, r); break;
        case GF_COMBINE_MIN:       v = k == 0 ? r : fminf(v, r); break;
        default:                   v += r; break;   /* NONE (one matrix) and SUM */
        }
    }
    if (p.combine == GF_COMBINE_MAGNITUDE)
        v = sqrtf(v);
    v = rintf(v);
    return (unsigned char)fminf(fmaxf(v, 0.0f), 255.0f);
}

/* ---- version 0: naive ---------------------------------------------------- */

template <int C>
__global__ void conv2d_kernel0(conv2d_launch p)
{
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= p.width || y >= p.height)
        return;
    const int taps = p.mask_width * p.mask_height;
    const int ax = p.mask_width / 2, ay = p.mask_height / 2;
    float acc[C][CONV2D_MAX_MATRICES] = {};
    for (int my = 0; my < p.mask_height; my++) {
        const int sy = gf_border_index(y + my - ay, p.height, (gf_border)p.border);
        for (int mx = 0; mx < p.mask_width; mx++) {
            const int sx = gf_border_index(x + mx - ax, p.width, (gf_border)p.border);
            float px[C];
#pragma unroll
            for (int c = 0; c < C; c++)
                px[c] = (sx < 0 || sy < 0) ? 0.0f
                                           : (float)p.src[((size_t)sy * p.width + sx) * C + c];
#pragma unroll
            for (int k = 0; k < CONV2D_MAX_MATRICES; k++) {
                if (k >= p.mask_count)
                    break;
                const float w = p.weights[k * taps + my * p.mask_width + mx];
#pragma unroll
                for (int c = 0; c < C; c++)
                    acc[c][k] = fmaf(px[c], w, acc[c][k]);
            }
        }
    }
    const size_t at = ((size_t)y * p.width + x) * C;
#pragma unroll
    for (int c = 0; c < C; c++)
        p.dst[at + c] = c < p.channels_filtered ? conv2d_finish(acc[c], p) : p.src[at + c];
}

/* ---- version 1: shared-memory tile with halo ----------------------------- */

static __host__ __device__ size_t conv2d_weight_bytes(const conv2d_launch &p)
{
    /* rounded up to 16 so that the pixel tile after it stays aligned */
    size_t bytes = (size_t)p.mask_count * p.mask_width * p.mask_height * sizeof(float);
    return (bytes + 15) & ~(size_t)15;
}

template <int C>
__global__ void conv2d_kernel1(conv2d_launch p)
{
    extern __shared__ __align__(16) unsigned char conv2d_smem[];
    float *w = (float *)conv2d_smem;
    unsigned char *tile = conv2d_smem + conv2d_weight_bytes(p);

    const int taps = p.mask_width * p.mask_height;
    const int tw = blockDim.x, th = blockDim.y;
    const int sw = tw + p.mask_width - 1, sh = th + p.mask_height - 1;
    const int x0 = blockIdx.x * tw - p.mask_width / 2;
    const int y0 = blockIdx.y * th - p.mask_height / 2;
    const int tid = threadIdx.y * tw + threadIdx.x, nthreads = tw * th;

    for (int i = tid; i < p.mask_count * taps; i += nthreads)
        w[i] = p.weights[i];
    for (int i = tid; i < sw * sh; i += nthreads) {
        const int ly = i / sw, lx = i - ly * sw;
        const int gx = gf_border_index(x0 + lx, p.width, (gf_border)p.border);
        const int gy = gf_border_index(y0 + ly, p.height, (gf_border)p.border);
        const unsigned char *from = p.src + ((size_t)gy * p.width + gx) * C;
#pragma unroll
        for (int c = 0; c < C; c++)
            tile[i * C + c] = (gx < 0 || gy < 0) ? 0 : from[c];
    }
    __syncthreads();

    const int x = blockIdx.x * tw + threadIdx.x;
    const int y = blockIdx.y * th + threadIdx.y;
    if (x >= p.width || y >= p.height)
        return;
    float acc[C][CONV2D_MAX_MATRICES] = {};
    for (int my = 0; my < p.mask_height; my++) {
        const unsigned char *line = tile + ((threadIdx.y + my) * sw + threadIdx.x) * C;
        for (int mx = 0; mx < p.mask_width; mx++) {
            float px[C];
#pragma unroll
            for (int c = 0; c < C; c++)
                px[c] = (float)line[mx * C + c];
#pragma unroll
            for (int k = 0; k < CONV2D_MAX_MATRICES; k++) {
                if (k >= p.mask_count)
                    break;
                const float wk = w[k * taps + my * p.mask_width + mx];
#pragma unroll
                for (int c = 0; c < C; c++)
                    acc[c][k] = fmaf(px[c], wk, acc[c][k]);
            }
        }
    }
    const size_t at = ((size_t)y * p.width + x) * C;
#pragma unroll
    for (int c = 0; c < C; c++)
        p.dst[at + c] = c < p.channels_filtered ? conv2d_finish(acc[c], p) : p.src[at + c];
}

/* ---- versions 2 and 3: common parts --------------------------------------- */

namespace {

constexpr int kMaxMask = GF_MASK_MAX_SIZE;  /* 31 */
constexpr int kMaxThreads = 256;            /* per block (registers: 96 or 128, see below) */
constexpr float kMagic = 8388608.0f;        /* 2^23 */
/* Weights that travel as kernel parameters: the header plus 980 floats make
 * 4096 bytes, the parameter limit before CUDA 12.1 (a 31x31 matrix fits). */
constexpr int kParamWeights = 980;

/* How a matrix response is scaled: weights already divided by a scale that
 * is a power of two (exact), with or without offsets to add, or acc / scale
 * as version 1 does. MODE_DIV_ODD: version 4's 3x3 integer path, one
 * matrix, no offset, a scale that is an odd integer d, 3 <= |d| < 2^22
 * (box3): the exact integer sum t (|t| < 2^22) times fl(1/d) in one FFMA
 * that also rounds, the same byte as rint(t / d): t / d lies at least
 * 1 / (2|d|) from any half-integer (2t - d(2k + 1) is odd), and the
 * product is within |t / d| 2^-24 < 1 / (4|d|) of it, so both round the
 * same way, with no tie. Only the kernels with a loop for it are given it
 * (conv2d_make_plan). */
enum { MODE_PRESCALED_NO_OFFSET = 0, MODE_PRESCALED = 1, MODE_DIV = 2, MODE_DIV_ODD = 3 };
/* Added to MODE_PRESCALED_NO_OFFSET or MODE_DIV_ODD in a version 4 kernel
 * of its own for masks whose outputs cannot leave 0..255 (weights >= 0,
 * their sum at most the scale: gaussian, box): its outputs skip the clamp.
 * t >= 0, so the FFMA's result is at least 2^23; t <= 255 * scale, so it
 * rounds to at most 2^23 + 255 (for MODE_DIV_ODD: to rint(t / d) <= 255). */
constexpr int kInRange = 8;
/* How the matrix responses combine (gf_combine, NONE folded into SUM, and
 * MAX and MIN of one matrix too). */
enum { COMB_SUM = 0, COMB_MAG = 1, COMB_MAX = 2, COMB_MIN = 3 };

struct fast_header {
    const unsigned char *src;
    unsigned char *dst;
    const float *wdev;            /* device weights, for the shared-weight variants */
    const float *rowdev, *coldev; /* version 3, shared-weight variant */
    int width, height, border;
    int mw, mh;                   /* mask size */
    int cf;                       /* channels_filtered, clamped to 0..channels */
    int tw, th;                   /* tile in output pixels */
    int steps;                    /* tiles per block, walking down */
    int lq;                       /* input tile: slots of one column class (Q-split) */
    int rs;                       /* input tile: row stride in pixel slots */
    int hrs;                      /* version 3: row stride of the row-pass ring */
    int flat;                     /* src is 4-byte aligned: staging loads words */
    int vec;                      /* src and dst are 16-byte aligned: wide stores */
    int safe_rows;                /* rows below this one end 64+ bytes before the image */
    int aligned;                  /* version 4: src and every row start 16-byte aligned */
    /* version 4 in strips (steps > 1): the first edge_rows rows of blocks
     * take the columns of threads off the fast path, edge_left on the left
     * and those from edge_right0 on (edge_cols in all), one tile of rows at
     * a time; the other blocks skip them */
    int edge_rows, edge_cols, edge_left, edge_right0;
    int mode, comb;
    float scale[4], offset[4];
    float rcp[4];                 /* 1 / scale, rounded, where conv2d_div applies; else 0 */
};

template <int NW> struct fast_args {
    fast_header h;
    float w[NW];
};
static_assert(sizeof(fast_args<kParamWeights>) <= 4096, "kernel parameters over 4 KB");

template <int C> struct slot_floats { static constexpr int value = C == 3 ? 4 : C; };

__host__ __device__ constexpr int log2_of(int n) { return n <= 1 ? 0 : 1 + log2_of(n / 2); }

/* Pixel slot i of a float tile: C floats (RGB padded to 4), one 4-, 8- or
 * 16-byte shared access. */
template <int C>
__device__ __forceinline__ void conv2d_lds(const float *tile, int i, float (&v)[slot_floats<C>::value])
{
    if constexpr (C == 1) {
        v[0] = tile[i];
    } else if constexpr (C == 2) {
        const float2 t = reinterpret_cast<const float2 *>(tile)[i];
        v[0] = t.x;
        v[1] = t.y;
    } else {
        const float4 t = reinterpret_cast<const float4 *>(tile)[i];
        v[0] = t.x;
        v[1] = t.y;
        v[2] = t.z;
        v[3] = t.w;
    }
}

template <int C>
__device__ __forceinline__ void conv2d_sts(float *tile, int i, const float (&v)[slot_floats<C>::value])
{
    if constexpr (C == 1) {
        tile[i] = v[0];
    } else if constexpr (C == 2) {
        float2 t;
        t.x = v[0];
        t.y = v[1];
        reinterpret_cast<float2 *>(tile)[i] = t;
    } else {
        float4 t;
        t.x = v[0];
        t.y = v[1];
        t.z = v[2];
        t.w = v[3];
        reinterpret_cast<float4 *>(tile)[i] = t;
    }
}

/* MODE_DIV_ODD's finish of an exact integer sum held as the float 2^23 +
 * sum (0 <= sum < 2^23): rint(sum / d), with mul = 1 / d, plus 2^23, by a
 * FADD and one FFMA (no clamp: the box masks' outputs are in range). */
__device__ __forceinline__ float conv2d_div_odd(float biased, float mul)
{
    return __fmaf_rn(__fadd_rn(biased, -kMagic), mul, kMagic);
}

/* Byte i of a word as a float: 0x4B0000bb is 2^23 + b exactly, so one PRMT
 * and one FADD, both full-rate, replace the quarter-rate I2F. */
__device__ __forceinline__ float conv2d_byte(unsigned word, int i)
{
    return __fadd_rn(__uint_as_float(__byte_perm(word, 0x4B000000u, 0x7440u | (unsigned)i)), -kMagic);
}

/* The low bytes of four values from conv2d_value, packed into a word. */
__device__ __forceinline__ unsigned conv2d_pack(float a, float b, float c, float d)
{
    return __byte_perm(__byte_perm(__float_as_uint(a), __float_as_uint(b), 0x0040u),
                       __byte_perm(__float_as_uint(c), __float_as_uint(d), 0x0040u), 0x5410u);
}

/* MUFU's square roots: rsqrt.approx (MUFU.RSQ, the first step of nvcc's
 * sqrt.rn) with RECIPROCAL, else sqrt.approx (MUFU.SQRT). */
template <bool RECIPROCAL>
__device__ __forceinline__ float conv2d_mufu_sqrt(float v)
{
#ifdef __CUDA_ARCH__
    float y;
    if constexpr (RECIPROCAL)
        asm("rsqrt.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(v));
    else
        asm("sqrt.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(v));
    return y;
#else
    return RECIPROCAL ? 1.0f / sqrtf(v) : sqrtf(v);
#endif
}

/* a / s correctly rounded, given r = 1 / s rounded (the host's division;
 * conv2d_div_range says for which masks, r = 0 for the others): the quotient
 * through r, then one correction by the exact residual (Markstein), the
 * same steps as __fdiv_rn's fast path but without its range test, which
 * sends a dividend of 0 (a black region's sums) to a slow subroutine: with
 * it, box3 ran 40% slower on a photo than on noise, and in strips the
 * strips crossing black rows set the kernel's time. */
__device__ __forceinline__ float conv2d_div(float a, float s, float r)
{
    const float q = __fmul_rn(a, r);
    return __fmaf_rn(__fmaf_rn(-q, s, a), r, q);
}

/* conv2d_finish for one channel of one output, in version 1's operations
 * (rn division, conv2d_div's, or the exact prescaled sum, rn offset add,
 * fma for the magnitude, IEEE sqrt), returned as 2^23 + the output byte:
 * clamping to 0..255 first and adding 2^23 rounds half to even like rintf
 * and leaves the byte in the low 8 bits, so no F2I is needed. NaN clamps
 * to 0, as fmaxf(rintf(NaN), 0) does.
 *
 * The magnitude (conv2d_magnitude, given the sum of squares) clamps the sum
 * to [2^-60, 255^2] before the square root instead of clamping after it:
 * the same byte (sqrt is monotonic, sqrt(255^2) = 255, anything below
 * 2^-30 rounds to 0), and in that range sqrt.rn is exactly its fast path,
 * written out here: MUFU.RSQ and one Newton step (nvcc's own sequence for
 * normal inputs), without the range test and branch to the slow path. */
__device__ __forceinline__ float conv2d_magnitude(float v)
{
    v = fminf(fmaxf(v, 0x1p-60f), 65025.0f);
    const float y = conv2d_mufu_sqrt<true>(v);
    const float s = __fmul_rn(v, y), half = __fmul_rn(y, 0.5f);
    return __fadd_rn(__fmaf_rn(__fmaf_rn(-s, s, v), half, s), kMagic);
}

template <int MODE, int COMB, int K>
__device__ __forceinline__ float conv2d_value(const float (&acc)[K], const fast_header &h)
{
    float v = 0.0f;
#pragma unroll
    for (int k = 0; k < K; k++) {
        float r = acc[k];
        if (MODE == MODE_DIV)
            r = h.rcp[k] != 0.0f ? conv2d_div(r, h.scale[k], h.rcp[k]) : __fdiv_rn(r, h.scale[k]);
        if (MODE != MODE_PRESCALED_NO_OFFSET)  /* r + 0 is r: skipped when all offsets are 0 */
            r = __fadd_rn(r, h.offset[k]);
        if (COMB == COMB_MAG)
            v = k == 0 ? __fmul_rn(r, r) : __fmaf_rn(r, r, v);
        else if (COMB == COMB_MAX)
            v = k == 0 ? r : fmaxf(v, r);
        else if (COMB == COMB_MIN)
            v = k == 0 ? r : fminf(v, r);
        else
            v = k == 0 ? r : __fadd_rn(v, r);
    }
    if (COMB == COMB_MAG)
        return conv2d_magnitude(v);
    return __fadd_rn(fminf(fmaxf(v, 0.0f), 255.0f), kMagic);
}

/* Stage 'count' input rows into a float tile: image rows yimg..yimg+count-1
 * and columns xin..xin+L-1 (any integers, mapped through the border), row u
 * into slot row (slot0 + u) mod R. Columns are stored Q-split: pixel l at
 * (l % Q) * lq + l / Q, so that a thread reading pixels Q*t + i (its window)
 * and its neighbours read consecutive slots: conflict-free wide loads.
 * Channels >= CF are left 0: they are copied from the source at the store.
 *
 * The common case (interior block, rows inside the image and not within 64
 * bytes of its end: all steps but the first and last of the top and bottom
 * blocks) goes by groups: group g of a row is pixels Q*g .. Q*g + Q - 1,
 * which land in slots g, g + lq, g + 2 lq, ...; its Q*C bytes are read as
 * aligned words (a PRMT realigns them when C != 4), B groups per thread in
 * flight before any is converted (B is about the groups a thread has per
 * step, so that a step costs one memory round trip). Everything else maps
 * each pixel through gf_border_index. */
template <int C, int CF, int Q, int B>
__device__ __forceinline__ void conv2d_stage(const fast_header &h, float *tile, int xin, int L,
                                             int yimg, int count, int slot0, int R, bool interior,
                                             int tid, int nt)
{
    constexpr int CP = slot_floats<C>::value;
    constexpr int LQ = log2_of(Q);
    const int lq = h.lq, rs = h.rs;
    if (interior && yimg >= 0 && yimg + count <= h.safe_rows) {
        constexpr int NB = Q * C, NWD = NB / 4;  /* bytes and words of a group */
        static_assert(NB % 4 == 0, "whole words per group");
        const size_t row_bytes = (size_t)h.width * C;
        const int items = count * lq;
        /* item (u, g): group g of row u. The item index advances by nt, so
         * (u, g) advance by (du, dg) with a carry into u; the source pointer,
         * the ring row and the slot follow incrementally. */
        const int du = nt / lq, dg = nt - du * lq;
        const int u0 = tid / lq, g0 = tid - u0 * lq;
        int g = g0, r = slot0 + u0 % R;
        if (r >= R)
            r -= R;
        int at = r * rs + g;
        const unsigned char *from =
            h.src + (size_t)(yimg + u0) * row_bytes + (size_t)xin * C + (size_t)g0 * NB;
        const size_t step = (size_t)du * row_bytes + (size_t)dg * NB;
        const size_t carry = row_bytes - (size_t)lq * NB;
        for (int it0 = tid; it0 < items; it0 += B * nt) {
            unsigned w[B][NWD];
            int slot[B];  /* slot of the group's first pixel */
            int left[B];  /* its pixels inside the segment; 0: no item */
#pragma unroll
            for (int b = 0; b < B; b++) {
                slot[b] = at;
                left[b] = 0;
#pragma unroll
                for (int m = 0; m < NWD; m++)
                    w[b][m] = 0;
                if (it0 + b * nt < items) {
                    left[b] = L - Q * g;
                    if constexpr (C == 4) {
#pragma unroll
                        for (int m = 0; m < NWD; m++)
                            w[b][m] = reinterpret_cast<const unsigned *>(from)[m];
                    } else {
                        const unsigned shift = (unsigned)(uintptr_t)from & 3;
                        const unsigned *words = reinterpret_cast<const unsigned *>(from - shift);
                        unsigned raw[NWD + 1];
#pragma unroll
                        for (int m = 0; m <= NWD; m++)
                            raw[m] = words[m];
                        const unsigned sel = 0x3210u + shift * 0x1111u;
#pragma unroll
                        for (int m = 0; m < NWD; m++)
                            w[b][m] = __byte_perm(raw[m], raw[m + 1], sel);
                    }
                }
                g += dg;
                r += du;
                at += du * rs + dg;
                from += step;
                if (g >= lq) {
                    g -= lq;
                    r++;
                    at += rs - lq;
                    from += carry;
                }
                while (r >= R) {  /* du < R: at most twice */
                    r -= R;
                    at -= R * rs;
                }
            }
#pragma unroll
            for (int b = 0; b < B; b++) {
                float f[Q][CP];
#pragma unroll
                for (int k = 0; k < Q; k++)
#pragma unroll
                    for (int c = 0; c < CP; c++)
                        f[k][c] = c < CF ? conv2d_byte(w[b][(k * C + c) / 4], (k * C + c) % 4) : 0.0f;
                if (left[b] >= Q) {  /* whole groups: no per-pixel branch */
#pragma unroll
                    for (int k = 0; k < Q; k++)
                        conv2d_sts<C>(tile, slot[b] + k * lq, f[k]);
                } else {             /* the last group of a row */
#pragma unroll
                    for (int k = 0; k < Q; k++)
                        if (k < left[b])
                            conv2d_sts<C>(tile, slot[b] + k * lq, f[k]);
                }
            }
        }
        return;
    }
    /* one pixel per item, both coordinates mapped */
    const int items = count * L;
    const int du = nt / L, dl = nt - du * L;
    int u = tid / L, l = tid - u * L;
    for (int it = tid; it < items; it += nt) {
        const int gy = gf_border_index(yimg + u, h.height, (gf_border)h.border);
        const int gx = gf_border_index(xin + l, h.width, (gf_border)h.border);
        float v[CP];
#pragma unroll
        for (int c = 0; c < CP; c++)
            v[c] = 0.0f;
        if (gx >= 0 && gy >= 0) {
            const unsigned char *from = h.src + ((size_t)gy * h.width + gx) * C;
#pragma unroll
            for (int c = 0; c < CF; c++)
                v[c] = (float)from[c];
        }
        int r = slot0 + u;
        if (r >= R)
            r -= R;
        conv2d_sts<C>(tile, r * rs + (l & (Q - 1)) * lq + (l >> LQ), v);
        l += dl;
        u += du;
        if (l >= L) {
            l -= L;
            u++;
        }
    }
}

/* The Q * C bytes of a thread's Q pixels as whole words, packed with PRMT:
 * the filtered channels from conv2d_value (fv[q][c], c < CF), 0 in the
 * others (merged from the source by the caller). */
template <int C, int CF, int Q>
__device__ __forceinline__ void conv2d_pack_words(const float (&fv)[Q][CF], unsigned (&w)[Q * C / 4])
{
    auto byte_of = [&](int b) { /* compile-time b */
        const int q = b / C, c = b % C;
        return c < CF ? fv[q][c < CF ? c : 0] : 0.0f;
    };
#pragma unroll
    for (int k = 0; k < Q * C / 4; k++)
        w[k] = conv2d_pack(byte_of(4 * k), byte_of(4 * k + 1), byte_of(4 * k + 2), byte_of(4 * k + 3));
}

/* Word k of a run of pixels from 'result' (the filtered channels, packed)
 * and 'source' (the same word of the input: the channels copied, alpha):
 * one PRMT with a compile-time selector. */
template <int C, int CF>
__device__ __forceinline__ unsigned conv2d_merge(unsigned result, unsigned source, int k)
{
    unsigned sel = 0;
    for (int j = 0; j < 4; j++)
        sel |= (unsigned)((4 * k + j) % C < CF ? j : 4 + j) << (4 * j);
    return __byte_perm(result, source, sel);
}

/* Write the Q pixels x..x+Q-1 of row y: their filtered channels from
 * conv2d_value (fv[q][c], c < CF), the others copied from src. Whole runs
 * inside the image go out as 16-, 8- or 4-byte stores (whichever the address
 * allows), packed with PRMT, the copied channels merged from the source
 * words with one more PRMT; the right edge and unusual channels_filtered
 * values go byte by byte. */
template <int C, int CF, int Q>
__device__ __forceinline__ void conv2d_store(const fast_header &h, int y, int x,
                                             const float (&fv)[Q][CF], const unsigned *given = nullptr)
{
    constexpr int NB = Q * C, NW = NB / 4;
    static_assert(NB % 4 == 0, "runs of whole words");
    const size_t o = ((size_t)y * h.width + x) * C;
    if (h.vec && x + Q <= h.width && h.cf == CF && (o & 3) == 0) {
        unsigned w[NW];
        conv2d_pack_words<C, CF, Q>(fv, w);
        constexpr bool copy = CF < C;
        if (NB % 16 == 0 && (o & 15) == 0) {
#pragma unroll
            for (int k = 0; k < NW; k += 4) {
                uint4 t;
                t.x = w[k];
                t.y = w[k + 1];
                t.z = w[k + 2];
                t.w = w[k + 3];
                if (copy) {
                    const uint4 v = given ? make_uint4(given[k], given[k + 1], given[k + 2], given[k + 3])
                                          : *reinterpret_cast<const uint4 *>(h.src + o + 4 * k);
                    t.x = conv2d_merge<C, CF>(t.x, v.x, k);
                    t.y = conv2d_merge<C, CF>(t.y, v.y, k + 1);
                    t.z = conv2d_merge<C, CF>(t.z, v.z, k + 2);
                    t.w = conv2d_merge<C, CF>(t.w, v.w, k + 3);
                }
                *reinterpret_cast<uint4 *>(h.dst + o + 4 * k) = t;
            }
        } else if (NB % 8 == 0 && (o & 7) == 0) {
#pragma unroll
            for (int k = 0; k < NW; k += 2) {
                uint2 t;
                t.x = w[k];
                t.y = w[k + 1];
                if (copy) {
                    const uint2 v = given ? make_uint2(given[k], given[k + 1])
                                          : *reinterpret_cast<const uint2 *>(h.src + o + 4 * k);
                    t.x = conv2d_merge<C, CF>(t.x, v.x, k);
                    t.y = conv2d_merge<C, CF>(t.y, v.y, k + 1);
                }
                *reinterpret_cast<uint2 *>(h.dst + o + 4 * k) = t;
            }
        } else {
#pragma unroll
            for (int k = 0; k < NW; k++) {
                unsigned t = w[k];
                if (copy) {
                    const unsigned v = given ? given[k] : *reinterpret_cast<const unsigned *>(h.src + o + 4 * k);
                    t = conv2d_merge<C, CF>(t, v, k);
                }
                *reinterpret_cast<unsigned *>(h.dst + o + 4 * k) = t;
            }
        }
        return;
    }
#pragma unroll
    for (int q = 0; q < Q; q++) {
        if (x + q >= h.width)
            break;
#pragma unroll
        for (int c = 0; c < C; c++) {
            const size_t at = o + (size_t)q * C + c;
            h.dst[at] = c < CF && c < h.cf ? (unsigned char)__float_as_uint(fv[q][c < CF ? c : 0])
                                           : h.src[at];
        }
    }
}

/* conv2d_store's aligned case for a thread's Q pixels of all C channels:
 * NB = Q * C bytes (4, 8 or 16) at 'o', which the caller knows to be
 * NB-byte aligned; the channels past CF from 'given', the input's words of
 * those pixels (the caller's registers). STREAM: 16 bytes stored
 * evict-first (st.global.cs), for outputs L2 need not keep. */
template <int C, int CF, int Q, bool STREAM = false>
__device__ __forceinline__ void conv2d_store_wide(unsigned char *o, const float (&fv)[Q][CF],
                                                  const unsigned *given = nullptr)
{
    constexpr int NB = Q * C, NW = NB / 4;
    static_assert(NB == 4 || NB == 8 || NB == 16, "whole words");
    unsigned w[NW];
    conv2d_pack_words<C, CF, Q>(fv, w);
    if constexpr (CF < C) {
#pragma unroll
        for (int k = 0; k < NW; k++)
            w[k] = conv2d_merge<C, CF>(w[k], given[k], k);
    }
    if constexpr (NB == 16 && STREAM)
        __stcs(reinterpret_cast<uint4 *>(o), make_uint4(w[0], w[1], w[2], w[3]));
    else if constexpr (NB == 16)
        *reinterpret_cast<uint4 *>(o) = make_uint4(w[0], w[1], w[2], w[3]);
    else if constexpr (NB == 8)
        *reinterpret_cast<uint2 *>(o) = make_uint2(w[0], w[1]);
    else
        *reinterpret_cast<unsigned *>(o) = w[0];
}

/* ---- version 2: register-blocked ------------------------------------------ */

/* One input row r (0-based from the thread's first input row) into the
 * accumulators of the thread's P x Q outputs: output row j takes it as its
 * mask row my = r - j. A window of Q pixels slides along the row, one new
 * pixel per mask column, so the row costs Q + w - 1 shared loads. Every
 * output accumulates in version 1's order: mask rows, then columns. */
template <int C, int CF, int K, int MW, int MH, int P, int Q, bool WS, int NW>
__device__ __forceinline__ void conv2d_row2(float (&acc)[P][Q][K][CF], const float *tile,
                                            int row_at, const int (&cls)[Q], int r, int mw, int mh,
                                            const fast_args<NW> &a, const float *wsh)
{
    constexpr int CP = slot_floats<C>::value;
    float win[Q][CP];
#pragma unroll
    for (int q = 0; q < Q; q++)
        conv2d_lds<C>(tile, row_at + cls[q], win[q]);
#pragma unroll
    for (int mx = 0; mx < (MW ? MW : kMaxMask); mx++) {
        if (!MW && mx >= mw)
            break;
        if (mx > 0) {
#pragma unroll
            for (int q = 0; q + 1 < Q; q++)
#pragma unroll
                for (int c = 0; c < CP; c++)
                    win[q][c] = win[q + 1][c];
            const int i = Q + mx - 1;  /* the pixel entering the window */
            conv2d_lds<C>(tile, row_at + cls[i % Q] + i / Q, win[Q - 1]);
        }
#pragma unroll
        for (int j = 0; j < P; j++) {
            const int my = r - j;
            if (MH && (my < 0 || my >= MH))
                continue;  /* compile-time: r is unrolled when MH is */
#pragma unroll
            for (int k = 0; k < K; k++) {
                const int wi = (k * mh + my) * mw + mx;
                const float wv = WS ? wsh[wi] : a.w[wi];
#pragma unroll
                for (int q = 0; q < Q; q++)
#pragma unroll
                    for (int c = 0; c < CF; c++)
                        acc[j][q][k][c] = fmaf(win[q][c], wv, acc[j][q][k][c]);
            }
        }
    }
}

/* One output row of Q pixels: value(s) finishes the K matrix sums s of a
 * pixel and channel (versions 2 and 4 pass their own finishing). */
template <int C, int CF, int K, int Q, class Value>
__device__ __forceinline__ void conv2d_finish_row(const float (&acc)[Q][K][CF],
                                                  const fast_header &h, int y, int x, Value value)
{
    float fv[Q][CF];
#pragma unroll
    for (int q = 0; q < Q; q++)
#pragma unroll
        for (int c = 0; c < CF; c++) {
            float s[K];
#pragma unroll
            for (int k = 0; k < K; k++)
                s[k] = acc[q][k][c];
            fv[q][c] = value(s);
        }
    conv2d_store<C, CF, Q>(h, y, x, fv);
}

template <int C, int CF, int K, int P, int Q, int MODE, int COMB>
__device__ __forceinline__ void conv2d_emit2(const float (&acc)[P][Q][K][CF], const fast_header &h,
                                             int y, int x)
{
#pragma unroll
    for (int j = 0; j < P; j++) {
        if (y + j >= h.height)
            break;
        conv2d_finish_row<C, CF, K, Q>(acc[j], h, y + j, x, [&](const float (&s)[K]) {
            return conv2d_value<MODE, COMB, K>(s, h);
        });
    }
}

/* One switch per step on the (uniform) mode and combination: the finish
 * code is specialised for each. One matrix: SUM and MAG only (the host maps
 * MAX and MIN of one matrix to SUM). */
template <int C, int CF, int K, int P, int Q>
__device__ __forceinline__ void conv2d_emit2_any(const float (&acc)[P][Q][K][CF],
                                                 const fast_header &h, int y, int x)
{
#define CONV2D_EMIT(MODE)                                                                     \
    switch (K == 1 && h.comb != COMB_MAG ? COMB_SUM : h.comb) {                               \
    case COMB_MAG: conv2d_emit2<C, CF, K, P, Q, MODE, COMB_MAG>(acc, h, y, x); break;         \
    case COMB_MAX: if (K > 1) conv2d_emit2<C, CF, K, P, Q, MODE, COMB_MAX>(acc, h, y, x); break; \
    case COMB_MIN: if (K > 1) conv2d_emit2<C, CF, K, P, Q, MODE, COMB_MIN>(acc, h, y, x); break; \
    default:       conv2d_emit2<C, CF, K, P, Q, MODE, COMB_SUM>(acc, h, y, x); break;         \
    }
    if (h.mode == MODE_PRESCALED_NO_OFFSET) {
        CONV2D_EMIT(MODE_PRESCALED_NO_OFFSET)
    } else if (h.mode == MODE_PRESCALED) {
        CONV2D_EMIT(MODE_PRESCALED)
    } else {
        CONV2D_EMIT(MODE_DIV)
    }
#undef CONV2D_EMIT
}

/* Register cap of a version 2 instantiation: 96 when its accumulators and
 * window take at most 64 (checked: no spills), so that 5 blocks of 128
 * threads fit an SM (20 warps to overlap one block's loads with the
 * others' FMAs); 128 (2 blocks of 256) otherwise. */
template <int C, int CF, int K, int P, int Q> struct conv2d_registers {
    static constexpr int value = P * Q * K * CF + Q * slot_floats<C>::value <= 64 ? 96 : 128;
};

/* MW, MH: the mask size, or 0 for the generic kernel (run-time size, the
 * column loop unrolled to 31 with an exit, P == 1). WS: weights in shared
 * memory (from h.wdev) instead of the parameters. CF: channels computed;
 * h.cf <= CF says which of them are written (the rest are copied). */
template <int C, int CF, int K, int MW, int MH, int P, int Q, bool WS, int NW>
__global__ void __maxnreg__((conv2d_registers<C, CF, K, P, Q>::value))
    conv2d_kernel2(const fast_args<NW> a)
{
    static_assert(MH > 0 || P == 1, "the generic kernel computes one row per thread");
    extern __shared__ __align__(16) float conv2d_smem2[];
    const fast_header &h = a.h;
    const int mw = MW ? MW : h.mw, mh = MH ? MH : h.mh;
    const int taps = K * mw * mh;
    float *wsh = conv2d_smem2;
    float *tile = conv2d_smem2 + (WS ? (taps + 3) & ~3 : 0);
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int nt = blockDim.x * blockDim.y, tid = ty * blockDim.x + tx;
    if (WS)
        for (int i = tid; i < taps; i += nt)
            wsh[i] = h.wdev[i];  /* visible after the first staging barrier */

    const int TW = h.tw, TH = h.th;
    const int L = TW + mw - 1, R = TH + mh - 1;
    const int x0 = blockIdx.x * TW, xin = x0 - mw / 2;
    const int ystrip = blockIdx.y * h.steps * TH, yin = ystrip - mh / 2;
    const bool interior = h.flat && xin >= 0 && xin + L <= h.width;
    int cls[Q];  /* slot of the thread's window pixel q in a row */
#pragma unroll
    for (int q = 0; q < Q; q++)
        cls[q] = q * h.lq + tx;

    for (int s = 0; s < h.steps; s++) {
        const int y0 = ystrip + s * TH;
        if (y0 >= h.height)
            break;
        /* ring row i holds image row yin + i in slot i mod R; step s needs
         * ring rows s*TH .. s*TH + R - 1, of which the first R - TH are
         * already there after step 0 */
        const int first = s == 0 ? 0 : s * TH + mh - 1;
        if (s > 0)
            __syncthreads();  /* the slots to overwrite are no longer read */
        /* a thread stages about P * (1 + (w - 1) / tw) groups per step */
        conv2d_stage<C, CF, Q, P + (P + 3) / 4>(h, tile, xin, L, yin + first, s == 0 ? R : TH,
                                                first % R, R, interior, tid, nt);
        __syncthreads();

        float acc[P][Q][K][CF];
        conv2d_zero(acc);
        const int base = (s * TH + ty * P) % R;
        if constexpr (MH > 0) {
#pragma unroll
            for (int r = 0; r < P + MH - 1; r++) {
                const int slot = base + r < R ? base + r : base + r - R;
                conv2d_row2<C, CF, K, MW, MH, P, Q, WS, NW>(acc, tile, slot * h.rs, cls, r, mw, mh,
                                                            a, wsh);
            }
        } else {
#pragma unroll 1
            for (int r = 0; r < mh; r++) {
                const int slot = base + r < R ? base + r : base + r - R;
                conv2d_row2<C, CF, K, MW, MH, P, Q, WS, NW>(acc, tile, slot * h.rs, cls, r, mw, mh,
                                                            a, wsh);
            }
        }

        const int y = y0 + ty * P, x = x0 + Q * tx;
        if (x < h.width)
            conv2d_emit2_any<C, CF, K, P, Q>(acc, h, y, x);
    }
}

/* ---- version 3: separable, fused ------------------------------------------ */

/* Ring slot of column x of the row-pass results: an XOR swizzle inside each
 * group of n slots (n = slots per 128-byte bank line) makes both the row
 * pass's writes (thread t: columns 8t..8t+7) and the column pass's reads
 * (thread t: column t) conflict-free. */
template <int C>
__device__ __forceinline__ int conv2d_swizzle(int x)
{
    constexpr int n = 32 / slot_floats<C>::value, ln = log2_of(n);
    return x ^ ((x >> ln) & (n - 1));
}

template <int C, int CF, int MODE, int COMB>
__device__ __forceinline__ void conv2d_emit3(const float (&acc)[8][CF], const fast_header &h, int y,
                                             int x)
{
    const size_t o = ((size_t)y * h.width + x) * C;
#pragma unroll
    for (int j = 0; j < 8; j++) {
        if (y + j >= h.height)
            break;
        const size_t at = o + (size_t)j * h.width * C;
        float fv[CF];
#pragma unroll
        for (int c = 0; c < CF; c++) {
            const float s[1] = {acc[j][c]};
            fv[c] = conv2d_value<MODE, COMB, 1>(s, h);
        }
        if (C == 4 && h.vec && h.cf == CF) {
            unsigned w = conv2d_pack(fv[0], fv[1 < CF ? 1 : 0], fv[2 < CF ? 2 : 0], fv[CF - 1]);
            if (CF < 4)  /* alpha from the source word */
                w = __byte_perm(w, *reinterpret_cast<const unsigned *>(h.src + at), 0x7210u);
            *reinterpret_cast<unsigned *>(h.dst + at) = w;
        } else {
#pragma unroll
            for (int c = 0; c < C; c++)
                h.dst[at + c] = c < CF && c < h.cf ? (unsigned char)__float_as_uint(fv[c < CF ? c : 0])
                                                   : h.src[at + c];
        }
    }
}

/* Block: (tw, th / 8) threads. Per step: the rows not yet in the ring are
 * staged (at most th at a time), each thread runs the row pass on 8
 * adjacent columns of one staged row into the ring; then each thread runs
 * the column pass on 8 rows of its own column. Weights: row in w[0..31],
 * column in w[32..63] (compile-time indices: FFMA constant operands). */
template <int C, int CF, bool WS>
__global__ void __launch_bounds__(kMaxThreads, 2) conv2d_kernel3(const fast_args<64> a)
{
    extern __shared__ __align__(16) float conv2d_smem2[];
    constexpr int CP = slot_floats<C>::value;
    const fast_header &h = a.h;
    const int mw = h.mw, mh = h.mh;
    const int TW = h.tw, TH = h.th;
    const int L = TW + mw - 1, R = TH + mh - 1;
    float *wsh = conv2d_smem2;
    float *in = conv2d_smem2 + (WS ? 64 : 0);
    float *ring = in + (size_t)TH * h.rs * CP;
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int nt = blockDim.x * blockDim.y, tid = ty * blockDim.x + tx;
    if (WS) {
        for (int i = tid; i < mw; i += nt)
            wsh[i] = h.rowdev[i];
        for (int i = tid; i < mh; i += nt)
            wsh[32 + i] = h.coldev[i];
    }
    /* row pass: thread -> staged row hr, columns 8 hx .. 8 hx + 7 */
    const int nxh = TW / 8, hr = tid / nxh, hx = tid - hr * nxh;
    int cls[8];
#pragma unroll
    for (int q = 0; q < 8; q++)
        cls[q] = q * h.lq + hx;
    const int x0 = blockIdx.x * TW, xin = x0 - mw / 2;
    const int ystrip = blockIdx.y * h.steps * TH, yin = ystrip - mh / 2;
    const bool interior = h.flat && xin >= 0 && xin + L <= h.width;
    const int vcol = conv2d_swizzle<C>(tx);

    int next = 0;  /* next ring row (input row yin + next) to compute */
    for (int s = 0; s < h.steps; s++) {
        const int y0 = ystrip + s * TH;
        if (y0 >= h.height)
            break;
        const int need = s * TH + R;
        while (next < need) {
            const int count = need - next < TH ? need - next : TH;
            __syncthreads();  /* 'in' and the ring slots to overwrite are free */
            conv2d_stage<C, CF, 8, 2>(h, in, xin, L, yin + next, count, 0, 1 << 30, interior, tid, nt);
            __syncthreads();
            if (hr < count) {
                float acc[8][CF];
                conv2d_zero(acc);
                const int row_at = hr * h.rs;
                float win[8][CP];
#pragma unroll
                for (int q = 0; q < 8; q++)
                    conv2d_lds<C>(in, row_at + cls[q], win[q]);
#pragma unroll
                for (int mx = 0; mx < kMaxMask; mx++) {
                    if (mx >= mw)
                        break;
                    if (mx > 0) {
#pragma unroll
                        for (int q = 0; q < 7; q++)
#pragma unroll
                            for (int c = 0; c < CP; c++)
                                win[q][c] = win[q + 1][c];
                        const int i = 7 + mx;
                        conv2d_lds<C>(in, row_at + cls[i % 8] + i / 8, win[7]);
                    }
                    const float wv = WS ? wsh[mx] : a.w[mx];
#pragma unroll
                    for (int q = 0; q < 8; q++)
#pragma unroll
                        for (int c = 0; c < CF; c++)
                            acc[q][c] = fmaf(win[q][c], wv, acc[q][c]);
                }
                const int slot = (next + hr) % R;
#pragma unroll
                for (int q = 0; q < 8; q++) {
                    float v[CP];
#pragma unroll
                    for (int c = 0; c < CP; c++)
                        v[c] = c < CF ? acc[q][c < CF ? c : 0] : 0.0f;
                    conv2d_sts<C>(ring, slot * h.hrs + conv2d_swizzle<C>(8 * hx + q), v);
                }
            }
            next += count;
        }
        __syncthreads();

        /* column pass: thread -> column tx, rows 8 ty .. 8 ty + 7 */
        float acc[8][CF];
        conv2d_zero(acc);
        const int base = (s * TH + 8 * ty) % R;
        auto ring_at = [&](int i) {
            const int r = base + i < R ? base + i : base + i - R;
            return r * h.hrs + vcol;
        };
        float win[8][CP];
#pragma unroll
        for (int j = 0; j < 8; j++)
            conv2d_lds<C>(ring, ring_at(j), win[j]);
#pragma unroll
        for (int my = 0; my < kMaxMask; my++) {
            if (my >= mh)
                break;
            if (my > 0) {
#pragma unroll
                for (int j = 0; j < 7; j++)
#pragma unroll
                    for (int c = 0; c < CP; c++)
                        win[j][c] = win[j + 1][c];
                conv2d_lds<C>(ring, ring_at(7 + my), win[7]);
            }
            const float wv = WS ? wsh[32 + my] : a.w[32 + my];
#pragma unroll
            for (int j = 0; j < 8; j++)
#pragma unroll
                for (int c = 0; c < CF; c++)
                    acc[j][c] = fmaf(win[j][c], wv, acc[j][c]);
        }
        const int y = y0 + 8 * ty, x = x0 + tx;
        if (x < h.width && y < h.height) {
            const bool mag = h.comb == COMB_MAG;
            if (h.mode == MODE_PRESCALED_NO_OFFSET) {
                if (mag)
                    conv2d_emit3<C, CF, MODE_PRESCALED_NO_OFFSET, COMB_MAG>(acc, h, y, x);
                else
                    conv2d_emit3<C, CF, MODE_PRESCALED_NO_OFFSET, COMB_SUM>(acc, h, y, x);
            } else if (h.mode == MODE_PRESCALED) {
                if (mag)
                    conv2d_emit3<C, CF, MODE_PRESCALED, COMB_MAG>(acc, h, y, x);
                else
                    conv2d_emit3<C, CF, MODE_PRESCALED, COMB_SUM>(acc, h, y, x);
            } else {
                if (mag)
                    conv2d_emit3<C, CF, MODE_DIV, COMB_MAG>(acc, h, y, x);
                else
                    conv2d_emit3<C, CF, MODE_DIV, COMB_SUM>(acc, h, y, x);
            }
        }
    }
}

/* ---- version 4: direct ----------------------------------------------------- */

/* Output rows per thread and tile (a thread's strip is h.steps tiles):
 * 16 for RGBA 5x5, 7x7 and gradient pairs (their M - 1 halo rows and the
 * per-thread setup spread over twice the outputs: 10-12% faster on the
 * H100), 8 for the rest (3x3 of one matrix and gray lost 5-8% at 16,
 * bench/RESULTS.md), 32 for 15x15 (each input row costs 15 rows of DP4A,
 * and the first 14 feed no output of the thread). */
template <int C, int K, int M>
__host__ __device__ constexpr int conv2d_rows4()
{
    return M > 7 ? 32 : C == 4 && (M >= 5 || K == 2) ? 16 : 8;
}

/* The halo of a row on either side of a thread's columns, M / 2 pixels,
 * in whole 32-bit words. */
__host__ __device__ constexpr int conv2d_halo4_words(int C, int M)
{
    return (M / 2 * C + 3) / 4;
}

/* The 32-bit words a thread reads of one input row, one slot of its ring:
 * the halo on either side and its own Q columns. */
__host__ __device__ constexpr int conv2d_ring4_words(int C, int Q, int M)
{
    return 2 * conv2d_halo4_words(C, M) + Q * C / 4;
}

/* Those words: SW on either side and OWN for the thread's own columns. */
template <int C, int Q, int M> struct row4 {
    static constexpr int RAD = M / 2, SW = conv2d_halo4_words(C, M), OWN = Q * C / 4,
                         NWD = conv2d_ring4_words(C, Q, M);
    static_assert(Q * C % 4 == 0 && Q * C <= 16, "a thread's own bytes are 1 to 4 whole words");
};

/* Rows a thread keeps in its ring in shared memory: kSlots4 - 1 of them
 * fetched ahead of the one it converts; 4 for masks over 7x7, whose rows
 * are 15 words and take long enough to compute (8 would need 123 KB of
 * shared memory for a block of 256 threads); 3 past 15x15 (the running
 * sums alone: 36 words a row for 31x31, twice over, 216 KB for 256
 * threads). */
__host__ __device__ constexpr int conv2d_slots4(int M)
{
    return M > 15 ? 3 : M > 7 ? 4 : 8;
}
template <int M> constexpr int kSlots4 = conv2d_slots4(M);

/* A thread's ring: S slots (kSlots4<M>; the running sums', twice that),
 * each one input row, in planes across the block's T threads so that a
 * warp's accesses to one plane are consecutive (no bank conflicts). The
 * own bytes are NV vectors of VB bytes (one 16- or 8-byte copy where Q * C
 * allows), then the halo, as NH vectors of HBYTES a side (words, but for
 * the running sums). Vectors wider than a word may cover more than the SW
 * halo words, PADW words a side, fetched and never read: the running sums'
 * rows are whole 16-byte vectors on the fast path (h.aligned: the row's
 * bytes and x * C multiples of 16), so the fast path's test for SW words
 * keeps the padded vectors inside the row too. Only the thread itself
 * writes and reads its slots, so no barrier is needed:
 * cp.async.wait_group orders its own copies. */
template <int C, int Q, int M, int S = kSlots4<M>, int HBYTES = 4> struct ring4 {
    using R = row4<C, Q, M>;
    static constexpr int VB = R::OWN == 4 ? 16 : R::OWN == 2 ? 8 : 4, NV = R::OWN * 4 / VB;
    /* the halo on either side as NH vectors of HB bytes (4: words) */
    static constexpr int HB = HBYTES, NH = (R::SW * 4 + HB - 1) / HB, PADW = NH * HB / 4 - R::SW;
    static constexpr int SLOT_BYTES = R::OWN * 4 + 2 * NH * HB;  /* one slot, both halos */
    static_assert(HB <= VB && (PADW == 0 || VB == 16), "halo vectors as aligned as the own ones");
    unsigned own0, halo0;  /* shared addresses of this thread's first vector and word */
    unsigned T;            /* the block's threads */
    /* base: the ring's shared address; t: this thread */
    __device__ ring4(unsigned base, unsigned t, unsigned threads)
        : own0(base + t * VB), halo0(base + S * R::OWN * 4 * threads + t * HB), T(threads)
    {
    }
    __device__ unsigned own(int slot, int v) const
    {
        return own0 + (unsigned)(slot * NV + v) * T * VB;
    }
    __device__ unsigned halo(int slot, int k) const
    {
        return halo0 + (unsigned)(slot * 2 * NH + k) * T * HB;
    }
};

/* cp.async (compute capability 8.0 and up; before it, a load and a store
 * in the thread: the same bytes, only without the overlap); with 'zero',
 * N zero bytes instead (cp.async's source size 0: nothing is read). */
template <int N>
__device__ __forceinline__ void conv2d_copy_async(unsigned dst, const void *src, bool zero)
{
#if __CUDA_ARCH__ >= 800
    if (zero)  /* two forms, so that no register holds the sizes */
        asm volatile("cp.async.ca.shared.global [%0], [%1], %2, 0;\n" ::"r"(dst), "l"(src), "n"(N)
                     : "memory");
    else
        asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(dst), "l"(src), "n"(N)
                     : "memory");
#else
    if (zero) {
        for (int i = 0; i < N; i += 4)
            asm volatile("st.shared.u32 [%0], %1;" ::"r"(dst + i), "r"(0u) : "memory");
    } else if constexpr (N == 16) {
        const uint4 v = __ldg(reinterpret_cast<const uint4 *>(src));
        asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(dst), "r"(v.x), "r"(v.y),
                     "r"(v.z), "r"(v.w) : "memory");
    } else if constexpr (N == 8) {
        const uint2 v = __ldg(reinterpret_cast<const uint2 *>(src));
        asm volatile("st.shared.v2.u32 [%0], {%1, %2};" ::"r"(dst), "r"(v.x), "r"(v.y) : "memory");
    } else {
        const unsigned v = __ldg(reinterpret_cast<const unsigned *>(src));
        asm volatile("st.shared.u32 [%0], %1;" ::"r"(dst), "r"(v) : "memory");
    }
#endif
}

__device__ __forceinline__ void conv2d_copy_commit()
{
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

/* Until at most N of this thread's groups of copies are still in flight. */
template <int N>
__device__ __forceinline__ void conv2d_copy_wait()
{
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

/* The fast path's copies of one row into a slot, 'at' the thread's first
 * own byte of the row (the halo words come from L1, where the neighbouring
 * threads' own copies put them): the own bytes
 * as one 16- or 8-byte copy where Q * C allows, else as words; with
 * 'zero', zeros (a constant border's row off the image). Nothing passes
 * through registers, so the ring's depth costs none. */
template <class G>
__device__ __forceinline__ void conv2d_fetch4(const G &ring, int slot, const unsigned char *at, bool zero)
{
    using R = typename G::R;
#pragma unroll
    for (int v = 0; v < G::NV; v++)
        conv2d_copy_async<G::VB>(ring.own(slot, v), at + v * G::VB, zero);
#pragma unroll
    for (int s = 0; s < G::NH; s++) {
        conv2d_copy_async<G::HB>(ring.halo(slot, s), at - G::HB * (G::NH - s), zero);
        conv2d_copy_async<G::HB>(ring.halo(slot, G::NH + s), at + 4 * R::OWN + G::HB * s, zero);
    }
}

/* A shared vector of N bytes into the words o[0 .. N / 4 - 1]. */
template <int N>
__device__ __forceinline__ void conv2d_lds_words(unsigned *o, unsigned at)
{
    if constexpr (N == 16)
        asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                     : "=r"(o[0]), "=r"(o[1]), "=r"(o[2]), "=r"(o[3]) : "r"(at) : "memory");
    else if constexpr (N == 8)
        asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];" : "=r"(o[0]), "=r"(o[1]) : "r"(at) : "memory");
    else
        asm volatile("ld.shared.u32 %0, [%1];" : "=r"(o[0]) : "r"(at) : "memory");
}

/* A slot's words back into registers, in row order: halo, own, halo
 * (the padding words, the first PADW of the left halo's vectors and the
 * last PADW of the right's, dropped). */
template <class G>
__device__ __forceinline__ void conv2d_read4(const G &ring, int slot, unsigned (&w)[G::R::NWD])
{
    using R = typename G::R;
    constexpr int HW = G::HB / 4;  /* words of a halo vector */
#pragma unroll
    for (int s = 0; s < G::NH; s++) {
        unsigned v[2][HW];
        conv2d_lds_words<G::HB>(v[0], ring.halo(slot, s));
        conv2d_lds_words<G::HB>(v[1], ring.halo(slot, G::NH + s));
#pragma unroll
        for (int i = 0; i < HW; i++) {
            const int left = s * HW + i - G::PADW, right = s * HW + i;  /* halo words */
            if (left >= 0)
                w[left] = v[0][i];
            if (right < R::SW)
                w[R::SW + R::OWN + right] = v[1][i];
        }
    }
#pragma unroll
    for (int v = 0; v < G::NV; v++)
        conv2d_lds_words<G::VB>(&w[R::SW + v * G::VB / 4], ring.own(slot, v));
}

/* The Q + M - 1 pixels x - M/2 .. x + Q - 1 + M/2 of input row ym (mapped
 * through the border already; -1 is the constant border's zero row), CF
 * channels each, as floats: from the fetched words (byte positions known at
 * compile time) or, off the fast path, pixel by pixel through the border. */
template <int C, int CF, int Q, int M>
__device__ __forceinline__ void conv2d_pixels4(const fast_header &h, int ym, int x, bool fast,
                                               const unsigned (&w)[row4<C, Q, M>::NWD],
                                               float (&px)[Q + M - 1][CF])
{
    using R = row4<C, Q, M>;
    constexpr int N = Q + M - 1;
    if (ym < 0) {
#pragma unroll
        for (int i = 0; i < N; i++)
#pragma unroll
            for (int c = 0; c < CF; c++)
                px[i][c] = 0.0f;
    } else if (fast) {
#pragma unroll
        for (int i = 0; i < N; i++)
#pragma unroll
            for (int c = 0; c < CF; c++) {
                const int b = 4 * R::SW - R::RAD * C + i * C + c;  /* byte of w */
                px[i][c] = conv2d_byte(w[b / 4], b % 4);
            }
    } else {
        const unsigned char *row = h.src + (size_t)ym * h.width * C;
#pragma unroll
        for (int i = 0; i < N; i++) {
            const int xi = gf_border_index(x - R::RAD + i, h.width, (gf_border)h.border);
#pragma unroll
            for (int c = 0; c < CF; c++)
                px[i][c] = xi < 0 ? 0.0f : (float)row[(size_t)xi * C + c];
        }
    }
}

/* ---- version 4, integer weights: DP4A ---------------------------------------
 * Masks whose weights are integers of -128..127 (every built-in one) on gray
 * and RGBA images take this path: the sums are exact integers either way, so
 * the bytes are version 1's, and one DP4A multiplies four pixel bytes by
 * four weights and adds them, with no conversion of the bytes to float. A
 * row's bytes are regrouped once per channel into "windows": window (q, k)
 * holds bytes 4k .. 4k + 3 of output q's M input pixels, weights past M are
 * 0. Gray windows are the fetched words realigned with PRMT; RGBA pixels
 * are transposed into one word per channel first (8 PRMT per 4 pixels). */
template <int M> struct dp4 {
    static constexpr int WW = (M + 3) / 4;  /* words per window */
};

/* DP of the separable integer path: masks that factor as an integer column
 * times a row of -128..127 (5x5 to 9x9), sums below 2^22.
 * Each input row gets the row pass once per output column (WW DP4A per
 * channel), and the column pass is one FFMA per mask row: for 7x7, 2 DP4A
 * + 8 float instructions per pixel and channel instead of 28 DP2A. The
 * parameters are the row's WW packed words, then the M column weights as
 * floats. */
constexpr int kSeparable4 = CONV2D_SEPARABLE_INTEGER;
/* Two kinds of column of that path whose column pass needs no multiply
 * (kernels of their own, one scaling mode each): binomial columns C(M-1, i)
 * (gaussian5, gaussian7), whose column pass is M - 1 FADD, a cascade of
 * M - 1 two-tap sums s_k(r) = s_{k-1}(r) + s_{k-1}(r - 1) (the filter
 * (1 + z)^(M-1)), with s_0 the row pass; and columns of ones (box5, box7,
 * box9), a running sum of the last M row passes, 2 FADD. Every partial sum
 * is an exact integer below 2^22, as the full one is, so the bytes are the
 * same as M FFMA's. conv2d_direct_integer() reports both as
 * CONV2D_SEPARABLE_INTEGER. */
constexpr int kBinomial4 = CONV2D_SEPARABLE_INTEGER + 1, kBox4 = CONV2D_SEPARABLE_INTEGER + 2;
__host__ __device__ constexpr bool conv2d_separable4(int dp)
{
    return dp >= kSeparable4 && dp <= kBox4;
}
static_assert(CONV2D_DP4A == 1 && CONV2D_DP2A == 2, "the DP template argument");

/* acc + the dot product of four unsigned pixel bytes and four signed weights */
__device__ __forceinline__ int conv2d_dp4a(unsigned pixels, unsigned weights, int acc)
{
    int d;
    asm("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(pixels), "r"(weights), "r"(acc));
    return d;
}

/* acc + the dot product of two signed 16-bit weights and pixel bytes 0, 1
 * (HI false) or 2, 3 (HI true) */
template <bool HI>
__device__ __forceinline__ int conv2d_dp2a(unsigned weights, unsigned pixels, int acc)
{
    int d;
    if (HI)
        asm("dp2a.hi.s32.u32 %0, %1, %2, %3;" : "=r"(d) : "r"(weights), "r"(pixels), "r"(acc));
    else
        asm("dp2a.lo.s32.u32 %0, %1, %2, %3;" : "=r"(d) : "r"(weights), "r"(pixels), "r"(acc));
    return d;
}

/* Bytes o .. o + 3 of a byte stream held in words (o known at compile
 * time); bytes past the last word are 0. */
template <int NS>
__device__ __forceinline__ unsigned conv2d_window(const unsigned (&s)[NS], int o)
{
    const int i = o / 4, sh = o % 4;
    const unsigned lo = i < NS ? s[i] : 0u, hi = i + 1 < NS ? s[i + 1] : 0u;
    return sh == 0 ? lo : __byte_perm(lo, hi, 0x3210u + 0x1111u * (unsigned)sh);
}

/* Off the fast path: the row's words gathered pixel by pixel through the
 * border (row -1, the constant border's, is all zeros). */
template <int C, int Q, int M>
__device__ __forceinline__ void conv2d_gather4(const fast_header &h, int ym, int x,
                                               unsigned (&w)[row4<C, Q, M>::NWD])
{
    using R = row4<C, Q, M>;
#pragma unroll
    for (int k = 0; k < R::NWD; k++)
        w[k] = 0u;
    if (ym < 0)
        return;
    const unsigned char *row = h.src + (size_t)ym * h.width * C;
#pragma unroll
    for (int i = 0; i < Q + M - 1; i++) {
        const int xi = gf_border_index(x - R::RAD + i, h.width, (gf_border)h.border);
#pragma unroll
        for (int c = 0; c < C; c++) {
            const int b = 4 * R::SW - R::RAD * C + i * C + c;  /* byte of w */
            const unsigned v = xi < 0 ? 0u : row[(size_t)xi * C + c];
            w[b / 4] |= v << (8 * (b % 4));
        }
    }
}

/* The running sums' rows off the fast path: input row ym[0] and the row
 * leaving the sums, ym[1], RGBA. The columns are mapped first and every
 * load (a pixel's word) is issued before the first is used, so that both
 * rows cost one memory latency: the columns at the image's edges take this
 * path for every row, and conv2d_gather4 waits for its loads one at a time
 * (the border's branches between them): two rows of it took 0.37 ms on a
 * 16x8192 image, as long as the whole of 8192x8192. With a source that is
 * not 4-byte aligned, the rows one after the other, by conv2d_gather4. */
template <int Q, int M>
__device__ __forceinline__ void conv2d_gather_pair4(const fast_header &h, const int (&ym)[2], int x,
                                                    unsigned (&in)[Q + M - 1], unsigned (&out)[Q + M - 1])
{
    constexpr int N = Q + M - 1, RAD = M / 2;  /* word j: pixel x - RAD + j */
    if (!h.flat) {
        conv2d_gather4<4, Q, M>(h, ym[0], x, in);
        conv2d_gather4<4, Q, M>(h, ym[1], x, out);
        return;
    }
    int xi[N];
#pragma unroll
    for (int j = 0; j < N; j++)
        xi[j] = gf_border_index(x - RAD + j, h.width, (gf_border)h.border);
    const unsigned *row0 = reinterpret_cast<const unsigned *>(h.src) + (size_t)max(ym[0], 0) * h.width;
    const unsigned *row1 = reinterpret_cast<const unsigned *>(h.src) + (size_t)max(ym[1], 0) * h.width;
#pragma unroll
    for (int j = 0; j < N; j++) {
        in[j] = __ldg(row0 + max(xi[j], 0));
        out[j] = __ldg(row1 + max(xi[j], 0));
    }
#pragma unroll
    for (int j = 0; j < N; j++) {  /* the constant border's zeros */
        in[j] = ym[0] < 0 || xi[j] < 0 ? 0u : in[j];
        out[j] = ym[1] < 0 || xi[j] < 0 ? 0u : out[j];
    }
}

/* The windows of one input row: win[c][q][k] for the CF channels and Q
 * outputs of the thread (gray: C = 1; RGBA: C = 4, where SW = RAD, so word
 * j is pixel x - RAD + j). */
template <int C, int CF, int Q, int M>
__device__ __forceinline__ void conv2d_windows4(const unsigned (&w)[row4<C, Q, M>::NWD],
                                                unsigned (&win)[CF][Q][dp4<M>::WW])
{
    using R = row4<C, Q, M>;
    constexpr int WW = dp4<M>::WW;
    static_assert(C == 1 || C == 4, "gray or RGBA");
    if constexpr (C == 1) {
#pragma unroll
        for (int q = 0; q < Q; q++)
#pragma unroll
            for (int k = 0; k < WW; k++)
                win[0][q][k] = conv2d_window(w, 4 * R::SW - R::RAD + q + 4 * k);
    } else {
        constexpr int NG = (R::NWD + 3) / 4;
        unsigned plane[CF][NG];
#pragma unroll
        for (int g = 0; g < NG; g++) {
            auto px = [&](int j) { return 4 * g + j < R::NWD ? w[4 * g + j] : 0u; };
            const unsigned t0 = __byte_perm(px(0), px(1), 0x5140u),  /* a0 b0 a1 b1 */
                t1 = __byte_perm(px(2), px(3), 0x5140u),             /* c0 d0 c1 d1 */
                t2 = __byte_perm(px(0), px(1), 0x7362u),             /* a2 b2 a3 b3 */
                t3 = __byte_perm(px(2), px(3), 0x7362u);             /* c2 d2 c3 d3 */
            plane[0][g] = __byte_perm(t0, t1, 0x5410u);
            plane[1][g] = __byte_perm(t0, t1, 0x7632u);
            plane[2][g] = __byte_perm(t2, t3, 0x5410u);
            if constexpr (CF == 4)
                plane[CF - 1][g] = __byte_perm(t2, t3, 0x7632u);
        }
#pragma unroll
        for (int c = 0; c < CF; c++)
#pragma unroll
            for (int q = 0; q < Q; q++)
#pragma unroll
                for (int k = 0; k < WW; k++)
                    win[c][q][k] = conv2d_window(plane[c], q + 4 * k);
    }
}

/* ---- version 4, 3x3 gradient pairs in 16-bit lanes --------------------------
 * The Sobel, Prewitt and Scharr pairs on RGBA. Their x gradient is a column
 * u = (p, w, p) times the row (-1, 0, 1), their y gradient the transpose,
 * so both come from two row passes of each input row, d = right - left and
 * s = p (left + right) + w centre, and two column passes, gx = p (d(r - 2)
 * + d(r)) + w d(r - 1) and gy = s(r) - s(r - 2). Those are small integers
 * (|g| <= 16 x 255), so two channels share each 32-bit instruction: a
 * pixel word splits into R, B and G, A in 16-bit lanes (a LOP3 and a
 * PRMT), and biases (256 a lane on d, (2p + w) 256 on the gradients) keep
 * every lane inside 0..65535, so no lane borrows from or carries into the
 * next and the lanes are the exact gradients plus their bias. The DP4A
 * pair spends 6 DP4A a channel and input row, after regrouping the bytes
 * by channel; this spends ~6 integer instructions per two channels. Each
 * gradient reaches a float with a PRMT (2^23 + the lane) and one exact
 * FADD or FFMA, then version 1's finishing: the same bytes.
 *
 * kGradient4 + i is the kind kGradients4[i]. With 'integer_sqrt' the
 * kernel takes matrices of scale 1 only, whose sum of squares n is an
 * integer: sqrt(n) lies at least 0.25 / (2 x 255.5) ~ 4.9e-4 from any
 * half-integer below 255.5 (n - (k + 1/2)^2 is at least 1/4 away from 0),
 * far beyond sqrt.approx's error there (a few ulp of 255, 1.5e-5 each), so
 * MUFU.SQRT alone rounds to the same byte as sqrt.rn (3 instructions
 * instead of 8; test_cuda_direct_gradient_lanes runs every pair of
 * gradients of 0..255). Scharr's scale (4) makes ties possible (n / 16 =
 * 6.25: 2.5), so its kernel keeps conv2d_magnitude. */
struct conv2d_gradient_kind {
    int p, w;           /* the column u = (p, w, p) */
    bool integer_sqrt;  /* scale 1 only: MUFU.SQRT */
};
constexpr conv2d_gradient_kind kGradients4[] = {{1, 2, true},     /* Sobel */
                                                {1, 1, true},     /* Prewitt */
                                                {3, 10, false}};  /* Scharr */
constexpr int kGradient4 = kBox4 + 1, kGradientKinds4 = 3;
__host__ __device__ constexpr bool conv2d_gradient4(int dp)
{
    return dp >= kGradient4 && dp < kGradient4 + kGradientKinds4;
}

/* Lane pair l of an RGBA word: R, B (l = 0) or G, A (l = 1), each byte in a
 * 16-bit lane (a LOP3 or a PRMT: (word >> 8) & 0x00FF00FF). */
__device__ __forceinline__ unsigned conv2d_lane_pair(unsigned word, int l)
{
    return l ? __byte_perm(word, 0u, 0x4341u) : word & 0x00FF00FFu;
}

/* Channel c's lane of a pixel's two lane pairs (lane c / 2 of pair c % 2)
 * as the float 2^23 + the lane: one PRMT. */
__device__ __forceinline__ float conv2d_lane_float(const unsigned (&pairs)[2], int c)
{
    return __uint_as_float(__byte_perm(pairs[c % 2], 0x4B000000u, c / 2 ? 0x7432u : 0x7410u));
}

/* A thread's row passes of the last two input rows, per output and lane
 * pair (0: R, B; 1: G, A): d and s of rows r - 1 and r - 2. */
template <int Q> struct conv2d_lanes4 {
    unsigned d1[Q][2], d2[Q][2], s1[Q][2], s2[Q][2];
    unsigned own[Q];  /* row r - 1's words of the thread's own pixels (its alpha) */
};

/* Input row r (the RGBA words of pixels x - 1 .. x + Q) into the lanes:
 * gx and gy of output row r - 1, each lane its gradient + kBias. */
template <int G, int Q>
__device__ __forceinline__ void conv2d_gradient_row4(const unsigned (&px)[Q + 2], conv2d_lanes4<Q> &st,
                                                     unsigned (&gx)[Q][2], unsigned (&gy)[Q][2])
{
    constexpr unsigned P = kGradients4[G].p, W = kGradients4[G].w, kLane = 0x00010001u;
    constexpr unsigned kBias = (2 * P + W) * 256u * kLane;
    unsigned lane[Q + 2][2];
#pragma unroll
    for (int j = 0; j < Q + 2; j++)
#pragma unroll
        for (int l = 0; l < 2; l++)
            lane[j][l] = conv2d_lane_pair(px[j], l);
#pragma unroll
    for (int q = 0; q < Q; q++)
#pragma unroll
        for (int l = 0; l < 2; l++) {
            const unsigned a = lane[q][l], b = lane[q + 1][l], c = lane[q + 2][l];
            const unsigned d = c - a + 256u * kLane, s = P * (a + c) + W * b;
            gx[q][l] = P * (d + st.d2[q][l]) + W * st.d1[q][l];
            gy[q][l] = s - st.s2[q][l] + kBias;
            st.d2[q][l] = st.d1[q][l];
            st.d1[q][l] = d;
            st.s2[q][l] = st.s1[q][l];
            st.s1[q][l] = s;
        }
}

/* The thread's Q outputs of a row from its gradients' lanes, as
 * conv2d_value returns them: the magnitude of (gx / scale0, gy / scale1)
 * per channel. Channel c is lane c / 2 of pair c % 2. */
template <int CF, int Q, int G>
__device__ __forceinline__ void conv2d_gradient_finish4(const unsigned (&gx)[Q][2], const unsigned (&gy)[Q][2],
                                                        const float (&mul)[2], float (&fv)[Q][CF])
{
    constexpr float kBase = kMagic + (float)((2 * kGradients4[G].p + kGradients4[G].w) * 256);
#pragma unroll
    for (int q = 0; q < Q; q++)
#pragma unroll
        for (int c = 0; c < CF; c++) {
            const float lx = conv2d_lane_float(gx[q], c), ly = conv2d_lane_float(gy[q], c);
            float rx, ry;  /* the responses, exact: (lane - kBase) times a power of two */
            if constexpr (kGradients4[G].integer_sqrt) {
                rx = __fadd_rn(lx, -kBase);
                ry = __fadd_rn(ly, -kBase);
            } else {
                rx = __fmaf_rn(lx, mul[0], -kBase * mul[0]);
                ry = __fmaf_rn(ly, mul[1], -kBase * mul[1]);
            }
            const float v = __fmaf_rn(ry, ry, __fmul_rn(rx, rx));  /* conv2d_value's order */
            fv[q][c] = kGradients4[G].integer_sqrt
                           ? __fadd_rn(conv2d_mufu_sqrt<false>(fminf(v, 65025.0f)), kMagic)
                           : conv2d_magnitude(v);
        }
}

/* ---- version 4, box masks as running sums on RGBA ---------------------------
 * Masks of ones over an odd integer, 5x5 to 31x31 (box5, box9, box15, box31).
 * Output row j's column sums are row j - 1's plus the row pass of the input
 * row that enters the window minus that of the one that leaves it, M rows
 * up: the leaving row is fetched again (from L1 or L2: the thread fetched
 * it M steps before) into a second set of slots of the ring, so no delay
 * line of M row passes is kept (kBox4 keeps one in registers, one RGBA
 * pixel a thread: 36 registers and 32 moves a step for 9x9). Each row pass
 * is a running sum along the row too (two instructions an output after the
 * first), so the work per pixel hardly grows with M. The words split into
 * 16-bit lanes (R, B and G, A, as kGradient4's) and every sum runs on both
 * lanes of a word at once: the column sums stay below M^2 x 255 < 2^16
 * (M <= 15), so whatever borrows pass between the lanes along the way
 * (differences are negative), the final lanes are the exact sums (addition
 * mod 2^32 is exact, and each lane's result is in 0..65535). From 17x17 on
 * the column sums pass 16 bits (31 x 31 x 255 < 2^18), and only the row
 * passes stay in lanes (M x 255 < 2^16): each change of a column sum, the
 * difference of two row passes, splits into its two signed lanes (exact:
 * each lies within +-M x 255), added to one 32-bit sum per channel. Exact
 * integer sums, then MODE_DIV_ODD's FFMA: kBox4's bytes. */
constexpr int kRunning4 = kGradient4 + kGradientKinds4;

/* The slots of a kernel's ring: kSlots4 for the rows ahead, and as many
 * again for the rows leaving the running sums. */
__host__ __device__ constexpr int conv2d_ring_slots4(int M, int DP)
{
    return (DP == kRunning4 ? 2 : 1) * conv2d_slots4(M);
}

/* The bytes of each copy of the halo: 4 (words, each kernel but the
 * running sums'), else the narrowest of 4, 8 and 16 that takes the fewest
 * copies, the halo padded to whole copies (ring4's PADW): 7x7 and 11x11 to
 * 15x15 take one or two 16-byte copies a side instead of 3 to 7 words or
 * three 8-byte copies, 5x5 one 8-byte copy. The time grew with the copies:
 * box9 (one a side) 0.267 ms, box13 (three) 0.370, box11 (five) 0.409 on
 * the H100. */
__host__ __device__ constexpr int conv2d_halo_bytes4(int C, int Q, int M, int DP)
{
    const int sw = 4 * conv2d_halo4_words(C, M);
    int best = 4;
    for (int b = 8; b <= 16 && DP == kRunning4 && Q * C % b == 0; b *= 2)
        if ((sw + b - 1) / b < (sw + best - 1) / best)
            best = b;
    return best;
}

/* The shared bytes of one slot of a thread's ring: its own bytes and both
 * halos, padded to whole copies. */
__host__ __device__ constexpr int conv2d_slot_bytes4(int C, int Q, int M, int DP)
{
    const int hb = conv2d_halo_bytes4(C, Q, M, DP);
    return Q * C + 2 * ((4 * conv2d_halo4_words(C, M) + hb - 1) / hb) * hb;
}

/* The column sums of a thread's Q outputs: lane pairs (R, B) and (G, A)
 * up to 15x15; past it (WIDE) one sum per channel, R, G, B, A, kept as the
 * bits of the float 2^23 + the sum (0 <= sum < 2^23). */
template <int Q, int M> struct conv2d_running4 {
    static constexpr bool WIDE = M > 15;
    unsigned col[Q][WIDE ? 4 : 2];
    __device__ static conv2d_running4 start()
    {
        conv2d_running4 st;
#pragma unroll
        for (int q = 0; q < Q; q++)
#pragma unroll
            for (int c = 0; c < (WIDE ? 4 : 2); c++)
                st.col[q][c] = WIDE ? 0x4B000000u : 0u;
        return st;
    }
};

/* The column sums of output row r - (M - 1) from those of the row before:
 * + the row pass of input row r ('in', the words of pixels x - M / 2 ..
 * x + Q - 1 + M / 2) - that of input row r - M ('out'). */
template <int Q, int M>
__device__ __forceinline__ void conv2d_running_row4(const unsigned (&in)[Q + M - 1],
                                                    const unsigned (&out)[Q + M - 1],
                                                    conv2d_running4<Q, M> &st)
{
    constexpr int N = Q + M - 1;
#pragma unroll
    for (int l = 0; l < 2; l++) {
        unsigned a[N], b[N];
#pragma unroll
        for (int j = 0; j < N; j++) {
            a[j] = conv2d_lane_pair(in[j], l);
            b[j] = conv2d_lane_pair(out[j], l);
        }
        unsigned sa = 0, sb = 0;  /* the row passes of output q, lanes of pair l */
#pragma unroll
        for (int j = 0; j < M; j++) {
            sa += a[j];
            sb += b[j];
        }
#pragma unroll
        for (int q = 0; q < Q; q++) {
            if (q > 0) {
                sa += a[q + M - 1] - a[q - 1];
                sb += b[q + M - 1] - b[q - 1];
            }
            const unsigned d = sa - sb;
            if constexpr (conv2d_running4<Q, M>::WIDE) {
                /* its lanes, signed: channels l and l + 2 */
                const int lo = (short)(d & 0xFFFFu), hi = ((int)d - lo) >> 16;
                st.col[q][l] += lo;
                st.col[q][l + 2] += hi;
            } else {
                st.col[q][l] += d;
            }
        }
    }
}

/* Output row r - (M - 1) from the column sums, as conv2d_value returns it:
 * rint(sum / d) by MODE_DIV_ODD's FFMA (no clamp: in range), the sum from
 * 2^23 + its lane by a FADD. */
template <int CF, int Q, int M>
__device__ __forceinline__ void conv2d_running_finish4(const conv2d_running4<Q, M> &st, float mul,
                                                       float (&fv)[Q][CF])
{
#pragma unroll
    for (int q = 0; q < Q; q++)
#pragma unroll
        for (int c = 0; c < CF; c++) {
            float v;
            if constexpr (conv2d_running4<Q, M>::WIDE)
                v = __uint_as_float(st.col[q][c]);
            else
                v = conv2d_lane_float(st.col[q], c);
            fv[q][c] = conv2d_div_odd(v, mul);
        }
}

/* MODE of conv2d_body4 that tests h.mode at each output (one loop for all) */
constexpr int kModeAny = -1;

/* a bool known at compile time, for conv2d_body4's copies of its loop */
template <bool B> struct conv2d_flag {
    __host__ __device__ constexpr operator bool() const { return B; }
};

/* conv2d_rows4 x steps output rows of Q columns per thread. Input rows
 * stream top to bottom in a loop that is not unrolled (a fully unrolled
 * strip was ~17 K instructions, and two thirds of the warps' cycles went
 * to instruction fetch). Each step copies the row kSlots4<M> - 1 ahead
 * into the thread's ring in shared memory (cp.async: no registers held
 * while in flight), waits for its own row and reads it back. The loop body
 * is written out three times so that the 3x3 accumulators rotate by
 * renaming, not by moves. acc[i] holds output row r - i, so input row r is mask row i of
 * acc[i]: every output gets its mask rows in order and, within a row, its
 * columns in order, version 1's summation order, hence version 1's bytes
 * (the DP4A path's sums are exact integers: the same bytes). After row r,
 * acc[M - 1] is complete: it is finished and stored (16-byte stores), and
 * the accumulators shift by one. MODE: how the sums are scaled (for 3x3
 * masks the kernel picks one copy of the whole loop per mode, so that no
 * output branches on it; kModeAny: h.mode, tested per output). The gray
 * 3x3 gradient pairs also keep one copy per value of 'fast'. */
template <int C, int CF, int K, int M, int Q, unsigned ZERO, int DP, int MODE, bool IN_RANGE = false>
__device__ __forceinline__ void conv2d_body4(const fast_args<K * M * M> &a, int x, int y0, int steps)
{
    using R = row4<C, Q, M>;
    const fast_header &h = a.h;
    /* input rows of the thread's strip: 'steps' tiles of conv2d_rows4 rows,
     * one ring all the way down */
    const int IN = conv2d_rows4<C, K, M>() * steps + M - 1;
    constexpr int N = Q + M - 1;
    constexpr int COMB = K == 1 ? COMB_SUM : COMB_MAG;
    const bool fast_rt = h.aligned && x * C >= 4 * R::SW && (x + Q) * C + 4 * R::SW <= h.width * C;
    const size_t row_bytes = (size_t)h.width * C;
    const bool div = MODE == MODE_DIV || (MODE == kModeAny && h.mode == MODE_DIV);
    const int rows = min(IN, h.height - y0 + M - 1);  /* input rows that feed an output */
    const bool inside = y0 >= R::RAD && y0 - R::RAD + IN <= h.height;  /* no row off the image */
    auto row_of = [&](int r) {
        return inside ? y0 - R::RAD + r : gf_border_index(y0 - R::RAD + r, h.height, (gf_border)h.border);
    };
    extern __shared__ uint4 conv2d_shared4[];
    /* the box masks' running sums: rows leaving the sums in slots S .. 2S - 1 */
    constexpr bool box_run = DP == kRunning4;
    constexpr int S = kSlots4<M>;
    using G = ring4<C, Q, M, conv2d_ring_slots4(M, DP), conv2d_halo_bytes4(C, Q, M, DP)>;
    static_assert(G::SLOT_BYTES == conv2d_slot_bytes4(C, Q, M, DP),
                  "the host sizes the ring (conv2d_make_plan) as the kernel lays it out");
    const G ring((unsigned)__cvta_generic_to_shared(conv2d_shared4),
                 threadIdx.y * blockDim.x + threadIdx.x, blockDim.x * blockDim.y);
    const unsigned char *const column = h.src + (size_t)x * C;  /* the thread's bytes of row 0 */
    /* inside: the next row to fetch, one row further at each fetch (a
     * pointer add, with the halo copies at constant offsets from it), except
     * for RGBA 3x3 with alpha copied, which spilled at its 80 registers
     * with the pointer's two */
    constexpr bool running = !(C == 4 && CF == 3 && K == 1 && M == 3 && DP != 0);
    const unsigned char *next = running && inside ? column + (size_t)(y0 - R::RAD) * row_bytes : column;
    /* the strip: 'fast' a constant where the kernel keeps two copies of
     * its loop (the gray 3x3 gradient pairs: the fast path's copy has no
     * branch around the gathers; 7% on gray sobel, where RGBA sobel lost
     * 2%, in lanes 4%, and gray box3 spilled) */
    auto strip = [&](auto fast_v) {
        const bool fast = fast_v;
        auto fetch = [&](int r) {  /* row r (each r once, in order) into its slot, as one group */
            if (running && fast && r < rows && inside) {
                conv2d_fetch4(ring, r % S, next, false);
                if constexpr (box_run)  /* row r - M, zeros before the first */
                    conv2d_fetch4(ring, S + r % S, r < M ? next : next - M * row_bytes, r < M);
            } else if (fast && r < rows) {  /* the constant border's row -1: row 0's address */
                const int ym = row_of(r);
                /* zeros for the integer paths, which read the slot as it is (the
                 * float path tests ym itself) */
                conv2d_fetch4(ring, r % S, column + (size_t)max(ym, 0) * row_bytes, DP != 0 && ym < 0);
                if constexpr (box_run) {
                    const int yo = r < M ? -1 : row_of(r - M);
                    conv2d_fetch4(ring, S + r % S, column + (size_t)max(yo, 0) * row_bytes, yo < 0);
                }
            }
            if (running && inside)
                next += row_bytes;
            conv2d_copy_commit();  /* an empty group past the last row keeps the count */
        };
        typename std::conditional<DP != 0, int, float>::type acc[M][Q][K][CF];
        /* DP: the accumulators start at 0x4B400000, the float 1.5 * 2^23, so
         * that (|sum| < 2^22) their bits are the float 1.5 * 2^23 + sum: one
         * FFMA makes the sum times 1 / scale when it is prescaled (a power of
         * two: exact), and with 2^23 added (top) also rounds it half to even,
         * like conv2d_value's FADD of 2^23 after its clamp (the clamp commutes
         * with the rounding: [0, 255] becomes [2^23, 2^23 + 255]) */
        [[maybe_unused]] constexpr int kAccStart = 0x4B400000;  /* unread on the float path */
        /* one matrix prescaled with no offset (gaussian): one FFMA and a clamp
         * per output */
        constexpr bool quick = K == 1 && (MODE == MODE_PRESCALED_NO_OFFSET || MODE == MODE_DIV_ODD);
        /* the cascades' sums are plain floats, not biased (kBinomial4, kBox4:
         * kernels of one quick mode each) */
        constexpr bool cascade = DP == kBinomial4 || DP == kBox4;
        static_assert((!cascade && !box_run && !IN_RANGE) || quick, "quick outputs only");
        static_assert(!box_run || (C == 4 && K == 1 && MODE == MODE_DIV_ODD && IN_RANGE && M <= 31 &&
                                   Q * C == 16 && R::SW == R::RAD),
                      "RGBA box masks over an odd integer, in range, 4 pixels a thread");
        [[maybe_unused]] conv2d_running4<Q, M> sums = conv2d_running4<Q, M>::start();
        /* the gradient pairs in lanes: their own row passes and outputs */
        constexpr bool gradient = conv2d_gradient4(DP);
        static_assert(!gradient || (C == 4 && K == 2 && M == 3 && MODE == MODE_PRESCALED_NO_OFFSET),
                      "RGBA 3x3 gradient pairs, prescaled without offsets");
        [[maybe_unused]] conv2d_lanes4<Q> lanes = {};
        /* those outputs' rows, when every channel is computed and the row's
         * bytes are aligned (fast: the rows' length; h.vec: both buffers):
         * one store at a running pointer, no address arithmetic or alignment
         * test per row; the same for the lanes kernels, whose copied channels
         * come from registers */
        constexpr bool kWide = ((quick && CF == C) || gradient || box_run) && (Q * C == 4 || Q * C == 8 || Q * C == 16);
        /* both unread where kWide is false (the float path, the DP4A gradient pairs) */
        [[maybe_unused]] const bool wide = kWide && fast && h.vec && h.cf == CF && x + Q <= h.width;
        [[maybe_unused]] unsigned char *out = h.dst + ((size_t)y0 * h.width + x) * C;  /* output row y0 */
        float mul[K], sub[K], top[K];
#pragma unroll
        for (int k = 0; k < K; k++) {
            mul[k] = div ? 1.0f : 1.0f / h.scale[k];
            sub[k] = -12582912.0f * mul[k];
            /* MODE_DIV_ODD: the bias is taken off first (exact), as
             * -12582912 / d would be rounded */
            top[k] = MODE == MODE_DIV_ODD || cascade ? kMagic : sub[k] + kMagic;
        }
        auto finish = [&](int y, const float (&sums)[Q][K][CF]) {
            conv2d_finish_row<C, CF, K, Q>(sums, h, y, x, [&](const float (&s)[K]) {
                if constexpr (MODE == kModeAny)
                    return div ? conv2d_value<MODE_DIV, COMB, K>(s, h)
                               : conv2d_value<MODE_PRESCALED, COMB, K>(s, h);
                else
                    return conv2d_value<MODE, COMB, K>(s, h);
            });
        };
        auto step = [&](int r) {
            fetch(r + S - 1);  /* into the slot row r - 1 left */
            unsigned mine[R::NWD];
            [[maybe_unused]] unsigned leaving[R::NWD];  /* box_run: row r - M */
            if (fast) {
                conv2d_copy_wait<S - 1>();  /* row r's group is in */
                conv2d_read4(ring, r % S, mine);
                if constexpr (box_run)
                    conv2d_read4(ring, S + r % S, leaving);
            }
            if constexpr (box_run) {
                if (!fast) {  /* both rows at one memory latency */
                    const int ym[2] = {row_of(r), r < M ? -1 : row_of(r - M)};
                    conv2d_gather_pair4<Q, M>(h, ym, x, mine, leaving);
                }
                conv2d_running_row4<Q, M>(mine, leaving, sums);
                if (r >= M - 1) {  /* output row r - (M - 1) */
                    float fv[Q][CF];
                    conv2d_running_finish4<CF, Q, M>(sums, mul[0], fv);
                    if (wide) {
                        unsigned given[Q * C / 4];  /* the copied channels' source words */
                        if constexpr (CF < C) {
                            const uint4 v = __ldg(reinterpret_cast<const uint4 *>(h.src + (out - h.dst)));
                            given[0] = v.x, given[1] = v.y, given[2] = v.z, given[3] = v.w;
                        }
                        conv2d_store_wide<C, CF, Q>(out, fv, given);
                    } else {
                        conv2d_store<C, CF, Q>(h, y0 + r - (M - 1), x, fv);
                    }
                    out += row_bytes;
                }
            } else if constexpr (gradient) {
                if (!fast)
                    conv2d_gather4<C, Q, M>(h, row_of(r), x, mine);
                unsigned gx[Q][2], gy[Q][2];
                conv2d_gradient_row4<DP - kGradient4, Q>(mine, lanes, gx, gy);
                if (r >= M - 1) {  /* output row r - 1 of the image's rows y0 - 1 .. */
                    float fv[Q][CF];
                    conv2d_gradient_finish4<CF, Q, DP - kGradient4>(gx, gy, mul, fv);
                    /* alpha from the centre row's words, still in registers */
                    if (wide)
                        conv2d_store_wide<C, CF, Q>(out, fv, lanes.own);
                    else
                        conv2d_store<C, CF, Q>(h, y0 + r - (M - 1), x, fv, lanes.own);
                    out += row_bytes;
                }
#pragma unroll
                for (int q = 0; q < Q; q++)
                    lanes.own[q] = mine[R::SW + q];
            } else if constexpr (DP) {
                if (!fast)
                    conv2d_gather4<C, Q, M>(h, row_of(r), x, mine);
                constexpr int WW = dp4<M>::WW;
                unsigned win[CF][Q][WW];
                conv2d_windows4<C, CF, Q, M>(mine, win);
                if constexpr (!cascade) {
#pragma unroll
                    for (int q = 0; q < Q; q++)  /* output row r starts */
#pragma unroll
                        for (int k = 0; k < K; k++)
#pragma unroll
                            for (int c = 0; c < CF; c++)
                                acc[0][q][k][c] = kAccStart;
                }
                /* the cascades: the sums of output row r - (M - 1), complete */
                [[maybe_unused]] float done[Q][CF];
                if constexpr (conv2d_separable4(DP)) {
                    /* the row pass: one DP4A chain per output and channel, its
                     * sum h biased like the accumulators (|h| < 2^22), then
                     * h as a float (exact) times each column weight into the M
                     * rows in progress: exact integer products and sums */
                    float hf[Q][CF];
#pragma unroll
                    for (int q = 0; q < Q; q++)
#pragma unroll
                        for (int c = 0; c < CF; c++) {
                            int s = kAccStart;
#pragma unroll
                            for (int j = 0; j < WW; j++)
                                s = conv2d_dp4a(win[c][q][j], __float_as_uint(a.w[j]), s);
                            hf[q][c] = __fadd_rn(__int_as_float(s), -12582912.0f);
                        }
#pragma unroll
                    for (int q = 0; q < Q; q++)
#pragma unroll
                        for (int c = 0; c < CF; c++) {
                            if constexpr (DP == kBinomial4) {
                                /* acc[k] holds stage k of row r - 1; stage k + 1
                                 * of row r is stage k of rows r and r - 1 */
                                float v = hf[q][c];
#pragma unroll
                                for (int k = 0; k < M - 1; k++) {
                                    const float up = __fadd_rn(v, __int_as_float(acc[k][q][0][c]));
                                    acc[k][q][0][c] = __float_as_int(v);
                                    v = up;
                                }
                                done[q][c] = v;
                            } else if constexpr (DP == kBox4) {
                                /* acc[0 .. M - 2]: the row passes of rows r - 1 ..
                                 * r - M + 1, acc[M - 1] their sum */
                                const float t = __fadd_rn(__int_as_float(acc[M - 1][q][0][c]), hf[q][c]);
                                done[q][c] = t;
                                acc[M - 1][q][0][c] =
                                    __float_as_int(__fadd_rn(t, -__int_as_float(acc[M - 2][q][0][c])));
#pragma unroll
                                for (int i = M - 2; i > 0; i--)
                                    acc[i][q][0][c] = acc[i - 1][q][0][c];
                                acc[0][q][0][c] = __float_as_int(hf[q][c]);
                            }
                        }
                    if constexpr (DP == kSeparable4) {
#pragma unroll
                        for (int i = 0; i < M; i++) {  /* input row r is mask row i of output row r - i */
                            const float cw = a.w[WW + i];
#pragma unroll
                            for (int q = 0; q < Q; q++)
#pragma unroll
                                for (int c = 0; c < CF; c++)
                                    acc[i][q][0][c] = __float_as_int(
                                        __fmaf_rn(hf[q][c], cw, __int_as_float(acc[i][q][0][c])));
                        }
                    }
                } else {
#pragma unroll
                    for (int i = 0; i < M; i++)  /* input row r is mask row i of output row r - i */
#pragma unroll
                        for (int k = 0; k < K; k++)
#pragma unroll
                            for (int j = 0; j < WW; j++) {
                                constexpr int per = DP == 2 ? 2 : 1;
                                const int at = ((k * M + i) * WW + j) * per;
                                const unsigned wp = __float_as_uint(a.w[at]);
                                const unsigned wq = __float_as_uint(a.w[at + per - 1]);
#pragma unroll
                                for (int q = 0; q < Q; q++)
#pragma unroll
                                    for (int c = 0; c < CF; c++) {
                                        int &s = acc[i][q][k][c];
                                        if constexpr (DP == 2)
                                            s = conv2d_dp2a<true>(wq, win[c][q][j],
                                                                  conv2d_dp2a<false>(wp, win[c][q][j], s));
                                        else
                                            s = conv2d_dp4a(win[c][q][j], wp, s);
                                    }
                            }
                }
                const int j = r - (M - 1);  /* acc[M - 1] is output row j, complete now */
                if (j >= 0 && quick) {
                    float fv[Q][CF];  /* the bytes, as conv2d_value returns them */
#pragma unroll
                    for (int q = 0; q < Q; q++)
#pragma unroll
                        for (int c = 0; c < CF; c++) {
                            float t;
                            if constexpr (cascade)
                                t = done[q][c];
                            else
                                t = __int_as_float(acc[M - 1][q][0][c]);
                            if constexpr (MODE == MODE_DIV_ODD && !cascade)
                                t = __fadd_rn(t, -12582912.0f);  /* the sum itself */
                            const float v = __fmaf_rn(t, mul[0], top[0]);
                            fv[q][c] = IN_RANGE ? v : fminf(fmaxf(v, kMagic), kMagic + 255.0f);
                        }
                    if constexpr (kWide) {
                        if (wide)
                            conv2d_store_wide<C, CF, Q>(out, fv);
                        else
                            conv2d_store<C, CF, Q>(h, y0 + j, x, fv);
                        out += row_bytes;
                    } else {
                        conv2d_store<C, CF, Q>(h, y0 + j, x, fv);
                    }
                } else if (j >= 0) {
                    float sums[Q][K][CF];
#pragma unroll
                    for (int q = 0; q < Q; q++)
#pragma unroll
                        for (int k = 0; k < K; k++)
#pragma unroll
                            for (int c = 0; c < CF; c++)
                                sums[q][k][c] =
                                    __fmaf_rn(__int_as_float(acc[M - 1][q][k][c]), mul[k], sub[k]);
                    finish(y0 + j, sums);
                }
            } else {
                float px[N][CF];
                conv2d_pixels4<C, CF, Q, M>(h, row_of(r), x, fast, mine, px);
                conv2d_zero(acc[0]);
#pragma unroll
                for (int i = 0; i < M; i++)  /* input row r is mask row i of output row r - i */
#pragma unroll
                    for (int mx = 0; mx < M; mx++)
#pragma unroll
                        for (int k = 0; k < K; k++) {
                            const int wi = (k * M + i) * M + mx;
                            if ((ZERO >> wi) & 1)
                                continue;  /* a weight known to be 0: acc + 0 * px is acc */
                            const float wv = a.w[wi];
#pragma unroll
                            for (int q = 0; q < Q; q++)
#pragma unroll
                                for (int c = 0; c < CF; c++)
                                    acc[i][q][k][c] = fmaf(px[q + mx][c], wv, acc[i][q][k][c]);
                        }
                const int j = r - (M - 1);  /* acc[M - 1] is output row j, complete now */
                if (j >= 0)
                    finish(y0 + j, acc[M - 1]);
            }
            if constexpr (!cascade && !gradient && !box_run) {  /* (those move their own) */
#pragma unroll
                for (int i = M - 1; i > 0; i--)  /* the rows in progress move one older */
#pragma unroll
                    for (int q = 0; q < Q; q++)
#pragma unroll
                        for (int k = 0; k < K; k++)
#pragma unroll
                            for (int c = 0; c < CF; c++)
                                acc[i][q][k][c] = acc[i - 1][q][k][c];
            }
        };
        conv2d_zero(acc);  /* rows before the first output: never stored */
#pragma unroll
        for (int r = 0; r < S - 1; r++)
            fetch(r);
#pragma unroll 1
        for (int r = 0; r < rows; r += 3) {  /* three steps: the 3x3 accumulators rotate by renaming */
            step(r);
            if (r + 1 < rows)
                step(r + 1);
            if (r + 2 < rows)
                step(r + 2);
        }
    };
    if constexpr (C == 1 && M == 3 && K == 2) {
        if (fast_rt)
            strip(conv2d_flag<true>{});
        else
            strip(conv2d_flag<false>{});
    } else {
        strip(fast_rt);
    }
}

/* Whether a variant of version 4 walks strips (conv2d_strips4): gray,
 * RGBA from 5x5 on and the RGBA gradient pairs in lanes (DP: the kernel's
 * kind), the layouts measured faster in strips on the H100 (the lanes:
 * 0.27 -> 0.244 ms, their 16 warps an SM no longer waiting at each tile's
 * first rows). Not RGBA 3x3 of one matrix: it is bound by memory rather
 * than by issue (83% of the copy rate with one tile per block, 77% in
 * strips) and, with alpha copied, needs all of its 80 registers (the strip
 * logic made it spill 52 bytes); nor the DP4A gradient pair, which gained
 * 2% in the bench and lost up to 10% in the tool's sweep at the automatic
 * tile. */
__host__ __device__ constexpr bool conv2d_strips_ok4(int C, int M, int DP)
{
    return C == 1 || (C == 4 && M >= 5) || conv2d_gradient4(DP);
}

/* Blocks of kMaxThreads per SM that version 4 asks ptxas for: 3 (at most 80
 * registers, 37.5% occupancy) for the variants that fit 80 without spilling
 * (gray and 2-channel 3x3, the RGBA gradient pair with alpha copied), 2
 * (at most 128) for the rest, which would spill (84 to 2532 bytes). */
template <int C, int CF, int K, int M, int DP>
constexpr int conv2d_min_blocks4()
{
    if (DP == kRunning4 && M > 15)
        return 1;  /* up to 255: 2 x 36 words a row; shared memory allows 1 block of 256 */
    if (DP && M == 3 && K == 1 && C == 4 && CF == 3)
        return 3;  /* fits 80 without spilling; RGBA with alpha filtered would not */
    if (conv2d_gradient4(DP))
        return 2;  /* 99-118 registers; at 80 they spilled 60-130 bytes and ran 15% slower */
    return M == 3 && ((K == 1 && C <= 2) || (K == 2 && C == 4 && CF == 3)) ? 3 : 2;
}

/* No barrier: each thread copies its inputs from global memory into its
 * own ring in shared memory (the halo columns and rows that neighbouring
 * threads also read come from L1 and L2), so no warp waits for a block's
 * staging and every warp keeps several rows of copies in flight. MODE4:
 * kModeAny (the mode read from the header), or MODE_PRESCALED_NO_OFFSET
 * for the kernels of 5x5 and 7x7 integer masks that have only that mode
 * (gaussian5, gaussian7: 11-15% faster on the H100 than the loop that
 * tests the mode per output, bench/RESULTS.md). */
template <int C, int CF, int K, int M, int Q, unsigned ZERO, int DP, int MODE4>
__global__ void __launch_bounds__(kMaxThreads, (conv2d_min_blocks4<C, CF, K, M, DP>()))
    conv2d_kernel4(const fast_args<K * M * M> a)
{
    using R = row4<C, Q, M>;
    constexpr int P = conv2d_rows4<C, K, M>();
    const fast_header &h = a.h;
    const int T = blockDim.x * blockDim.y, t = threadIdx.y * blockDim.x + threadIdx.x;
    /* an edge block's thread: one column of threads off the fast path, one
     * tile of rows (the host launches enough of them for one each) */
    int x, y0, steps = 1;
    if constexpr (!conv2d_strips_ok4(C, M, DP)) {  /* one tile per block */
        x = (blockIdx.x * blockDim.x + threadIdx.x) * Q;
        y0 = (blockIdx.y * blockDim.y + threadIdx.y) * P;
    } else if (blockIdx.y < h.edge_rows) {
        const int u = (blockIdx.y * gridDim.x + blockIdx.x) * T + t;
        if (u >= h.edge_cols * ((h.height + P - 1) / P))
            return;
        const int e = u % h.edge_cols;
        x = (e < h.edge_left ? e : h.edge_right0 + e - h.edge_left) * Q;
        y0 = u / h.edge_cols * P;
    } else {
        x = (blockIdx.x * blockDim.x + threadIdx.x) * Q;
        y0 = ((blockIdx.y - h.edge_rows) * blockDim.y + threadIdx.y) * (P * h.steps);
        steps = h.steps;
        /* a column the edge blocks take: its gathers, a memory latency a
         * row, would make its strip the kernel's longest */
        if (h.edge_rows && (x * C < 4 * R::SW || (x + Q) * C + 4 * R::SW > h.width * C))
            return;
    }
    if (x >= h.width || y0 >= h.height)
        return;
    if constexpr (MODE4 != kModeAny) {  /* a kernel of its own for one mode */
        conv2d_body4<C, CF, K, M, Q, ZERO, DP, MODE4 & ~kInRange, (MODE4 & kInRange) != 0>(a, x, y0, steps);
    } else if constexpr (M > 3) {
        /* one loop: more would spill the larger masks' registers (and a
         * second loop in the same kernel spilled 24 to 1360 bytes) */
        conv2d_body4<C, CF, K, M, Q, ZERO, DP, kModeAny>(a, x, y0, steps);
    } else {
        if constexpr (K == 1 && DP == CONV2D_DP4A) {  /* the only kernels given MODE_DIV_ODD */
            if (h.mode == MODE_DIV_ODD) {
                conv2d_body4<C, CF, K, M, Q, ZERO, DP, MODE_DIV_ODD>(a, x, y0, steps);
                return;
            }
        }
        switch (h.mode) {  /* one copy of the loop per mode: no branch per output */
        case MODE_DIV:
            conv2d_body4<C, CF, K, M, Q, ZERO, DP, MODE_DIV>(a, x, y0, steps);
            break;
        case MODE_PRESCALED:
            conv2d_body4<C, CF, K, M, Q, ZERO, DP, MODE_PRESCALED>(a, x, y0, steps);
            break;
        default:
            conv2d_body4<C, CF, K, M, Q, ZERO, DP, MODE_PRESCALED_NO_OFFSET>(a, x, y0, steps);
            break;
        }
    }
}


/* ---- version 4, box masks as prefix sums across a warp ----------------------
 * The running sums above copy each thread's halo, M - 1 pixels of every
 * input row, twice (the entering and the leaving row) and read it back:
 * ~144 B of L1/TEX a pixel at 31x31, the unit ncu found busiest (74-78%)
 * from 15x15 on. Here the sums go the other way round. Each lane of a warp
 * reads only its own 16 bytes of the entering and the leaving row (Q =
 * 16 / C pixels) and keeps their column sums, the sum of the last M rows,
 * in 16-bit lanes (at most 31 x 255). The row pass then needs no halo of
 * its own: the column sums, widened to 32 bits, become prefix sums along
 * the warp's 32 Q pixels (within the lane, then across the lanes by 5
 * shuffles a channel), and each window's sum is the prefix at its right
 * end minus the one just before its left end, two shuffles of registers
 * whose lane and slot the mask's size fixes. The work a pixel is the same
 * for every M; the warp's first HL and last HR pixels only feed the windows
 * of the OUT between them, so neighbouring warps overlap by HL + HR pixels.
 * Exact integer sums, then MODE_DIV_ODD's FFMA: kBox4's bytes. */
constexpr int kBoxScan4 = kRunning4 + 1;

/* A warp's pixels left of its outputs (a window's M / 2 and the one before
 * it) and right of them (M / 2), in whole lanes of Q = 16 / C pixels, and
 * its outputs between them. */
__host__ __device__ constexpr int conv2d_scan_left(int C, int M)
{
    return (M / 2 + 16 / C) / (16 / C) * (16 / C);
}
__host__ __device__ constexpr int conv2d_scan_right(int C, int M)
{
    return (M / 2 + 16 / C - 1) / (16 / C) * (16 / C);
}
__host__ __device__ constexpr int conv2d_scan_outputs(int C, int M)
{
    return 32 * (16 / C) - conv2d_scan_left(C, M) - conv2d_scan_right(C, M);
}

/* A lane's 16 bytes of image row y (-1: the constant border's zeros),
 * pixels xs .. xs + 16 / C - 1: one load (tier 2: 16-byte aligned), four
 * (tier 1: words), none (tier -1: a lane off the image whose column sums
 * conv2d_scan_fix takes from the lanes it mirrors), or byte by byte through
 * the border (tier 0: the edges otherwise, rows of other lengths), every
 * load issued before the first is used. */
template <int C>
__device__ __forceinline__ uint4 conv2d_scan_load(const fast_header &h, int y, int xs, int tier)
{
    if (y < 0 || tier < 0)
        return make_uint4(0u, 0u, 0u, 0u);
    const unsigned char *row = h.src + (size_t)y * h.width * C;
    if (tier == 2)
        return __ldg(reinterpret_cast<const uint4 *>(row + (size_t)xs * C));
    if (tier == 1) {
        const unsigned *at = reinterpret_cast<const unsigned *>(row + (size_t)xs * C);
        return make_uint4(__ldg(at), __ldg(at + 1), __ldg(at + 2), __ldg(at + 3));
    }
    int mx[16 / C];
    unsigned v[16], w[4] = {0u, 0u, 0u, 0u};
#pragma unroll
    for (int q = 0; q < 16 / C; q++)
        mx[q] = gf_border_index(xs + q, h.width, (gf_border)h.border);
#pragma unroll
    for (int b = 0; b < 16; b++)  /* the constant border's pixels read pixel 0, then drop it */
        v[b] = __ldg(row + (size_t)max(mx[b / C], 0) * C + b % C);
#pragma unroll
    for (int b = 0; b < 16; b++)
        w[b / 4] |= (mx[b / C] < 0 ? 0u : v[b]) << (8 * (b % 4));
    return make_uint4(w[0], w[1], w[2], w[3]);
}

/* The column sums of a lane's 16 values (value i: pixel i / C, channel
 * i % C) plus the entering row minus the leaving one, in 16-bit lanes
 * (conv2d_lane_pair): cs[2w] holds values 4w and 4w + 2, cs[2w + 1] values
 * 4w + 1 and 4w + 3. Each lane's result lies in 0..M x 255, so the 32-bit
 * sums are exact whatever borrows pass between the lanes along the way. */
__device__ __forceinline__ void conv2d_scan_columns(const uint4 &in, const uint4 &out, unsigned (&cs)[8])
{
    const unsigned i[4] = {in.x, in.y, in.z, in.w}, o[4] = {out.x, out.y, out.z, out.w};
#pragma unroll
    for (int w = 0; w < 4; w++)
#pragma unroll
        for (int l = 0; l < 2; l++)
            cs[2 * w + l] += conv2d_lane_pair(i[w], l) - conv2d_lane_pair(o[w], l);
}

/* The column sums of the lanes wholly off an aligned image, from the
 * pixels they mirror (MODE: nearest, reflect or mirror; the constant
 * border's are the zeros such a lane keeps), which lie inside the warp's
 * own columns when the image is at least 2 HL wide. The image's width and
 * the warp's first pixel 'first' are multiples of Q, so the slot a
 * lane's pixel s reads is the same in every such lane: a shuffle each,
 * from the lane that holds it (one for the left edge, one for the right). */
template <int C, int CF, int MODE>
__device__ __forceinline__ void conv2d_scan_fix(unsigned (&pv)[16], int xs, int first, int width)
{
    constexpr int Q = 16 / C;
    unsigned fixed[16];
#pragma unroll
    for (int s = 0; s < Q; s++) {
        const int p = xs + s;
        const int m = MODE == GF_BORDER_NEAREST ? (p < 0 ? 0 : width - 1)
                      : MODE == GF_BORDER_REFLECT ? (p < 0 ? -1 - p : 2 * width - 1 - p)
                                                  : (p < 0 ? -p : 2 * width - 2 - p);
        const int from = min(max((m - first) / Q, 0), 31);  /* far past the edge: unread */
        const int left = MODE == GF_BORDER_NEAREST ? 0 : MODE == GF_BORDER_REFLECT ? Q - 1 - s
                                                                                        : (Q - s) % Q;
        const int right = MODE == GF_BORDER_NEAREST ? Q - 1 : MODE == GF_BORDER_REFLECT
                                                                     ? Q - 1 - s
                                                                     : (2 * Q - 2 - s) % Q;
#pragma unroll
        for (int c = 0; c < CF; c++) {
            const unsigned l = __shfl_sync(0xFFFFFFFFu, pv[left * C + c], from);
            const unsigned r = __shfl_sync(0xFFFFFFFFu, pv[right * C + c], from);
            fixed[s * C + c] = p < 0 ? l : r;
        }
    }
    if (xs < 0 || xs >= width)
#pragma unroll
        for (int s = 0; s < Q; s++)
#pragma unroll
            for (int c = 0; c < CF; c++)
                pv[s * C + c] = fixed[s * C + c];
}

/* The windows of conv2d_scan_row where they reach past the neighbouring
 * lanes (RGBA): the prefix sums across the warp, per channel, then each window
 * the difference of two of them. */
template <int C, int CF, int M>
__device__ __forceinline__ void conv2d_scan_windows(unsigned (&pv)[16], float mul, float (&fv)[16 / C][CF])
{
    constexpr int Q = 16 / C, R = M / 2;
#pragma unroll
    for (int c = 0; c < CF; c++) {  /* across the lanes: the lanes before this one */
        const unsigned total = pv[16 - C + c];
        unsigned upto = total;
#pragma unroll
        for (int d = 1; d < 32; d *= 2)  /* upto += the value d lanes down, where there is one */
            asm("{\n\t.reg .pred p;\n\t.reg .b32 t;\n\t"
                "shfl.sync.up.b32 t|p, %0, %1, 0, 0xffffffff;\n\t"
                "@p add.u32 %0, %0, t;\n\t}"
                : "+r"(upto)
                : "r"(d));
#pragma unroll
        for (int q = 0; q < Q; q++)
            pv[q * C + c] += upto - total;
    }
#pragma unroll
    for (int q = 0; q < Q; q++)
#pragma unroll
        for (int c = 0; c < CF; c++) {
            /* the prefix at pixel q + R (lane + ao, slot as) minus the one at
             * q - R - 1 (lane + bo, bo <= 0, slot bs) */
            const int a = q + R, ao = a / Q, as = a % Q * C + c;
            const int b = q - R - 1, bo = b >= 0 ? 0 : -((Q - 1 - b) / Q), bs = (b - bo * Q) * C + c;
            const unsigned hi = ao ? __shfl_down_sync(0xFFFFFFFFu, pv[as], ao) : pv[as];
            const unsigned lo = bo ? __shfl_up_sync(0xFFFFFFFFu, pv[bs], -bo) : pv[bs];
            fv[q][c] = conv2d_div_odd(__uint_as_float(hi - lo + 0x4B000000u), mul);
        }
}

/* One output row from the column sums: each window's sum the difference
 * of two prefix sums (exact: below 2^23, as the bits of the float 2^23 +
 * sum), rint(sum / d) by MODE_DIV_ODD's FFMA (no clamp: in range). Gray
 * windows reach no further than the neighbouring lanes, and take the
 * lanes' own prefixes: the scan across the warp and its offsets (32
 * instructions a row) traded for a subtraction for each window begun in
 * the previous lane. The others take conv2d_scan_windows. Every lane of the
 * warp takes part (the shuffles); only the output lanes' values are meant. */
template <int C, int CF, int M>
__device__ __forceinline__ void conv2d_scan_row(const unsigned (&cs)[8], float mul,
                                                float (&fv)[16 / C][CF], bool fix, int xs,
                                                int first, const fast_header &h)
{
    constexpr int Q = 16 / C, R = M / 2;
    unsigned pv[16];
#pragma unroll
    for (int w = 0; w < 4; w++) {
        pv[4 * w] = cs[2 * w] & 0xFFFFu;
        pv[4 * w + 1] = cs[2 * w + 1] & 0xFFFFu;
        pv[4 * w + 2] = cs[2 * w] >> 16;
        pv[4 * w + 3] = cs[2 * w + 1] >> 16;
    }
    if (fix) {  /* the whole warp: an edge warp of an aligned image */
        if (h.border == GF_BORDER_NEAREST)
            conv2d_scan_fix<C, CF, GF_BORDER_NEAREST>(pv, xs, first, h.width);
        else if (h.border == GF_BORDER_REFLECT)
            conv2d_scan_fix<C, CF, GF_BORDER_REFLECT>(pv, xs, first, h.width);
        else if (h.border == GF_BORDER_MIRROR)
            conv2d_scan_fix<C, CF, GF_BORDER_MIRROR>(pv, xs, first, h.width);
    }
#pragma unroll
    for (int i = C; i < 16; i++)  /* within the lane, per channel */
        pv[i] += pv[i - C];
    if constexpr (R < Q) {
        /* every window within this lane and its two neighbours: no prefix
         * across the warp. With the lane's in-lane prefixes P and total T,
         * a window ending in the next lane adds T to that lane's P, and
         * one starting in the previous lane takes off that lane's P - T
         * (the output lanes are never the warp's first or last) */
        const unsigned total = pv[16 - C], magic_total = total + 0x4B000000u;
#pragma unroll
        for (int q = 0; q < Q; q++) {
            const int a = q + R, b = q - R - 1, as = a >= Q ? a - Q : a, bs = b < 0 ? b + Q : b;
            const unsigned hi = a >= Q ? __shfl_down_sync(0xFFFFFFFFu, pv[as], 1) : pv[as];
            const unsigned lo = b < -1 ? __shfl_up_sync(0xFFFFFFFFu, pv[bs] - total, 1)
                                       : b == -1 ? 0u : pv[bs];
            const unsigned biased = hi - lo + (a >= Q ? magic_total : 0x4B000000u);
            fv[q][0] = conv2d_div_odd(__uint_as_float(biased), mul);
        }
    } else {
        conv2d_scan_windows<C, CF, M>(pv, mul, fv);
    }
}

/* The prefix sums' walk along a strip whose rows, entering and leaving, all
 * lie inside the image, by a warp whose lanes all load their 16 aligned
 * bytes and store them whole where they write (conv2d_scan_kernel4 says
 * which): the rows' addresses without the border and the load tiers, the
 * first M - 1 rows summed four loads at a time, then each step's rows
 * fetched a step ahead into two sets of registers taken in turn. A loop
 * that copied the next step's registers into the current ones at its end
 * waited there for the loads it had just issued (a quarter of the kernel's
 * stall samples at gray 9x9 and RGBA 31x31), with one row in flight a
 * warp; here the next row's loads are issued before that wait. The rows
 * stay in registers: through a ring in shared memory, several steps
 * ahead, the walk ran 5-35% slower (bench/RESULTS.md).
 * 'up': the walk goes from the strip's last row to its first, so that a
 * strip walking down and its neighbour walking up read the M - 1 rows
 * they share near the same time, the second read an L2 hit more often.
 * The leaving rows and the outputs are not read again: loaded and stored
 * evict-first, so that L2 keeps the rows still to leave (at 31x31 all
 * the warps' windows fill the H100's 50 MB). */
template <int C, int CF, int M>
__device__ __forceinline__ void conv2d_scan_walk(const fast_header &h, float mul, int xs, int y0,
                                                 int rows, bool writes, bool up)
{
    constexpr int Q = 16 / C, R = M / 2;
    const size_t rb = (size_t)h.width * C;
    const ptrdiff_t stride = up ? -(ptrdiff_t)rb : (ptrdiff_t)rb;
    const int yt = up ? y0 + rows - 1 + R : y0 - R, yo = up ? y0 + rows - 1 : y0;
    const unsigned char *const top = h.src + (size_t)yt * rb + (size_t)xs * C;
    unsigned char *const o = h.dst + (size_t)yo * rb + (size_t)xs * C;
    const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
    auto row = [&](int k) {  /* input row k of the walk: image row yt + k, or yt - k up */
        return __ldg(reinterpret_cast<const uint4 *>(top + (ptrdiff_t)k * stride));
    };
    auto gone = [&](int k) {  /* a row leaving the sums, read for the last time */
        return __ldcs(reinterpret_cast<const uint4 *>(top + (ptrdiff_t)k * stride));
    };
    unsigned cs[8] = {0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u};
#pragma unroll 4
    for (int k = 0; k < M - 1; k++)
        conv2d_scan_columns(row(k), zero, cs);
    /* input row k enters, row k - M leaves, output row k - (M - 1) is
     * stored (its centre row k - R given where alpha is copied) */
    auto step = [&](int k, const uint4 &in, const uint4 &out, [[maybe_unused]] const uint4 &given) {
        conv2d_scan_columns(in, out, cs);
        float fv[Q][CF];
        conv2d_scan_row<C, CF, M>(cs, mul, fv, false, xs, 0, h);
        if (writes) {
            const unsigned words[4] = {given.x, given.y, given.z, given.w};
            conv2d_store_wide<C, CF, Q, true>(o + (ptrdiff_t)(k - (M - 1)) * stride, fv, words);
        }
    };
    const int last = rows + M - 2;  /* the strip's last input row */
    uint4 in_a = row(M - 1), out_a = zero, given_a = zero, in_b = zero, out_b = zero, given_b = zero;
    if constexpr (CF < C)
        given_a = row(R);
    for (int k = M - 1; k <= last; k += 2) {
        if (k + 1 <= last) {
            in_b = row(k + 1);
            out_b = gone(k + 1 - M);
            if constexpr (CF < C)
                given_b = row(k + 1 - R);
        }
        step(k, in_a, out_a, given_a);
        if (k + 1 > last)
            break;
        if (k + 2 <= last) {
            in_a = row(k + 2);
            out_a = gone(k + 2 - M);
            if constexpr (CF < C)
                given_a = row(k + 2 - R);
        }
        step(k + 1, in_b, out_b, given_b);
    }
}

/* Each warp takes conv2d_scan_outputs(C, M) columns of output pixels and a
 * strip of h.steps rows, walking down (inside the image, the odd strips
 * walk up: conv2d_scan_walk): input row k of the strip enters the
 * column sums, row k - M leaves them, each fetched one step ahead into
 * registers (the centre row too, where alpha is copied). The warps of the
 * grid take the columns of the first strip, then of the next, and so on,
 * whatever the block's size, so that no warp of a block is left without
 * columns (8 warps a block and 18 columns of warps, gray 8192 wide: 6 idle
 * warps in every third block, and 9% slower than blocks of 2). No shared
 * memory and no barrier; the shuffles need whole warps (the host gives
 * blocks of 32 to 256 threads, a multiple of 32). */
template <int C, int CF, int M>
__global__ void __launch_bounds__(kMaxThreads, 3) conv2d_scan_kernel4(const fast_args<1> a)
{
    constexpr int Q = 16 / C, R = M / 2, HL = conv2d_scan_left(C, M), HR = conv2d_scan_right(C, M);
    constexpr int OUT = conv2d_scan_outputs(C, M);
    const fast_header &h = a.h;
    const unsigned t = threadIdx.y * blockDim.x + threadIdx.x;
    const int lane = (int)(t & 31u);
    const long long warp = (long long)blockIdx.x * ((blockDim.x * blockDim.y) >> 5) + (t >> 5);
    const int columns = (h.width + OUT - 1) / OUT;  /* of warps */
    const long long x0 = warp % columns * OUT;  /* the warp's first output pixel */
    const long long strip = warp / columns;
    if (strip >= (h.height + h.steps - 1) / h.steps)
        return;  /* the whole warp */
    const int y0 = (int)strip * h.steps;
    const int rows = min(h.steps, h.height - y0);
    const int xs = (int)x0 - HL + lane * Q;  /* the lane's first pixel */
    const bool writes = lane >= HL / Q && lane < 32 - HR / Q && xs < h.width;
    const size_t row_bytes = (size_t)h.width * C;
    const bool inside = xs >= 0 && xs + Q <= h.width;
    /* on an aligned image at least 2 HL wide, the lanes off it load nothing
     * but the wrap border's: the pixels they mirror lie in the warp's own
     * columns (conv2d_scan_fix), so no lane gathers bytes at a memory
     * latency each, a row at a time (such edge warps set the kernel's time
     * when they did) */
    const bool mirrored = h.aligned && h.border != GF_BORDER_WRAP && h.width >= 2 * HL;
    const int first = (int)x0 - HL;  /* the warp's first pixel */
    const bool fix = mirrored && (first < 0 || first + 32 * Q > h.width);  /* the whole warp */
    const int tier = inside ? (h.aligned ? 2 : h.flat && row_bytes % 4 == 0 ? 1 : 0) : mirrored ? -1 : 0;
    /* as the running sums store: one 16-byte store where the row allows,
     * else conv2d_store (the right edge, other channels_filtered) */
    const bool wide = inside && h.vec && row_bytes % 16 == 0 && h.cf == CF;
    const float mul = 1.0f / h.scale[0];
    auto row_of = [&](int k) {  /* input row k of the strip: image row y0 - R + k */
        const int y = y0 - R + k;
        return y >= 0 && y < h.height ? y : gf_border_index(y, h.height, (gf_border)h.border);
    };
    /* strips whose rows all lie inside the image, by warps inside an
     * aligned image (nearly all of a large one's): conv2d_scan_walk. The
     * warps at its left and right edges, whose lanes off it take their
     * column sums by shuffles, stay below: the walk with those shuffles
     * spilled (gray: 716 bytes stored, 1368 loaded, at 80 registers) and
     * ran slower (RGBA box15 0.34 -> 0.47 ms). */
    if (y0 - R >= 0 && y0 + rows + R <= h.height && !fix &&
        __all_sync(0xFFFFFFFFu, tier == 2 && (wide || !writes))) {
        conv2d_scan_walk<C, CF, M>(h, mul, xs, y0, rows, writes, strip & 1);
        return;
    }
    const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
    const int in_rows = rows + M - 1;
    uint4 in_next = conv2d_scan_load<C>(h, row_of(0), xs, tier), out_next = zero;
    [[maybe_unused]] uint4 given_next = zero;
    unsigned cs[8] = {0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u};
    unsigned char *o = h.dst + (size_t)y0 * row_bytes + (size_t)max(xs, 0) * C;
    for (int k = 0; k < in_rows; k++) {
        const uint4 in = in_next, out = out_next;
        [[maybe_unused]] const uint4 given = given_next;
        if (k + 1 < in_rows) {
            in_next = conv2d_scan_load<C>(h, row_of(k + 1), xs, tier);
            out_next = k + 1 >= M ? conv2d_scan_load<C>(h, row_of(k + 1 - M), xs, tier) : zero;
            if constexpr (CF < C)  /* output row k + 1 - (M - 1): inside the image */
                if (k + 1 >= M - 1)
                    given_next = conv2d_scan_load<C>(h, y0 + k + 2 - M, xs, tier);
        }
        conv2d_scan_columns(in, out, cs);
        if (k >= M - 1) {  /* output row y0 + k - (M - 1) */
            float fv[Q][CF];
            conv2d_scan_row<C, CF, M>(cs, mul, fv, fix, xs, first, h);
            if (writes && wide) {
                const unsigned words[4] = {given.x, given.y, given.z, given.w};
                conv2d_store_wide<C, CF, Q>(o, fv, words);
            } else if (writes) {
                conv2d_store<C, CF, Q>(h, y0 + k - (M - 1), xs, fv);
            }
            o += row_bytes;
        }
    }
}

/* ---- version 4 on the tensor cores: separable masks of bytes (kMma4) ------- */

#include "conv2d_mma.cuh"

constexpr int kMma4 = kBoxScan4 + 1;

/* Blocks of 256 threads an SM the registers must allow (__launch_bounds__).
 * The warps wait on the chain of a tile's phases, so more blocks an SM
 * cover more of it. The row pass on channel planes (RGBA from 27x27) holds
 * two at 110 registers: at three (80) it spilled 24 B and ran 1-5% slower
 * (bench/RESULTS.md). Gray from 19x19 (two chunks of K
 * in the column pass) holds four at 64 registers, no spill: its 128x64
 * tiles (46 KB) fit four, and the occupancy rule gives it 128x64 either
 * way (256x64 needs 86 KB). Gray below 19x19 keeps three and its 256x64
 * (65 KB). The measurements: conv2d_mma.cuh, step 10. */
__host__ __device__ constexpr int conv2d_mma_min_blocks(int C, int M)
{
    return conv2d_mma_planar(C, M) ? 2 : C == 1 && conv2d_mma_column_chunks(M) > 1 ? 4 : 3;
}

/* Masks of 11x11 to 31x31 that factor as a column times a row of integers
 * 0..255 whose sums stay in 16 bits (the row's weights sum to at most 257),
 * gray and RGBA: both passes as 8-bit integer products on the tensor cores
 * (conv2d_mma.cuh), the sums exact, then the separable integer path's
 * scaling of the float 2^23 + 2^22 + S: for masks prescaled without an
 * offset one FFMA (and a clamp above unless in range); for masks divided
 * by an odd integer d with outputs in range (the bench's gaussian15, whose
 * scale is 15625, and on gray the box masks, which the plan gives this
 * path first) MODE_DIV_ODD's FADD and FFMA (S < 2^22: the plan checks
 * 255 d < 2^22); else conv2d_value.
 * A persistent grid: each block builds its Toeplitz fragments once and walks
 * tiles, as many blocks as an SM holds (conv2d_mma_min_blocks). */
template <int C, int CF, int M>
__global__ void __launch_bounds__(kMaxThreads, conv2d_mma_min_blocks(C, M))
    conv2d_mma_kernel4(const __grid_constant__ fast_args<16> a)
{
    const fast_header &h = a.h;
    const bool div = h.mode == MODE_DIV;
    const float mul = div ? 1.0f : 1.0f / h.scale[0];  /* a power of two where prescaled */
    const float sub = -12582912.0f * mul, top = sub + kMagic;
    /* The sums are >= 0 (weights and bytes), so the prescaled mode without an
     * offset needs no lower clamp, nor an upper one in range (kInRange, set
     * by the plan: the weights' total at most the scale). */
    const int pick = h.mode == MODE_PRESCALED_NO_OFFSET + kInRange ? 0
                     : h.mode == MODE_PRESCALED_NO_OFFSET           ? 1
                     : div                                          ? 2
                     : h.mode == MODE_DIV_ODD + kInRange            ? 4
                                                                    : 3;
    auto word = [&](int i) { return __float_as_uint(a.w[i]); };
    auto in_range = [&](float t) { return __float_as_uint(__fmaf_rn(t, mul, top)); };
    auto clamped = [&](float t) { return __float_as_uint(fminf(__fmaf_rn(t, mul, top), kMagic + 255.0f)); };
    auto divided = [&](float t) {
        const float sum[1] = {__fmaf_rn(t, mul, sub)};
        return __float_as_uint(conv2d_value<MODE_DIV, COMB_SUM, 1>(sum, h));
    };
    auto any = [&](float t) {
        const float sum[1] = {__fmaf_rn(t, mul, sub)};
        return __float_as_uint(conv2d_value<MODE_PRESCALED, COMB_SUM, 1>(sum, h));
    };
    /* conv2d_div_odd's finish: t - 2^23 - 2^22 is S exactly */
    auto odd = [&](float t) { return __float_as_uint(__fmaf_rn(__fadd_rn(t, -12582912.0f), mul, kMagic)); };
    conv2d_mma_body<C, CF, M>(h, word, pick, in_range, clamped, divided, any, odd);
}

/* ---- version 4, 3x3 masks of a column times a row as row streams (kStream4) -- */

#include "conv2d_stream.cuh"
}  /* namespace */

/* ---- dispatch ------------------------------------------------------------- */

/* The last N answers of a host-side query (each user keeps one static
 * thread_local): the first entry a predicate accepts, or the oldest slot
 * for a new answer. */
template <class Entry, int N>
struct conv2d_recent {
    Entry entries[N];
    int count = 0, next = 0;

    template <class Match>
    const Entry *find(Match match) const
    {
        for (int i = 0; i < count; i++)
            if (match(entries[i]))
                return &entries[i];
        return nullptr;
    }
    Entry &add()
    {
        Entry &e = entries[next];
        next = (next + 1) % N;
        count = count < N ? count + 1 : N;
        return e;
    }
};

/* The shared-memory opt-in of a kernel that needs more than 48 KB: its
 * limit raised to all that a block of the device may have (less its static
 * shared memory), never to the launch's own bytes. The limit belongs to the
 * kernel, not to a launch, and the batch's workers choose tiles and launch
 * at the same time: one setting it to a candidate tile's bytes while
 * another launched with more failed that launch ("invalid argument"). Once
 * per kernel and device in each host thread. */
extern "C" cudaError_t conv2d_allow_shared(const void *entry, size_t shared)
{
    struct raised {
        const void *entry;
        int dev;
    };
    static thread_local conv2d_recent<raised, 32> done;
    if (shared <= 48 * 1024)
        return cudaSuccess;
    int dev = 0, optin = 0;
    cudaError_t err = cudaGetDevice(&dev);
    if (err != cudaSuccess)
        return err;
    if (done.find([&](const raised &r) { return r.entry == entry && r.dev == dev; }))
        return cudaSuccess;
    cudaFuncAttributes fa;
    if ((err = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev)) !=
            cudaSuccess ||
        (err = cudaFuncGetAttributes(&fa, entry)) != cudaSuccess ||
        (err = cudaFuncSetAttribute(entry, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    optin - (int)fa.sharedSizeBytes)) != cudaSuccess)
        return err;
    done.add() = raised{entry, dev};
    return cudaSuccess;
}

/* Every launch goes through here: the kernel's own parameter type, the
 * shared-memory opt-in above 48 KB. */
template <class A>
static cudaError_t conv2d_start(void (*kernel)(A), dim3 grid, dim3 block, size_t shared,
                                cudaStream_t stream, const A &args)
{
    const cudaError_t err = conv2d_allow_shared((const void *)kernel, shared);
    if (err != cudaSuccess)
        return err;
    kernel<<<grid, block, shared, stream>>>(args);
    return cudaGetLastError();
}

/* Device queries made while planning. An error already pending from
 * earlier work is left for its owner to report: with one pending, no query
 * is made and the plan takes its device-independent choice. A query's own
 * failure is cleared, so that the launch does not report it. */
static bool conv2d_error_pending()
{
    return cudaPeekAtLastError() != cudaSuccess;
}

static bool conv2d_query_failed()
{
    cudaGetLastError();
    return false;
}

/* Test hook (GPUFILTER_TEST_FAULT=query): every planning query fails. */
static bool conv2d_queries_fail = false;

extern "C" void conv2d_fail_queries(int fail)
{
    conv2d_queries_fail = fail != 0;
}

/* The current device and its SM count; false when they cannot be known. */
static bool conv2d_device_sms(int *dev, int *sms)
{
    if (conv2d_queries_fail || conv2d_error_pending())
        return false;
    if (cudaGetDevice(dev) != cudaSuccess ||
        cudaDeviceGetAttribute(sms, cudaDevAttrMultiProcessorCount, *dev) != cudaSuccess)
        return conv2d_query_failed();
    return *sms > 0;
}

typedef void (*conv2d_entry)(conv2d_launch);

static conv2d_entry conv2d_entry_for(int version, int channels)
{
    static const conv2d_entry table[2][4] = {
        {conv2d_kernel0<1>, conv2d_kernel0<2>, conv2d_kernel0<3>, conv2d_kernel0<4>},
        {conv2d_kernel1<1>, conv2d_kernel1<2>, conv2d_kernel1<3>, conv2d_kernel1<4>},
    };
    if (version < 0 || version > 1 || channels < 1 || channels > 4)
        return NULL;
    return table[version][channels - 1];
}

/* ---- versions 2 and 3: plans ----------------------------------------------- */

namespace {

struct conv2d_plan;
typedef cudaError_t (*conv2d_runner)(const conv2d_plan &, cudaStream_t);

/* One instantiation: version, channel layout (C channels, CF computed),
 * matrices, mask size (0: any), outputs per thread (P rows x Q columns),
 * weights in shared memory (ws) or in the parameters. */
struct conv2d_variant {
    int version, C, CF, K, MW, MH, P, Q;
    int ws;         /* versions 2, 3: weights in shared memory (1); 4: integer weights
                       of one byte, DP4A (1), of 16 bits, DP2A (2), or a column times
                       a row of bytes (kSeparable4) */
    unsigned zero;  /* weights known to be 0 (bit i: weight i) */
    const void *entry;
    conv2d_runner run;
    int mode;       /* version 4: the one scaling mode of the kernel (MODE_*, with
                       kInRange), or kModeAny; versions 2 and 3: kModeAny */
};

struct conv2d_plan {
    const conv2d_variant *v;
    int path;  /* version 4: the place of v's arithmetic in conv2d_make_plan's order */
    fast_header h;
    float w[kParamWeights];
    int nw;
    dim3 grid, block;
    size_t shared;
};

template <int NW>
static void conv2d_fill(fast_args<NW> &a, const conv2d_plan &pl)
{
    a.h = pl.h;
    /* bit copies: the DP4A path's packed weights are not meant as floats;
     * every runner that reads weights holds all the plan packed */
    assert(pl.nw >= 0 && pl.nw <= NW);
    const int n = pl.nw;
    memcpy(a.w, pl.w, (size_t)n * sizeof(float));
    memset(a.w + n, 0, (size_t)(NW - n) * sizeof(float));
}

template <int C, int CF, int K, int MW, int MH, int P, int Q, bool WS, int NW>
static cudaError_t conv2d_run2(const conv2d_plan &pl, cudaStream_t stream)
{
    fast_args<NW> args;
    conv2d_fill(args, pl);
    return conv2d_start(conv2d_kernel2<C, CF, K, MW, MH, P, Q, WS, NW>, pl.grid, pl.block,
                        pl.shared, stream, args);
}

template <int C, int CF, int K, int M, int Q, unsigned ZERO, int DP, int MODE4>
static cudaError_t conv2d_run4(const conv2d_plan &pl, cudaStream_t stream)
{
    fast_args<K * M * M> args;
    conv2d_fill(args, pl);
    return conv2d_start(conv2d_kernel4<C, CF, K, M, Q, ZERO, DP, MODE4>, pl.grid, pl.block, pl.shared,
                        stream, args);
}

template <int C, int CF, int M>
static cudaError_t conv2d_run_scan4(const conv2d_plan &pl, cudaStream_t stream)
{
    fast_args<1> args;  /* the prefix sums read no weight: a box's are all one */
    args.h = pl.h;
    args.w[0] = 0.0f;
    return conv2d_start(conv2d_scan_kernel4<C, CF, M>, pl.grid, pl.block, pl.shared, stream, args);
}

template <int C, int CF, int M>
static cudaError_t conv2d_run_mma4(const conv2d_plan &pl, cudaStream_t stream)
{
    fast_args<16> args;
    conv2d_fill(args, pl);
    return conv2d_start(conv2d_mma_kernel4<C, CF, M>, pl.grid, pl.block, pl.shared, stream, args);
}

template <int C, int CF, int MODE4, int SHAPE>
static cudaError_t conv2d_run_stream4(const conv2d_plan &pl, cudaStream_t stream)
{
    fast_args<16> args;
    conv2d_fill(args, pl);
    return conv2d_start(conv2d_stream_kernel4<C, CF, MODE4, SHAPE>, pl.grid, pl.block, pl.shared, stream,
                        args);
}

template <int C, int CF, bool WS>
static cudaError_t conv2d_run3(const conv2d_plan &pl, cudaStream_t stream)
{
    fast_args<64> args;
    conv2d_fill(args, pl);
    return conv2d_start(conv2d_kernel3<C, CF, WS>, pl.grid, pl.block, pl.shared, stream, args);
}

#define CONV2D_V2(C, CF, K, M, P, Q, WS, NW)                                                  \
    {2, C, CF, K, M, M, P, Q, WS, 0u, (const void *)conv2d_kernel2<C, CF, K, M, M, P, Q, WS, NW>, \
     conv2d_run2<C, CF, K, M, M, P, Q, WS, NW>, kModeAny}
/* the zero taps of the Sobel, Prewitt and Scharr pairs: the x gradient's
 * middle column (weights 1, 4, 7), the y gradient's middle row (12, 13, 14) */
#define CONV2D_GRADIENT_ZEROS 0x7092u
/* fully unrolled sizes (weights as parameters), then the generic kernel */
#define CONV2D_V2_LAYOUT(C, CF)                                                               \
    CONV2D_V2(C, CF, 1, 3, 4, 4, false, 9), CONV2D_V2(C, CF, 2, 3, 2, 4, false, 18),          \
    CONV2D_V2(C, CF, 1, 5, 4, 4, false, 25), CONV2D_V2(C, CF, 1, 7, 4, 4, false, 49),         \
    CONV2D_V2(C, CF, 1, 0, 1, 8, false, kParamWeights),                                        \
    CONV2D_V2(C, CF, 2, 0, 1, 8, false, kParamWeights),                                        \
    CONV2D_V2(C, CF, 3, 0, 1, 4, false, kParamWeights),                                        \
    CONV2D_V2(C, CF, 4, 0, 1, 4, false, kParamWeights),                                        \
    CONV2D_V2(C, CF, 1, 0, 1, 8, true, 4), CONV2D_V2(C, CF, 2, 0, 1, 8, true, 4),              \
    CONV2D_V2(C, CF, 3, 0, 1, 4, true, 4), CONV2D_V2(C, CF, 4, 0, 1, 4, true, 4)
#define CONV2D_V3(C, CF)                                                                      \
    {3, C, CF, 1, 0, 0, 8, 8, false, 0u, (const void *)conv2d_kernel3<C, CF, false>,          \
     conv2d_run3<C, CF, false>, kModeAny},                                                     \
    {3, C, CF, 1, 0, 0, 8, 8, true, 0u, (const void *)conv2d_kernel3<C, CF, true>,            \
     conv2d_run3<C, CF, true>, kModeAny}

/* version 4: conv2d_rows4 rows of Q columns per thread, Q such that a thread's
 * own bytes of a row are whole words (at most 16 bytes) and, where that
 * allows, its accumulators (M rows in progress x Q x K x CF) take at most
 * 64 registers; one matrix of 3x3, 5x5 or 7x7, or a 3x3 gradient pair
 * (the Sobel, Prewitt and Scharr zeros, magnitude), and 15x15 on the DP4A
 * path (60 accumulators: Q = 4 gray, 1 RGBA). RGB has no 7x7: Q = 4
 * would need ~84 accumulators, and no smaller Q makes whole words. */
#define CONV2D_V4X(C, CF, K, M, Q, Z, DP, MODE4)                                              \
    {4, C, CF, K, M, M, conv2d_rows4<C, K, M>(), Q, DP, Z,                                      \
     (const void *)conv2d_kernel4<C, CF, K, M, Q, Z, DP, MODE4>,                              \
     conv2d_run4<C, CF, K, M, Q, Z, DP, MODE4>, MODE4}
#define CONV2D_V4M(C, CF, K, M, Q, Z, DP) CONV2D_V4X(C, CF, K, M, Q, Z, DP, kModeAny)
/* and the same for the prescaled masks without offsets only */
#define CONV2D_V4Q(C, CF, M, Q, DP)                                                            \
    CONV2D_V4M(C, CF, 1, M, Q, 0u, DP), CONV2D_V4X(C, CF, 1, M, Q, 0u, DP, MODE_PRESCALED_NO_OFFSET)
/* the kernels of one size and layout for masks whose outputs stay in
 * 0..255 (kInRange): prescaled without an offset (gaussian) and divided by
 * an odd integer (box); DP: 1 (DP4A) or the binomial and box columns of
 * the separable integer path */
#define CONV2D_V4R(C, CF, M, Q, DP_GAUSSIAN, DP_BOX)                                           \
    CONV2D_V4X(C, CF, 1, M, Q, 0u, DP_GAUSSIAN, MODE_PRESCALED_NO_OFFSET + kInRange),         \
    CONV2D_V4X(C, CF, 1, M, Q, 0u, DP_BOX, MODE_DIV_ODD + kInRange)
/* a gradient pair of kind kGradients4[G] in 16-bit lanes, 4 pixels a thread */
#define CONV2D_V4G(C, CF, G)                                                                  \
    CONV2D_V4X(C, CF, 2, 3, 4, CONV2D_GRADIENT_ZEROS, kGradient4 + G, MODE_PRESCALED_NO_OFFSET)
/* box masks of M x M as running sums on RGBA, alpha copied and filtered */
#define CONV2D_V4RUN(M)                                                                       \
    CONV2D_V4X(4, 3, 1, M, 4, 0u, kRunning4, MODE_DIV_ODD + kInRange),                       \
    CONV2D_V4X(4, 4, 1, M, 4, 0u, kRunning4, MODE_DIV_ODD + kInRange)
/* box masks of M x M as prefix sums across a warp: gray, RGBA with alpha
 * copied and filtered; one row of 16 / C pixels a thread */
#define CONV2D_V4SCAN1(C, CF, M)                                                               \
    {4, C, CF, 1, M, M, 1, 16 / C, kBoxScan4, 0u, (const void *)conv2d_scan_kernel4<C, CF, M>, \
     conv2d_run_scan4<C, CF, M>, MODE_DIV_ODD + kInRange}
#define CONV2D_V4SCAN(M) CONV2D_V4SCAN1(1, 1, M), CONV2D_V4SCAN1(4, 3, M), CONV2D_V4SCAN1(4, 4, M)
/* M x M masks that factor as a column times a row of bytes 0..255 on the
 * tensor cores, any scaling: gray, RGBA with alpha copied and filtered;
 * blocks of 256 threads whatever the tile */
#define CONV2D_V4MMA1(C, CF, M)                                                                \
    {4, C, CF, 1, M, M, 1, 1, kMma4, 0u, (const void *)conv2d_mma_kernel4<C, CF, M>,          \
     conv2d_run_mma4<C, CF, M>, kModeAny}
#define CONV2D_V4MMA(M) CONV2D_V4MMA1(1, 1, M), CONV2D_V4MMA1(4, 3, M), CONV2D_V4MMA1(4, 4, M)
/* 3x3 masks of a column times a row of small integers as row streams,
 * outputs in range: gray, RGBA with alpha copied and filtered; 16 bytes a
 * thread, kStreamRows4 rows; gaussian3's shape prescaled, box3's over an
 * odd integer, and any shape either way */
#define CONV2D_V4STREAM1(C, CF, MODE4, SHAPE)                                                  \
    {4, C, CF, 1, 3, 3, kStreamRows4, 16 / C, kStream4 + SHAPE, 0u,                            \
     (const void *)conv2d_stream_kernel4<C, CF, MODE4, SHAPE>,                                 \
     conv2d_run_stream4<C, CF, MODE4, SHAPE>, MODE4}
#define CONV2D_V4STREAM(C, CF)                                                                 \
    CONV2D_V4STREAM1(C, CF, MODE_PRESCALED_NO_OFFSET + kInRange, kStreamBinomial),             \
    CONV2D_V4STREAM1(C, CF, MODE_DIV_ODD + kInRange, kStreamOnes),                             \
    CONV2D_V4STREAM1(C, CF, MODE_PRESCALED_NO_OFFSET + kInRange, kStreamAny),                  \
    CONV2D_V4STREAM1(C, CF, MODE_DIV_ODD + kInRange, kStreamAny)
/* M x M masks on the separable integer path in any scaling mode: gray, 4
 * pixels a thread, and RGBA, one pixel (M rows of accumulators) */
#define CONV2D_V4SEP(M)                                                                       \
    CONV2D_V4M(1, 1, 1, M, 4, 0u, kSeparable4), CONV2D_V4M(4, 3, 1, M, 1, 0u, kSeparable4),   \
    CONV2D_V4M(4, 4, 1, M, 1, 0u, kSeparable4)
#define CONV2D_V4(C, CF, Q3, QG, Q5, DP)                                                      \
    CONV2D_V4M(C, CF, 1, 3, Q3, 0u, DP),                                                      \
    CONV2D_V4M(C, CF, 2, 3, QG, CONV2D_GRADIENT_ZEROS, DP), CONV2D_V4M(C, CF, 1, 5, Q5, 0u, DP)

const conv2d_variant conv2d_variants[] = {
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
     * (below, the column of ones and the running sums were faster) */
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
};

const conv2d_variant *conv2d_find(int version, int C, int CF, int K, int M, int ws,
                                  unsigned zero = 0, int mode = kModeAny)
{
    for (const conv2d_variant &v : conv2d_variants)
        if (v.version == version && v.C == C && v.CF == CF && v.K == K && v.MW == M &&
            v.ws == ws && v.zero == zero && v.mode == mode)
            return &v;
    return NULL;
}

/* CONV2D_GRADIENT_ZEROS when a 3x3 pair has the Sobel/Prewitt/Scharr zero
 * taps (the instantiations that leave them out), else 0. */
unsigned conv2d_gradient_zeros(const conv2d_launch *p, int K, int mw)
{
    if (!p->host_weights || mw != 3 || p->mask_height != 3 || K != 2)
        return 0;
    unsigned zeros = 0;
    for (int i = 0; i < 18; i++)
        zeros |= p->host_weights[i] == 0.0f ? 1u << i : 0u;
    return (zeros & CONV2D_GRADIENT_ZEROS) == CONV2D_GRADIENT_ZEROS ? CONV2D_GRADIENT_ZEROS : 0u;
}

/* The channels a kernel computes: all of them, or RGB of RGBA when alpha is
 * copied; a smaller channels_filtered runs on the full kernel and copies
 * byte by byte (no built-in path asks for one). */
int conv2d_cf_template(int channels, int cf)
{
    return channels == 4 && cf <= 3 ? 3 : channels;
}

bool conv2d_power_of_two(float s)
{
    int e;
    const float m = frexpf(fabsf(s), &e);
    return m == 0.5f && e > -100 && e < 100;
}

/* Whether every matrix's scale is a power of two that can be folded into
 * its weights exactly (no weight leaves 2^-100 .. 2^100). */
bool conv2d_prescalable(const conv2d_launch *p, int K, int taps, const float *inv)
{
    for (int k = 0; k < K; k++) {
        if (!conv2d_power_of_two(p->scale[k]))
            return false;
        for (int i = 0; i < taps; i++) {
            const float w = p->host_weights[k * taps + i] * inv[k];
            if (w != 0.0f && !(fabsf(w) > 0x1p-100f && fabsf(w) < 0x1p100f))
                return false;
        }
    }
    return true;
}

/* Whether every weight is an integer of -128..127: version 4's DP4A path. */
bool conv2d_byte_weights(const float *w, int n)
{
    for (int i = 0; i < n; i++)
        if (!(w[i] >= -128.0f && w[i] <= 127.0f && w[i] == floorf(w[i])))
            return false;
    return true;
}

/* Whether every weight is an integer of 16 bits and every matrix's sum
 * stays below 2^22 in magnitude (255 times the sum of |weights|): version
 * 4's DP2A path, whose accumulators hold the float bias (see conv2d_body4). */
bool conv2d_short_weights(const float *w, int K, int taps)
{
    for (int k = 0; k < K; k++) {
        double total = 0.0;
        for (int i = 0; i < taps; i++) {
            const float v = w[k * taps + i];
            if (!(v >= -32768.0f && v <= 32767.0f && v == floorf(v)))
                return false;
            total += fabs((double)v);
        }
        if (255.0 * total >= 4194304.0)
            return false;
    }
    return true;
}

/* Taps 4j .. 4j + 3 of a row of m integer weights (0 past it) as signed
 * bytes in one word, stored as the bits of a float. */
void conv2d_pack_bytes(const float *row, int m, int j, float *out)
{
    uint32_t word = 0;
    for (int b = 0; b < 4; b++)
        word |= (uint32_t)(uint8_t)(int8_t)(4 * j + b < m ? (int)row[4 * j + b] : 0) << (8 * b);
    memcpy(out, &word, sizeof word);
}

/* The integer paths' weights, stored as the bits of float parameters. DP4A
 * (dp 1): for matrix k, mask row i and window word j, the signed bytes of
 * taps 4j .. 4j + 3 (0 past the row) in one word. DP2A (dp 2): two words
 * per window word, taps 4j, 4j + 1 and 4j + 2, 4j + 3 as signed 16-bit
 * halves. Returns the count. */
int conv2d_pack_weights(const float *w, int K, int m, int dp, float *out)
{
    const int ww = (m + 3) / 4, per = dp == 2 ? 2 : 1;
    auto tap = [&](int k, int i, int mx) { return mx < m ? (int)w[(k * m + i) * m + mx] : 0; };
    for (int k = 0; k < K; k++)
        for (int i = 0; i < m; i++)
            for (int j = 0; j < ww; j++) {
                float *at = &out[((k * m + i) * ww + j) * per];
                if (dp != 2) {
                    conv2d_pack_bytes(&w[(k * m + i) * m], m, j, at);
                    continue;
                }
                for (int h = 0; h < per; h++) {
                    const uint32_t word = (uint32_t)(uint16_t)(int16_t)tap(k, i, 4 * j + 2 * h) |
                                          (uint32_t)(uint16_t)(int16_t)tap(k, i, 4 * j + 2 * h + 1) << 16;
                    memcpy(&at[h], &word, sizeof word);
                }
            }
    return K * m * ww * per;
}

/* The separable integer path's parameters (see kSeparable4): the row's
 * packed words, then the column weights. Returns the count. */
int conv2d_pack_separable(const float *row, const float *column, int m, float *out)
{
    const int ww = (m + 3) / 4;
    for (int j = 0; j < ww; j++)
        conv2d_pack_bytes(row, m, j, &out[j]);
    for (int i = 0; i < m; i++)
        out[ww + i] = column[i];
    return ww + m;
}

/* Whether a column of the separable path is binomial, C(m - 1, i)
 * (kBinomial4), or all ones (kBox4). */
bool conv2d_binomial_column(const float *column, int m)
{
    long long c = 1;  /* C(m - 1, i): exact, m <= 31 */
    for (int i = 0; i < m; i++) {
        if ((double)column[i] != (double)c)
            return false;
        c = c * (m - 1 - i) / (i + 1);
    }
    return true;
}

bool conv2d_ones(const float *column, int m)
{
    for (int i = 0; i < m; i++)
        if (column[i] != 1.0f)
            return false;
    return true;
}

/* The kind of kGradients4 a 3x3 pair on RGBA is, or -1: matrix 0 is
 * +-(u (-1, 0, 1)), the column u = (p, w, p) times the row, matrix 1 the
 * transpose (the magnitude squares the signs away), both without offsets,
 * of scale 1 for the integer_sqrt kinds, else of scales that are powers
 * of two. */
int conv2d_gradient_kind(const conv2d_launch *p, int C, int K, int mw, int mh)
{
    if (C != 4 || K != 2 || mw != 3 || mh != 3 || p->combine != GF_COMBINE_MAGNITUDE ||
        p->offset[0] != 0.0f || p->offset[1] != 0.0f)
        return -1;
    const float *w = p->host_weights;
    for (int g = 0; g < kGradientKinds4; g++) {
        const float u[3] = {(float)kGradients4[g].p, (float)kGradients4[g].w, (float)kGradients4[g].p};
        const float v[3] = {-1.0f, 0.0f, 1.0f};
        const float sx = w[2] / u[0], sy = w[15] / u[0];  /* the signs: weights 2 and 15 */
        bool match = (sx == 1.0f || sx == -1.0f) && (sy == 1.0f || sy == -1.0f);
        for (int i = 0; i < 3 && match; i++)
            for (int j = 0; j < 3 && match; j++)
                match = w[i * 3 + j] == sx * u[i] * v[j] && w[9 + i * 3 + j] == sy * v[i] * u[j];
        if (!match)
            continue;
        const bool scales = kGradients4[g].integer_sqrt
                                ? p->scale[0] == 1.0f && p->scale[1] == 1.0f
                                : conv2d_power_of_two(p->scale[0]) && conv2d_power_of_two(p->scale[1]);
        return scales ? g : -1;
    }
    return -1;
}

/* Whether a matrix's outputs stay in 0..255 before the clamp (kInRange):
 * no negative weight, and their sum at most the scale. */
bool conv2d_in_range(const float *w, int taps, float scale)
{
    double total = 0.0;
    for (int i = 0; i < taps; i++) {
        if (!(w[i] >= 0.0f))
            return false;
        total += w[i];
    }
    return total <= (double)scale;
}

int conv2d_gcd(int a, int b)
{
    while (b) {
        const int t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* Integer factors of integer 2-D weights: the row of the largest weight
 * divided by the gcd of its entries (then every column factor is an integer
 * too), checked exactly. With them version 3's sums are exact. */
bool conv2d_integer_factors(const float *w, int mw, int mh, float *row, float *column)
{
    int pivot = 0;
    for (int i = 0; i < mw * mh; i++) {
        if (w[i] != rintf(w[i]) || fabsf(w[i]) >= 16777216.0f)
            return false;
        if (fabsf(w[i]) > fabsf(w[pivot]))
            pivot = i;
    }
    if (w[pivot] == 0.0f)
        return false;
    const int py = pivot / mw, px = pivot % mw;
    int g = 0;
    for (int x = 0; x < mw; x++)
        g = conv2d_gcd(g, abs((int)w[py * mw + x]));
    for (int x = 0; x < mw; x++)
        row[x] = w[py * mw + x] / (float)g;
    for (int y = 0; y < mh; y++) {
        column[y] = w[y * mw + px] / row[px];
        if (column[y] != rintf(column[y]))
            return false;
        for (int x = 0; x < mw; x++)
            if (column[y] * row[x] != w[y * mw + x])
                return false;
    }
    return true;
}

/* Shared-memory wavefronts of one warp accessing pixel slots of 'cp' floats
 * (the bank model: a 16-byte access is served 8 threads at a time, 8-byte
 * 16 at a time, 4-byte 32 at a time; a phase takes as many wavefronts as
 * the most distinct words one bank holds). */
int conv2d_wavefronts(const int *slot, int threads, int cp)
{
    const int phase = 32 / cp;
    int total = 0;
    for (int p0 = 0; p0 < threads; p0 += phase) {
        int words[32][32], count[32] = {0}, worst = 1;
        for (int t = p0; t < p0 + phase && t < threads; t++)
            for (int f = 0; f < cp; f++) {
                const int word = slot[t] * cp + f, bank = word & 31;
                bool seen = false;
                for (int i = 0; i < count[bank]; i++)
                    seen = seen || words[bank][i] == word;
                if (!seen && count[bank] < 32)
                    words[bank][count[bank]++] = word;
                if (count[bank] > worst)
                    worst = count[bank];
            }
        total += worst;
    }
    return total;
}

/* The two searches below try 32 strides through conv2d_wavefronts each:
 * with them a launch call of version 3 took 50 to 130 us of host time in
 * the bench (version 2: 5 to 20), since conv2d_gpu plans every launch.
 * Pure functions of their arguments, so their answers are kept per host
 * thread. */
struct conv2d_stride_answer {
    int args[5], stride;
};

template <class Search>
static int conv2d_kept_stride(conv2d_recent<conv2d_stride_answer, 16> &known, const int (&args)[5],
                              Search search)
{
    if (const conv2d_stride_answer *a = known.find([&](const conv2d_stride_answer &e) {
            return memcmp(e.args, args, sizeof args) == 0;
        }))
        return a->stride;
    const int stride = search();
    conv2d_stride_answer &a = known.add();
    memcpy(a.args, args, sizeof args);
    a.stride = stride;
    return stride;
}

/* A row stride (in slots) >= 'least' for which warp 0's reads are
 * conflict-free (or the least bad): thread t reads slot
 * (t / per_row) * rows_apart * stride + t % per_row. */
static int conv2d_search_row_stride(int least, int per_row, int rows_apart, int threads, int cp)
{
    int best = least, best_cost = 1 << 30;
    const int n = threads < 32 ? threads : 32;
    for (int stride = least; stride < least + 32; stride++) {
        int slot[32];
        for (int t = 0; t < n; t++)
            slot[t] = (t / per_row) * rows_apart * stride + t % per_row;
        const int cost = conv2d_wavefronts(slot, n, cp);
        if (cost < best_cost) {
            best = stride;
            best_cost = cost;
        }
    }
    return best;
}

int conv2d_row_stride(int least, int per_row, int rows_apart, int threads, int cp)
{
    static thread_local conv2d_recent<conv2d_stride_answer, 16> known;
    return conv2d_kept_stride(known, {least, per_row, rows_apart, threads, cp}, [&] {
        return conv2d_search_row_stride(least, per_row, rows_apart, threads, cp);
    });
}

/* Version 3's ring stride: the row pass writes (thread t: row t / per_row,
 * columns 8 (t % per_row) + q, swizzled) and the column pass reads (thread
 * t: row 8 (t / tw), column t % tw, swizzled), both as conflict-free as
 * possible. */
static int conv2d_search_ring_stride(int tw, int threads, int cp)
{
    const int n = 32 / cp, ln = n == 8 ? 3 : n == 16 ? 4 : 5;
    auto swz = [&](int x) { return x ^ ((x >> ln) & (n - 1)); };
    const int least = (tw + n - 1) / n * n, per_row = tw / 8, warp = threads < 32 ? threads : 32;
    int best = least, best_cost = 1 << 30;
    for (int stride = least; stride < least + 32; stride++) {
        int slot[32], cost = 0;
        for (int q = 0; q < 8; q++) {
            for (int t = 0; t < warp; t++)
                slot[t] = (t / per_row) * stride + swz(8 * (t % per_row) + q);
            cost += conv2d_wavefronts(slot, warp, cp);
        }
        for (int t = 0; t < warp; t++)
            slot[t] = 8 * (t / tw) * stride + swz(t % tw);
        cost += 8 * conv2d_wavefronts(slot, warp, cp);
        if (cost < best_cost) {
            best = stride;
            best_cost = cost;
        }
    }
    return best;
}

int conv2d_ring_stride(int tw, int threads, int cp)
{
    static thread_local conv2d_recent<conv2d_stride_answer, 16> known;
    return conv2d_kept_stride(known, {tw, threads, cp, 0, 0},
                              [&] { return conv2d_search_ring_stride(tw, threads, cp); });
}

/* Whether s is an odd integer d, 3 <= |d| < 2^22 (MODE_DIV_ODD) */
static bool conv2d_odd_divisor(float s)
{
    const float d = fabsf(s);
    return d >= 3.0f && d < 0x1p22f && fmodf(d, 2.0f) == 1.0f;  /* exact: no rounding */
}

/* Whether conv2d_div may divide matrix k's sums by its scale (else
 * __fdiv_rn): the scale, the largest possible sum (255 times the sum of
 * |weights|) and its quotient within 2^100 in magnitude, so that no step
 * overflows, and no nonzero weight below 2^-20, so that a nonzero sum (a
 * multiple of 2^-44 at least) stays clear of the denormals. */
static bool conv2d_div_range(const conv2d_launch *p, int k, float inv)
{
    const float s = fabsf(p->scale[k]);
    if (!p->host_weights || !(s >= 0x1p-100f && s <= 0x1p100f))
        return false;
    const int taps = p->mask_width * p->mask_height;
    double total = 0.0, least = 1.0;
    for (int i = 0; i < taps; i++) {
        const double w = fabs((double)p->host_weights[k * taps + i]);
        total += w;
        if (w != 0.0 && w < least)
            least = w;
    }
    const double top = 255.0 * total;
    return top < 0x1p100 && top * fabs((double)inv) < 0x1p100 && least >= 0x1p-20;
}

/* What conv2d_make_plan asks of a mask's host weights, each a scan of every
 * weight: at 31x31 ~10 us of host time a plan, and every launch plans, as
 * does the tool's tile choice several times for each candidate tile
 * (threads, shared bytes, kernel, path). Kept for the last two masks of
 * each host thread, by value (the weights compared, not their address: a
 * caller may refill one array), so that a later plan of the same mask
 * only compares its weights. */
struct conv2d_mask_facts {
    int K, mw, mh;
    float scale[CONV2D_MAX_MATRICES];
    float weights[CONV2D_MAX_MATRICES * kMaxMask * kMaxMask];
    bool short_weights;  /* conv2d_short_weights, every matrix */
    bool byte_weights;   /* conv2d_byte_weights, every matrix */
    bool factors;        /* conv2d_integer_factors of matrix 0: row, column */
    bool prescalable;    /* conv2d_prescalable, every matrix */
    bool in_range;       /* conv2d_in_range of matrix 0 */
    bool div_range[CONV2D_MAX_MATRICES];
    float row[kMaxMask], column[kMaxMask];
};

/* p's facts; p checked by the caller (1..4 matrices of at most kMaxMask
 * square, host weights given). */
static const conv2d_mask_facts &conv2d_facts(const conv2d_launch *p)
{
    static thread_local conv2d_recent<conv2d_mask_facts, 2> known;
    const int K = p->mask_count, mw = p->mask_width, mh = p->mask_height, taps = mw * mh;
    const size_t weight_bytes = (size_t)K * taps * sizeof(float);
    if (const conv2d_mask_facts *kept = known.find([&](const conv2d_mask_facts &e) {
            return e.K == K && e.mw == mw && e.mh == mh &&
                   memcmp(e.scale, p->scale, K * sizeof(float)) == 0 &&
                   memcmp(e.weights, p->host_weights, weight_bytes) == 0;
        }))
        return *kept;
    conv2d_mask_facts &f = known.add();
    f.K = K;
    f.mw = mw;
    f.mh = mh;
    memcpy(f.scale, p->scale, K * sizeof(float));
    memcpy(f.weights, p->host_weights, weight_bytes);
    float inv[CONV2D_MAX_MATRICES];
    for (int k = 0; k < K; k++)
        inv[k] = 1.0f / p->scale[k];
    f.short_weights = conv2d_short_weights(p->host_weights, K, taps);
    f.byte_weights = conv2d_byte_weights(p->host_weights, K * taps);
    f.factors = conv2d_integer_factors(p->host_weights, mw, mh, f.row, f.column);
    f.prescalable = conv2d_prescalable(p, K, taps, inv);
    f.in_range = conv2d_in_range(p->host_weights, taps, p->scale[0]);
    for (int k = 0; k < K; k++)
        f.div_range[k] = conv2d_div_range(p, k, inv[k]);
    return f;
}

/* Blocks of a plan's kernel that the device holds at once: blocks per SM
 * from the occupancy API times the SMs; 0 when a query fails. Cached per
 * host thread (conv2d_gpu plans every launch, and the bench times the
 * launch call). */
static long long conv2d_resident_blocks(const conv2d_plan &pl, int threads)
{
    struct known {
        const void *entry;
        int threads, dev;
        size_t shared;
        long long blocks;
    };
    static thread_local conv2d_recent<known, 16> answers;
    int dev = 0, sms = 0, per_sm = 0;
    if (conv2d_queries_fail || conv2d_error_pending())
        return 0;
    if (cudaGetDevice(&dev) != cudaSuccess)
        return conv2d_query_failed();
    /* the answer known: no more queries on this path, which every launch takes */
    if (const known *k = answers.find([&](const known &e) {
            return e.entry == pl.v->entry && e.threads == threads && e.dev == dev &&
                   e.shared == pl.shared;
        }))
        return k->blocks;
    if (!conv2d_device_sms(&dev, &sms) || conv2d_allow_shared(pl.v->entry, pl.shared) != cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, pl.v->entry, threads, pl.shared) !=
            cudaSuccess)
        return conv2d_query_failed();
    answers.add() = known{pl.v->entry, threads, dev, pl.shared, (long long)per_sm * sms};
    return (long long)per_sm * sms;
}

/* Version 4's tiles per block (h.steps), walking down: each thread's rows
 * go on down its own ring from one tile to the next, so a strip pays the
 * M - 1 halo rows and the setup once. The count minimises the row steps on
 * the critical path, waves x (steps x rows + halo), the waves being the
 * grid over the blocks the device holds at once: on 132 SMs at 3 blocks
 * each, 8192x8192 gray 3x3 (tile 256x64) goes from 4096 blocks, 11 waves
 * (the last a third full) of 10 row steps, to 384 blocks, one wave of 90.
 * Ties go to fewer steps; grid.y stays within 65535. */
static long long conv2d_steps4(long long grid_x, long long tiles_y, int rows, int halo,
                               long long resident)
{
    long long best = (tiles_y + 65534) / 65535, best_cost = -1;
    if (best < 1)
        best = 1;
    if (resident < 1)
        return best;
    for (long long s = best; s <= tiles_y; s++) {
        const long long blocks = grid_x * ((tiles_y + s - 1) / s);
        const long long cost = (blocks + resident - 1) / resident * (s * rows + halo);
        if (best_cost < 0 || cost < best_cost) {
            best = s;
            best_cost = cost;
        }
        if (blocks <= resident)
            break;  /* one wave: more steps only make it longer */
    }
    return best;
}

/* Version 4's grid: one tile per block, or, where the grid would run past
 * the blocks the device holds at once, each block walking down h.steps
 * tiles (conv2d_steps4) with the columns of threads off the fast path (the
 * image's edges, whose rows are gathered at a memory latency each) given
 * to edge blocks ahead of the others, one tile of rows per unit, so that
 * no strip is latency-bound. Images whose rows are not aligned for the
 * fast path keep one tile per block. */
static bool conv2d_strips4(const conv2d_launch *p, conv2d_plan *pl, long long grid_x,
                           long long tiles_y, int threads)
{
    fast_header &h = pl->h;
    const int C = p->channels, Q = pl->v->Q, P = pl->v->P, M = p->mask_width;
    /* the columns of threads off the fast path (conv2d_body4's 'fast'):
     * the first 'left', and those from right0 on */
    const int sw = conv2d_halo4_words(C, M);
    const long long cols = (p->width + Q - 1) / Q;             /* columns of threads */
    const long long left = (4 * sw + Q * C - 1) / (Q * C);     /* x * C < 4 sw */
    const long long right0 = ((long long)p->width * C - 4 * sw) / (Q * C);  /* then past the row */
    h.steps = 1;
    h.edge_rows = h.edge_cols = h.edge_left = h.edge_right0 = 0;
    pl->grid = dim3((unsigned)grid_x, (unsigned)tiles_y);
    if (!conv2d_strips_ok4(C, M, pl->v->ws) || !h.aligned || right0 < left)
        return tiles_y <= 65535;
    const long long resident = conv2d_resident_blocks(*pl, threads);
    if (resident < 1 || grid_x * tiles_y <= resident)
        return tiles_y <= 65535;
    const long long edge_cols = left + cols - right0;
    const long long edge_blocks = (edge_cols * ((p->height + P - 1) / P) + threads - 1) / threads;
    const long long edge_rows = (edge_blocks + grid_x - 1) / grid_x;
    const long long steps = conv2d_steps4(grid_x, tiles_y, P, M - 1, resident - edge_blocks);
    const long long grid_y = edge_rows + (tiles_y + steps - 1) / steps;
    if (steps < 2 || 2 * edge_blocks >= resident || grid_y > 65535)
        return tiles_y <= 65535;
    h.steps = (int)steps;
    h.edge_rows = (int)edge_rows;
    h.edge_cols = (int)edge_cols;
    h.edge_left = (int)left;
    h.edge_right0 = (int)right0;
    pl->grid = dim3((unsigned)grid_x, (unsigned)grid_y);
    return true;
}

/* Whether a tile suits the prefix sums across a warp (Q pixels a thread):
 * blocks of whole warps, at most kMaxThreads. */
static bool conv2d_scan_tile(int Q, int TW, int TH)
{
    const int threads = TW / Q * TH;
    return TW % Q == 0 && TW >= Q && TH >= 1 && threads % 32 == 0 && threads <= kMaxThreads;
}

/* The prefix sums' grid: one warp for each column of conv2d_scan_outputs
 * pixels and strip of rows, h.steps rows a warp walks down, in groups of
 * kScanRows4: as many as conv2d_steps4 finds best for the warps the device
 * holds at once (each strip's first M - 1 rows feed its sums before its
 * first output); the blocks in one row of the grid. The strips do not
 * follow the tile's height: gray box9 in strips of 64 rows (2304 warps on
 * 132 SMs that hold 3168) ran 0.131 ms, of 48 (3078 warps) 0.094. */
constexpr int kScanRows4 = 8;

static bool conv2d_scan_grid4(const conv2d_launch *p, conv2d_plan *pl, int threads)
{
    fast_header &h = pl->h;
    const int out = conv2d_scan_outputs(p->channels, p->mask_width);
    const long long columns = (p->width + out - 1) / out, per_block = threads / 32;
    const long long steps = conv2d_steps4(columns, (p->height + kScanRows4 - 1) / kScanRows4,
                                          kScanRows4, p->mask_width - 1,
                                          conv2d_resident_blocks(*pl, threads) * per_block);
    h.steps = (int)(steps * kScanRows4);
    h.edge_rows = h.edge_cols = h.edge_left = h.edge_right0 = 0;
    const long long warps = columns * ((p->height + h.steps - 1) / h.steps);
    pl->grid = dim3((unsigned)((warps + per_block - 1) / per_block), 1);
    return (warps + per_block - 1) / per_block <= 0x7FFFFFFF;
}

/* Whether a factored mask's row and column of m weights are both in
 * 0..255 (the factors are integers already), with their sums. */
static bool conv2d_byte_factors(const float *row, const float *column, int m, double *row_sum,
                                double *column_sum)
{
    *row_sum = *column_sum = 0.0;
    for (int i = 0; i < m; i++) {
        if (!(row[i] >= 0.0f && row[i] <= 255.0f && column[i] >= 0.0f && column[i] <= 255.0f))
            return false;
        *row_sum += row[i];
        *column_sum += column[i];
    }
    return true;
}

/* Whether a factored mask suits the tensor cores (kMma4): the row and the
 * column of integers 0..255, the row's sums (255 times the row's weights)
 * in 16 bits. */
static bool conv2d_mma_weights(const float *row, const float *column, int m)
{
    double rows = 0.0, columns = 0.0;
    return conv2d_byte_factors(row, column, m, &rows, &columns) && 255.0 * rows <= 65535.0;
}

/* Whether the path's kernels run on the current device with the 8-bit
 * mma.sync: their code came from PTX of compute capability 8.0 or above
 * (cudaFuncAttributes' ptxVersion), which also means a device of 8.0 or
 * above. The default build carries Hopper code and compute_75 PTX: an
 * Ampere or Ada GPU compiles the kernels from that PTX at start, without
 * the mma (they would trap), so the path is left to the others there. */
static bool conv2d_mma_device()
{
    static thread_local int known_dev = -1;
    static thread_local bool known_usable = false;
    int dev = 0;
    if (conv2d_queries_fail || conv2d_error_pending())
        return false;
    if (cudaGetDevice(&dev) != cudaSuccess)
        return conv2d_query_failed();
    if (dev != known_dev) {
        cudaFuncAttributes fa;
        if (cudaFuncGetAttributes(&fa, (const void *)conv2d_mma_kernel4<1, 1, kMmaMinMask>) != cudaSuccess)
            return conv2d_query_failed();
        known_dev = dev;
        known_usable = fa.ptxVersion >= 80;
    }
    return known_usable;
}

/* The tiles kMma4 takes: rows of 16 to 256 bytes, a power of two (m-tiles
 * of 16 bytes, output pieces of 16), and a multiple of 16 rows, at most
 * 128 (whether the device has the shared memory is the launcher's check,
 * as for every version: at most 218 KB, RGBA 31x31 at 64x128). */
static bool conv2d_mma_tile(int C, int TW, int TH)
{
    const int bytes = TW * C;
    return bytes >= 16 && bytes <= 256 && (bytes & (bytes - 1)) == 0 && TH >= 16 && TH <= 128 &&
           TH % 16 == 0;
}

/* kMma4's weights: the row's bytes, then from byte 32 the column's, in
 * 16 words. */
static int conv2d_pack_mma(const float *row, const float *column, int m, float *out)
{
    unsigned char bytes[64] = {0};
    for (int i = 0; i < m; i++) {
        bytes[i] = (unsigned char)row[i];
        bytes[32 + i] = (unsigned char)column[i];
    }
    memcpy(out, bytes, sizeof bytes);
    return 16;
}

/* kMma4's persistent grid: as many blocks as the device holds at once, at
 * most one a tile; h.steps the tiles a block walks at most. */
static bool conv2d_mma_grid(const conv2d_launch *p, conv2d_plan *pl, int threads)
{
    const long long tiles = (long long)((p->width + p->tile_width - 1) / p->tile_width) *
                            ((p->height + p->tile_height - 1) / p->tile_height);
    const long long resident = conv2d_resident_blocks(*pl, threads);
    const long long blocks = resident < 1 || resident > tiles ? tiles : resident;
    pl->h.steps = (int)((tiles + blocks - 1) / blocks);
    pl->h.edge_rows = pl->h.edge_cols = pl->h.edge_left = pl->h.edge_right0 = 0;
    pl->grid = dim3((unsigned)blocks, 1);
    return tiles <= 0x7FFFFFFF;
}

/* Whether version 4's path dp is one of the row streams' kernels. */
static bool conv2d_stream4(int dp)
{
    return dp >= kStream4 && dp < kStream4 + kStreamShapes;
}

/* Whether a 3x3 mask that factors, in range, suits the row streams
 * (kStream4): a column and a row of integers 0..255 whose products' sums
 * stay in 16-bit lanes (255 * sum(column) * sum(row) < 2^16), scaled by a
 * power of two up to 2^8 (quick: prescaled, no offset) or by an odd integer
 * below 2^15 (odd, no offset), gray or RGBA rows of whole 16-byte words
 * from 16-byte aligned buffers (conv2d_stream.cuh). */
static bool conv2d_stream_fits(const conv2d_launch *p, const conv2d_mask_facts *facts, bool quick,
                               bool odd)
{
    double rows = 0.0, columns = 0.0;
    if (!conv2d_byte_factors(facts->row, facts->column, 3, &rows, &columns))
        return false;
    const float s = p->scale[0];
    const bool scale = (quick && s >= 1.0f && s <= 256.0f) || (odd && s < 32768.0f);
    return scale && 255.0 * rows * columns < 65536.0 && (p->channels == 1 || p->channels == 4) &&
           (size_t)p->width * p->channels % 16 == 0 &&
           (((uintptr_t)p->src | (uintptr_t)p->dst) & 15) == 0;
}

/* The tiles kStream4 takes: groups of 8, 16 or 32 lanes across, or whole
 * warps (tile_width * C / 16 threads, a power of two from 8), each lane
 * kStreamRows4 rows: tile_height a multiple of them. */
static bool conv2d_stream_tile(int C, int TW, int TH)
{
    const int lanes = TW * C / 16;
    return TW * C % 16 == 0 && lanes >= 8 && (lanes & (lanes - 1)) == 0 && TH >= kStreamRows4 &&
           TH % kStreamRows4 == 0;
}

/* kStream4's parameters: the column's weights, the row's (words 0..5),
 * then the rounding's: a scale 2^k its shift k, the bias 2^(k-1) - 1 and
 * bit k of each lane (none for k = 0); an odd scale d the multiplier
 * ceil(2^32 / d) and (d - 1) / 2 (conv2d_stream_round4). */
static int conv2d_pack_stream(const float *row, const float *column, float scale, float *out)
{
    unsigned words[16] = {0};
    for (int i = 0; i < 3; i++) {
        words[i] = (unsigned)column[i];
        words[3 + i] = (unsigned)row[i];
    }
    const unsigned d = (unsigned)scale;
    if (conv2d_power_of_two(scale)) {
        const int k = log2_of((int)d);
        words[6] = (unsigned)k;
        words[7] = k ? ((1u << (k - 1)) - 1u) * 0x10001u : 0u;
        words[8] = k ? 0x10001u : 0u;
    } else {
        words[6] = (unsigned)((0x100000000ULL + d - 1) / d);
        words[7] = (d - 1) / 2;
    }
    memcpy(out, words, sizeof words);
    return 16;
}

/* Variant, tile layout and shared bytes of a launch of versions 2 to 4; with
 * 'full' also the header, weights and grid. False when the version cannot
 * run it. */
bool conv2d_make_plan(int version, const conv2d_launch *p, conv2d_plan *pl, bool full)
{
    const int C = p->channels, K = p->mask_count, mw = p->mask_width, mh = p->mask_height;
    const int TW = p->tile_width, TH = p->tile_height;
    if (C < 1 || C > 4 || K < 1 || K > CONV2D_MAX_MATRICES || mw < 1 || mh < 1 ||
        mw > kMaxMask || mh > kMaxMask || p->width < 1 || p->height < 1)
        return false;
    pl->path = 0;  /* version 4 sets it where it picks a path */
    const conv2d_mask_facts *facts = p->host_weights ? &conv2d_facts(p) : NULL;
    const int cf = p->channels_filtered < 0 ? 0 : p->channels_filtered > C ? C : p->channels_filtered;
    const int CF = conv2d_cf_template(C, cf);
    const int CP = C == 3 ? 4 : C;
    float row[kMaxMask], column[kMaxMask];
    bool have_factors = false, prescale = false;
    bool in_range = false;  /* version 4: outputs in 0..255 (conv2d_in_range), where prescaled or odd */
    if (version == 2) {
        const bool host = p->host_weights != NULL;
        const bool fixed = host && mw == mh && ((mw == 3 && K <= 2) || ((mw == 5 || mw == 7) && K == 1));
        const bool ws = !host || K * mw * mh > kParamWeights;
        if (ws && !p->weights)
            return false;
        pl->v = conv2d_find(2, C, CF, K, fixed ? mw : 0, ws);
        if (TW < 8 || TH < 4 || TW % 8 || TH % 4)
            return false;
    } else if (version == 4) {
        /* one matrix (|v| of one matrix excepted), or a gradient pair */
        if (!p->host_weights || mw != mh ||
            (K == 1 && p->combine == GF_COMBINE_MAGNITUDE) ||
            (K == 2 && (p->combine != GF_COMBINE_MAGNITUDE || !conv2d_gradient_zeros(p, K, mw))) ||
            K > 2)
            return false;
        const unsigned zero = K == 2 ? CONV2D_GRADIENT_ZEROS : 0u;
        const bool integer = (C == 1 || C == 4) && facts->short_weights;
        have_factors = integer && K == 1 && mw >= 5 && facts->factors &&
                       conv2d_byte_weights(facts->row, mw);
        if (have_factors) {
            memcpy(row, facts->row, mw * sizeof(float));
            memcpy(column, facts->column, mh * sizeof(float));
        }
        const bool no_offset = K == 1 && p->offset[0] == 0.0f;
        const bool quick = no_offset && facts->prescalable;  /* K = 1 */
        const bool odd = no_offset && conv2d_odd_divisor(p->scale[0]);
        /* the modes of the kernels this mask can take, the most specific
         * first: outputs in 0..255, prescaled, any */
        int modes[3], nmodes = 0;
        in_range = (quick || odd) && facts->in_range;
        if (in_range)
            modes[nmodes++] = (quick ? MODE_PRESCALED_NO_OFFSET : MODE_DIV_ODD) + kInRange;
        if (quick)
            modes[nmodes++] = MODE_PRESCALED_NO_OFFSET;
        modes[nmodes++] = kModeAny;
        /* the first path that applies and has a kernel for this size,
         * layout and mode (a gradient pair in lanes before them all): running
         * sums of a box (ones both ways), separable integer with binomial
         * columns, with columns of ones (those three in range only), with
         * any column; DP4A, DP2A, float */
        const bool box = have_factors && conv2d_ones(column, mh) && conv2d_ones(row, mw);
        /* the tensor cores' kernels copy no channel byte by byte: only
         * gray, or RGBA with alpha copied or filtered */
        const bool mma = have_factors && mw >= kMmaMinMask && cf == CF &&
                         conv2d_mma_weights(row, column, mw) && conv2d_mma_device();
        /* 3x3 masks of a column times a row in range, rows of whole 16-byte
         * words: the row streams (bench/RESULTS.md) */
        const bool stream = integer && K == 1 && mw == 3 && cf == CF && facts->factors &&
                            facts->in_range && conv2d_stream_fits(p, facts, quick, odd);
        const bool stream_binomial = stream && conv2d_binomial_column(facts->row, 3) &&
                                     conv2d_binomial_column(facts->column, 3);
        const bool stream_ones = stream && conv2d_ones(facts->row, 3) && conv2d_ones(facts->column, 3);
        /* gray box masks from 11x11 on: the tensor cores before the prefix
         * sums (bench/RESULTS.md) */
        constexpr int kPaths = 13;
        const bool paths[kPaths] = {stream_binomial, stream_ones, stream,
                                    box && mma && C == 1, box, box,
                                    have_factors && conv2d_binomial_column(column, mh),
                                    have_factors && conv2d_ones(column, mh), mma, have_factors,
                                    integer && facts->byte_weights,
                                    integer, true};
        const int dps[kPaths] = {kStream4 + kStreamBinomial, kStream4 + kStreamOnes,
                                 kStream4 + kStreamAny, kMma4, kBoxScan4, kRunning4, kBinomial4,
                                 kBox4, kMma4, kSeparable4, 1, 2, 0};
        const int gradient = conv2d_gradient_kind(p, C, K, mw, mh);
        pl->v = gradient < 0 ? NULL
                             : conv2d_find(4, C, CF, K, mw, kGradient4 + gradient, zero,
                                           MODE_PRESCALED_NO_OFFSET);
        for (int i = 0; i < kPaths && !pl->v; i++)
            for (int m = 0; m < nmodes && paths[i] && !pl->v; m++) {
                pl->v = conv2d_find(4, C, CF, K, mw, dps[i], zero, modes[m]);
                pl->path = i + 1;
                if (pl->v && dps[i] == kBoxScan4 && !conv2d_scan_tile(pl->v->Q, TW, TH))
                    pl->v = NULL;  /* not blocks of whole warps: the paths below */
                if (pl->v && dps[i] == kMma4 && !conv2d_mma_tile(C, TW, TH))
                    pl->v = NULL;  /* not a tile of its: the paths below */
                if (pl->v && conv2d_stream4(dps[i]) && !conv2d_stream_tile(C, TW, TH))
                    pl->v = NULL;  /* not groups of 8, 16 or 32 lanes: the paths below */
            }
        if (!pl->v || TW % pl->v->Q || TH % pl->v->P || TW < pl->v->Q || TH < pl->v->P)
            return false;
    } else if (version == 3) {
        if (K != 1)
            return false;
        if (facts && facts->factors) {
            memcpy(row, facts->row, mw * sizeof(float));
            memcpy(column, facts->column, mh * sizeof(float));
            have_factors = true;
        } else if (p->host_row_weights && p->host_column_weights) {
            for (int x = 0; x < mw; x++)
                row[x] = p->host_row_weights[x];
            for (int y = 0; y < mh; y++)
                column[y] = p->host_column_weights[y];
            have_factors = true;
        } else if (!p->row_weights || !p->column_weights) {
            return false;
        }
        pl->v = conv2d_find(3, C, CF, 1, 0, !have_factors);
        if (TW < 8 || TH < 8 || TW % 8 || TH % 8)
            return false;
    } else {
        return false;
    }
    if (!pl->v)
        return false;
    const int P = pl->v->P, Q = pl->v->Q;
    const bool mma = version == 4 && pl->v->ws == kMma4;  /* blocks of 256 whatever the tile */
    const bool row_streams = version == 4 && conv2d_stream4(pl->v->ws);  /* blocks of up to 1024 */
    const int nx = TW / Q, ny = TH / P;
    const int threads = mma ? kMaxThreads : version == 3 ? TW * (TH / 8) : nx * ny;
    if (threads < 1 || threads > (row_streams ? kStreamMaxThreads : kMaxThreads))
        return false;
    pl->block = mma ? dim3(kMaxThreads) : version == 3 ? dim3(TW, TH / 8) : dim3(nx, ny);

    fast_header &h = pl->h;
    memset(&h, 0, sizeof h);
    const int L = TW + mw - 1, R = TH + mh - 1;
    h.lq = (L + Q - 1) / Q;
    if (mma) {
        pl->shared = conv2d_mma_shared(C, mw, TW, TH);
    } else if (row_streams || (version == 4 && pl->v->ws == kBoxScan4)) {
        /* registers and shuffles only */
        pl->shared = 0;
    } else if (version == 4) {  /* each thread's ring of rows */
        pl->shared = (size_t)threads * conv2d_ring_slots4(mw, pl->v->ws) *
                     conv2d_slot_bytes4(C, Q, mw, pl->v->ws);
    } else if (version == 2) {
        h.rs = conv2d_row_stride(Q * h.lq, nx, P, threads, CP);
        pl->shared = (pl->v->ws ? (size_t)((K * mw * mh + 3) & ~3) * sizeof(float) : 0) +
                     (size_t)R * h.rs * CP * sizeof(float);
    } else {
        h.rs = conv2d_row_stride(Q * h.lq, TW / 8, 1, threads, CP);
        h.hrs = conv2d_ring_stride(TW, threads, CP);
        pl->shared = (pl->v->ws ? 64 * sizeof(float) : 0) +
                     ((size_t)TH * h.rs + (size_t)R * h.hrs) * CP * sizeof(float);
    }
    if (!full)
        return true;

    h.src = p->src;
    h.dst = p->dst;
    h.wdev = p->weights;
    h.rowdev = p->row_weights;
    h.coldev = p->column_weights;
    h.width = p->width;
    h.height = p->height;
    h.border = p->border;
    h.mw = mw;
    h.mh = mh;
    h.cf = cf;
    h.tw = TW;
    h.th = TH;
    h.flat = ((uintptr_t)p->src & 3) == 0;
    h.vec = (((uintptr_t)p->src | (uintptr_t)p->dst) & 15) == 0;
    {   /* version 4's fast path: its loads aligned in every row */
        const int own = version == 4 ? pl->v->Q * C : 16;
        const size_t align = own % 16 == 0 ? 16 : own % 8 == 0 ? 8 : 4;
        h.aligned = (uintptr_t)p->src % align == 0 && (size_t)p->width * C % align == 0;
    }
    {
        const long long row_bytes = (long long)p->width * C, tail = (64 + row_bytes - 1) / row_bytes;
        h.safe_rows = p->height - (int)(tail < p->height ? tail : p->height);
    }
    float inv[CONV2D_MAX_MATRICES];
    for (int k = 0; k < K; k++) {
        h.scale[k] = p->scale[k];
        h.offset[k] = p->offset[k];
        inv[k] = 1.0f / p->scale[k];  /* exact for the powers of two it is used for */
        h.rcp[k] = facts && facts->div_range[k] ? inv[k] : 0.0f;
    }
    switch (p->combine) {
    case GF_COMBINE_MAGNITUDE: h.comb = COMB_MAG; break;
    case GF_COMBINE_MAX:       h.comb = K > 1 ? COMB_MAX : COMB_SUM; break;
    case GF_COMBINE_MIN:       h.comb = K > 1 ? COMB_MIN : COMB_SUM; break;
    default:                   h.comb = COMB_SUM; break;
    }

    /* weights by value; a scale that is a power of two folded in (exact:
     * every partial sum scales by the same power of two, far from
     * underflow and overflow for weights between 2^-100 and 2^100) */
    h.mode = MODE_DIV;
    pl->nw = 0;
    if (version == 4 && pl->v->ws) {
        prescale = facts->prescalable;
        pl->nw = mma ? conv2d_pack_mma(row, column, mw, pl->w)
                 : row_streams ? conv2d_pack_stream(facts->row, facts->column, p->scale[0], pl->w)
                 : conv2d_separable4(pl->v->ws) ? conv2d_pack_separable(row, column, mw, pl->w)
                                                : conv2d_pack_weights(p->host_weights, K, mw, pl->v->ws, pl->w);
    } else if ((version == 2 || version == 4) && !pl->v->ws) {
        const int taps = mw * mh;
        prescale = facts->prescalable;
        for (int k = 0; k < K; k++)
            for (int i = 0; i < taps; i++)
                pl->w[k * taps + i] = p->host_weights[k * taps + i] * (prescale ? inv[k] : 1.0f);
        pl->nw = K * taps;
    } else if (version == 3 && have_factors) {
        prescale = conv2d_power_of_two(p->scale[0]);
        for (int y = 0; y < mh && prescale; y++) {
            const float c = column[y] * inv[0];
            prescale = c == 0.0f || (fabsf(c) > 0x1p-100f && fabsf(c) < 0x1p100f);
        }
        for (int i = 0; i < 64; i++)
            pl->w[i] = 0.0f;
        for (int x = 0; x < mw; x++)
            pl->w[x] = row[x];
        for (int y = 0; y < mh; y++)
            pl->w[32 + y] = column[y] * (prescale ? inv[0] : 1.0f);
        pl->nw = 64;
    }
    if (prescale) {
        bool offsets = false;
        for (int k = 0; k < K; k++)
            offsets = offsets || p->offset[k] != 0.0f;
        h.mode = offsets ? MODE_PRESCALED : MODE_PRESCALED_NO_OFFSET;
    } else if ((version == 4 && pl->v->ws == CONV2D_DP4A && K == 1 && mw == 3 && mh == 3 &&
                p->offset[0] == 0.0f && conv2d_odd_divisor(p->scale[0])) ||
               (version == 4 && (pl->v->ws == kBox4 || pl->v->ws == kRunning4 ||
                                 pl->v->ws == kBoxScan4)) ||
               (mma && in_range && 255.0f * p->scale[0] < 4194304.0f)) {
        /* box3, box5..31: one FFMA per output instead of a division; on
         * the tensor cores in range and not prescaled means an odd divisor
         * d (conv2d_odd_divisor), whose sums (at most 255 d) must stay
         * below 2^22 */
        h.mode = MODE_DIV_ODD;
    }
    /* the tensor cores' kernels (kModeAny) take the finish without a clamp
     * from the header */
    if (mma && (h.mode == MODE_PRESCALED_NO_OFFSET || h.mode == MODE_DIV_ODD) && in_range)
        h.mode += kInRange;

    const long long grid_x = (p->width + TW - 1) / TW, tiles_y = (p->height + TH - 1) / TH;
    if (version == 4 && pl->v->ws == kBoxScan4)
        return conv2d_scan_grid4(p, pl, threads);
    if (mma)
        return conv2d_mma_grid(p, pl, threads);
    if (row_streams) {  /* a tile a block */
        h.steps = 1;
        h.edge_rows = h.edge_cols = h.edge_left = h.edge_right0 = 0;
        pl->grid = dim3((unsigned)grid_x, (unsigned)tiles_y);
        return grid_x <= 0x7FFFFFFF && tiles_y <= 65535;
    }
    if (version == 4)
        return conv2d_strips4(p, pl, grid_x, tiles_y, threads);
    /* a block walks down ~256 rows, unless that leaves too few blocks; a
     * tile a block where the SMs cannot be counted (right on any device) */
    int dev = 0, sms = 0;
    long long steps = 256 / TH < 1 ? 1 : 256 / TH;
    if (steps > tiles_y)
        steps = tiles_y;
    if (!conv2d_device_sms(&dev, &sms))
        steps = 1;
    while (steps > 1 && grid_x * ((tiles_y + steps - 1) / steps) < 16LL * sms)
        steps--;
    if ((tiles_y + steps - 1) / steps > 65535)
        steps = (tiles_y + 65534) / 65535;
    h.steps = (int)steps;
    pl->grid = dim3((unsigned)grid_x, (unsigned)((tiles_y + steps - 1) / steps));
    return true;
}

}  /* namespace */

extern "C" const char *conv2d_version_name(int version)
{
    static const char *const names[CONV2D_VERSIONS] = {"naive", "tiled", "blocked", "separable",
                                                       "direct"};
    return version >= 0 && version < CONV2D_VERSIONS ? names[version] : NULL;
}

extern "C" int conv2d_supports(int version, const conv2d_launch *p)
{
    if (version == 0 || version == 1)
        return p->channels >= 1 && p->channels <= 4;
    conv2d_plan pl;
    return conv2d_make_plan(version, p, &pl, false);
}

extern "C" int conv2d_direct_integer(const conv2d_launch *p)
{
    conv2d_plan pl;
    if (!conv2d_make_plan(4, p, &pl, false))
        return 0;
    return conv2d_separable4(pl.v->ws) || pl.v->ws == kRunning4 || pl.v->ws == kBoxScan4 ||
                   pl.v->ws == kMma4 || conv2d_stream4(pl.v->ws)
               ? CONV2D_SEPARABLE_INTEGER
           : conv2d_gradient4(pl.v->ws) ? CONV2D_GRADIENT_LANES
                                        : pl.v->ws;
}

extern "C" const char *conv2d_direct_path(const conv2d_launch *p)
{
    conv2d_plan pl;
    if (!conv2d_make_plan(4, p, &pl, false))
        return NULL;
    const bool in_range = pl.v->mode != kModeAny && (pl.v->mode & kInRange);
    switch (pl.v->ws) {
    case CONV2D_DP4A:  return in_range ? "DP4A, no clamp" : "DP4A";
    case CONV2D_DP2A:  return "DP2A";
    case kSeparable4:  return "separable integer";
    case kBinomial4:   return "separable integer, binomial column, no clamp";
    case kBox4:        return "separable integer, column of ones, no clamp";
    case kBoxScan4:    return "box, prefix sums across a warp, no clamp";
    case kMma4:        return "separable integer, tensor cores";
    case kStream4 + kStreamBinomial:
    case kStream4 + kStreamOnes:
    case kStream4 + kStreamAny:
        return "separable integer, row streams in 16-bit lanes, no clamp";
    case kRunning4:
        return pl.v->MW > 15 ? "box, running sums, rows in 16-bit lanes, no clamp"
                             : "box, running sums in 16-bit lanes, no clamp";
    case 0:            return "float";
    default:           return "gradient pair, 16-bit lanes";
    }
}

extern "C" int conv2d_path_rank(int version, const conv2d_launch *p)
{
    conv2d_plan pl;
    if (version < 2 || !conv2d_make_plan(version, p, &pl, false))
        return 0;
    return pl.path;
}

/* The tensor-core path on RGBA: the tallest tile of the rule's width, up to
 * 128 rows, that still holds two blocks an SM, whose row pass then sums
 * fewer halo rows, (TH + M - 1) / TH rounded up to 16 rows: 15x15 at 64x96
 * ran 4-6% faster than the rule's 64x64, in three runs; 64x128 (one block
 * an SM) 34% slower. RGBA's interleaved row pass takes 3 to 5 products a
 * step against gray's 2, so its halo rows cost the most: on gray no taller
 * tile was faster in every run (bench/RESULTS.md). From
 * 27x27 on, the row pass on planes holds two blocks an SM at any tile, so
 * the rule's tile stays (31x31: 64x64, as fast as 32x128 there,
 * twenty-seventh round). Returns the height, or 0. */
static int conv2d_mma_preferred_height(int version, const conv2d_launch *p, const conv2d_plan &pl)
{
    int dev = 0, sms = 0;
    if (!conv2d_device_sms(&dev, &sms))
        return 0;
    for (int th = 128; th > p->tile_height; th -= 16) {
        conv2d_launch q = *p;
        q.tile_height = th;
        conv2d_plan taller;
        if (conv2d_make_plan(version, &q, &taller, false) && taller.v == pl.v &&
            conv2d_resident_blocks(taller, (int)(taller.block.x * taller.block.y)) >= 2LL * sms)
            return th;
    }
    return 0;
}

/* RGBA row streams: one band of 128 lanes a block (512x8), which ran
 * 1.0-1.7% faster than 128x64 (32 lanes, 8 bands) in nine side-by-side
 * runs of 4096 to 16384 rows, and 3% faster than 256x64 (64 lanes, 8
 * bands, 512 threads), the occupancy rule's own tile since the streams
 * take blocks of up to 1024 threads (bench/RESULTS.md); gray showed no steady
 * difference between the shapes. The tensor cores on RGBA: taller tiles
 * (conv2d_mma_preferred_height). */
extern "C" int conv2d_preferred_tile(int version, const conv2d_launch *p, int *width, int *height)
{
    conv2d_plan pl, preferred;
    if (version != 4 || p->channels != 4 || !conv2d_make_plan(version, p, &pl, false) || !pl.v)
        return 0;
    if (pl.v->ws == kMma4) {
        const int th = conv2d_mma_preferred_height(version, p, pl);
        if (th == 0)
            return 0;
        *width = p->tile_width;
        *height = th;
        return 1;
    }
    if (!conv2d_stream4(pl.v->ws))
        return 0;
    conv2d_launch q = *p;
    q.tile_width = 512;  /* 128 lanes of 16 bytes */
    q.tile_height = kStreamRows4;
    if (!conv2d_make_plan(version, &q, &preferred, false) || preferred.v != pl.v)
        return 0;  /* not the same kernel at that tile */
    *width = q.tile_width;
    *height = q.tile_height;
    return 1;
}

extern "C" size_t conv2d_scratch_bytes(int version, const conv2d_launch *p)
{
    (void)version;
    (void)p;
    return 0;
}

extern "C" size_t conv2d_shared_bytes(int version, const conv2d_launch *p)
{
    if (version == 0)
        return 0;
    if (version == 1) {
        size_t tile = (size_t)(p->tile_width + p->mask_width - 1) *
                      (size_t)(p->tile_height + p->mask_height - 1) * (size_t)p->channels;
        return conv2d_weight_bytes(*p) + tile;
    }
    conv2d_plan pl;
    return conv2d_make_plan(version, p, &pl, false) ? pl.shared : 0;
}

extern "C" int conv2d_block_threads(int version, const conv2d_launch *p)
{
    if (version == 0 || version == 1)
        return p->tile_width * p->tile_height;
    conv2d_plan pl;
    if (!conv2d_make_plan(version, p, &pl, false))
        return 0;
    return (int)(pl.block.x * pl.block.y);
}

extern "C" const void *conv2d_kernel_entry(int version, int channels)
{
    if (version >= 2) {
        const conv2d_variant *v = channels >= 1 && channels <= 4
                                      ? conv2d_find(version, channels, channels, 1,
                                                    version == 4 ? 3 : 0, 0)
                                      : NULL;
        return v ? v->entry : NULL;
    }
    return (const void *)conv2d_entry_for(version, channels);
}

extern "C" const void *conv2d_kernel_for(int version, const conv2d_launch *p)
{
    if (version >= 2) {
        conv2d_plan pl;
        return conv2d_make_plan(version, p, &pl, false) ? pl.v->entry : NULL;
    }
    return (const void *)conv2d_entry_for(version, p->channels);
}

extern "C" cudaError_t conv2d_gpu(int version, const conv2d_launch *p, cudaStream_t stream)
{
    if (version >= 2) {
        conv2d_plan pl;
        if (!conv2d_make_plan(version, p, &pl, true))
            return cudaErrorInvalidValue;
        return pl.v->run(pl, stream);
    }
    conv2d_entry entry = conv2d_entry_for(version, p->channels);
    if (!entry || p->mask_count < 1 || p->mask_count > CONV2D_MAX_MATRICES)
        return cudaErrorInvalidValue;
    const dim3 block(p->tile_width, p->tile_height);
    const dim3 grid((p->width + p->tile_width - 1) / p->tile_width,
                    (p->height + p->tile_height - 1) / p->tile_height);
    return conv2d_start(entry, grid, block, conv2d_shared_bytes(version, p), stream, *p);
}

extern "C" void conv2d_grid(int version, const conv2d_launch *p, unsigned *x, unsigned *y,
                            int *steps)
{
    *x = *y = 0;
    if (steps)
        *steps = 0;
    if (version >= 2) {
        conv2d_plan pl;
        if (conv2d_make_plan(version, p, &pl, true)) {
            *x = pl.grid.x;
            *y = pl.grid.y;
            if (steps)  /* the prefix sums' h.steps counts rows */
                *steps = version == 4 && pl.v->ws == kBoxScan4 ? pl.h.steps / kScanRows4
                                                               : pl.h.steps;
        }
        return;
    }
    if (p->tile_width > 0 && p->tile_height > 0) {
        *x = (unsigned)((p->width + p->tile_width - 1) / p->tile_width);
        *y = (unsigned)((p->height + p->tile_height - 1) / p->tile_height);
        if (steps)
            *steps = 1;
    }
}
