/* plan_fake_device.c - the CUDA runtime calls the conv2d planner makes,
 * answered as an H100 would (132 SMs, 228 KB of shared memory an SM, 2048
 * threads), for tools/plan_dump.cu on a machine without a GPU. A kernel's
 * registers are a fixed function of its place in the instantiation table,
 * so that occupancy varies between kernels and is the same on every run.
 * Linked ahead of libcudart, these definitions take the place of its own. */
#include <string.h>

#include <cuda_runtime_api.h>

int plan_dump_variant_index(const void *entry);  /* plan_dump.cu */

int plan_dump_queries_fail = 0;  /* every query fails: the planner's fallbacks */

cudaError_t cudaGetDevice(int *device)
{
    *device = 0;
    return plan_dump_queries_fail ? cudaErrorNoDevice : cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device)
{
    (void)device;
    if (plan_dump_queries_fail)
        return cudaErrorNoDevice;
    switch (attr) {
    case cudaDevAttrMultiProcessorCount: *value = 132; break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = 232448; break;
    case cudaDevAttrMaxSharedMemoryPerMultiprocessor: *value = 233472; break;
    case cudaDevAttrMaxThreadsPerMultiProcessor: *value = 2048; break;
    case cudaDevAttrComputeCapabilityMajor: *value = 9; break;
    case cudaDevAttrComputeCapabilityMinor: *value = 0; break;
    default: *value = 1; break;
    }
    return cudaSuccess;
}

static int registers_of(const void *entry)
{
    const int i = plan_dump_variant_index(entry);
    return i < 0 ? 64 : 40 + (i * 37) % 90;
}

cudaError_t cudaFuncGetAttributes(struct cudaFuncAttributes *attr, const void *entry)
{
    if (plan_dump_queries_fail)
        return cudaErrorNoDevice;
    memset(attr, 0, sizeof *attr);
    attr->numRegs = registers_of(entry);
    attr->maxThreadsPerBlock = 1024;
    attr->ptxVersion = 90;
    attr->binaryVersion = 90;
    return cudaSuccess;
}

cudaError_t cudaFuncSetAttribute(const void *entry, enum cudaFuncAttribute attr, int value)
{
    (void)entry, (void)attr, (void)value;
    return cudaSuccess;
}

cudaError_t cudaGetLastError(void)
{
    return cudaSuccess;
}

cudaError_t cudaPeekAtLastError(void)
{
    return cudaSuccess;
}

/* Blocks an SM holds: the least of what registers (allocated per warp in
 * units of 256), threads and shared memory (1 KB reserved a block) allow,
 * at most 32. */
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *blocks, const void *entry, int threads,
                                                          size_t shared)
{
    if (plan_dump_queries_fail)
        return cudaErrorNoDevice;
    const int warps = (threads + 31) / 32;
    const int by_registers = 65536 / (((registers_of(entry) * 32 + 255) / 256) * 256 * warps);
    const int by_threads = 2048 / (warps * 32);
    const int by_shared = shared ? (int)(233472 / (shared + 1024)) : 32;
    int b = by_registers < by_threads ? by_registers : by_threads;
    b = b < by_shared ? b : by_shared;
    *blocks = b < 32 ? b : 32;
    return cudaSuccess;
}
