/* memory.h - what lab holds in device memory: the arrays' pool (the device's default pool, which
 * lab.empty/zeros allocate from with cudaMallocAsync) and the kernels' scratch pool, counted for
 * lab.memory_stats and reported when an allocation fails (docs/api.md, "Memory"). */
#ifndef LAB_MEMORY_H
#define LAB_MEMORY_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "kernels/launch.h" /* lab_scratch_pool */

/* One pool's bytes in use and held, now and at their peaks. */
typedef struct {
    uint64_t used, used_peak, reserved, reserved_peak;
} lab_pool_usage;

typedef struct {
    lab_pool_usage arrays, scratch;          /* bytes, now and at their peaks */
    uint64_t array_allocations, array_frees; /* lab.Arrays of nonzero size, in this process */
    size_t device_free, device_total;        /* cudaMemGetInfo */
} lab_memory_usage;

/* Fills `usage` for `device` (-1: the current one). `reset` first sets both pools' peaks back to
 * their current values; `trim` first waits for the device and gives both pools' unused memory back
 * to it (lab.empty_cache). */
cudaError_t lab_memory_usage_of(int device, lab_memory_usage *usage, int reset, int trim);

/* Counts a lab.Array's memory taken or given back on `device` (the figures memory_stats shows). */
void lab_count_array_memory(int device, int taken);

/* "lab holds ... ; the device has ... free of ..." for the current device, into buf: what an
 * out-of-memory error adds to its message. Empty where even that cannot be read. */
void lab_memory_report(char *buf, size_t size);

#endif
