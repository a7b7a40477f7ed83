/* memory.c - what lab holds in device memory (memory.h): the default pool's and the scratch pool's
 * counters, read on the device asked for, and lab.Array allocations counted as they happen. */
#include "dispatch/memory.h"

#include <stdatomic.h>
#include <stdio.h>

#include "dispatch/device.h"

static _Atomic uint64_t allocations[LAB_MAX_DEVICES], frees[LAB_MAX_DEVICES];

void lab_count_array_memory(int device, int taken) {
    if (device < 0 || device >= LAB_MAX_DEVICES) return;
    atomic_fetch_add_explicit(taken ? &allocations[device] : &frees[device], 1, memory_order_relaxed);
}

typedef struct {
    lab_memory_usage *usage;
    int reset, trim;
} usage_request;

/* A pool's counters (all 0 for no pool), after setting its peaks back to the current values (reset)
 * and giving its unused memory back to the device (trim). */
static cudaError_t pool_usage(cudaMemPool_t pool, lab_pool_usage *usage, int reset, int trim) {
    *usage = (lab_pool_usage){0};
    if (!pool) return cudaSuccess;
    uint64_t zero = 0;
    cudaError_t err = cudaSuccess;
    const enum cudaMemPoolAttr peaks[] = {cudaMemPoolAttrUsedMemHigh, cudaMemPoolAttrReservedMemHigh};
    for (size_t i = 0; reset && i < 2 && err == cudaSuccess; i++) {
        err = cudaMemPoolSetAttribute(pool, peaks[i], &zero); /* 0: back to the current value */
    }
    if (trim && err == cudaSuccess) err = cudaMemPoolTrimTo(pool, 0);
    const struct {
        enum cudaMemPoolAttr attribute;
        uint64_t *value;
    } reads[] = {{cudaMemPoolAttrUsedMemCurrent, &usage->used},
                 {cudaMemPoolAttrUsedMemHigh, &usage->used_peak},
                 {cudaMemPoolAttrReservedMemCurrent, &usage->reserved},
                 {cudaMemPoolAttrReservedMemHigh, &usage->reserved_peak}};
    for (size_t i = 0; i < sizeof(reads) / sizeof(reads[0]) && err == cudaSuccess; i++) {
        err = cudaMemPoolGetAttribute(pool, reads[i].attribute, reads[i].value);
    }
    return err;
}

static cudaError_t read_usage(void *context) {
    usage_request *request = context;
    lab_memory_usage *usage = request->usage;
    int device = 0;
    /* memory freed on a stream returns to its pool only when the stream reaches the free */
    cudaError_t err = request->trim ? cudaDeviceSynchronize() : cudaSuccess;
    /* lab.Arrays come from the device's default pool (torch and CuPy keep pools of their own) */
    cudaMemPool_t arrays = NULL, scratch = NULL;
    if (err == cudaSuccess) err = cudaGetDevice(&device);
    if (err == cudaSuccess) err = cudaDeviceGetDefaultMemPool(&arrays, device);
    if (err == cudaSuccess) err = lab_scratch_pool(&scratch);
    if (err == cudaSuccess) err = pool_usage(arrays, &usage->arrays, request->reset, request->trim);
    if (err == cudaSuccess) err = pool_usage(scratch, &usage->scratch, request->reset, request->trim);
    if (err == cudaSuccess) err = cudaMemGetInfo(&usage->device_free, &usage->device_total);
    if (err == cudaSuccess && device < LAB_MAX_DEVICES) {
        usage->array_allocations = atomic_load_explicit(&allocations[device], memory_order_relaxed);
        usage->array_frees = atomic_load_explicit(&frees[device], memory_order_relaxed);
    }
    return err;
}

cudaError_t lab_memory_usage_of(int device, lab_memory_usage *usage, int reset, int trim) {
    *usage = (lab_memory_usage){0};
    usage_request request = {usage, reset, trim};
    return lab_with_device(device, read_usage, &request);
}

void lab_memory_report(char *buf, size_t size) {
    lab_memory_usage usage;
    buf[0] = '\0';
    if (lab_memory_usage_of(-1, &usage, 0, 0) != cudaSuccess) {
        (void)cudaGetLastError(); /* the report is a courtesy: its own failure must not linger */
        return;
    }
    const double mib = 1024.0 * 1024.0;
    snprintf(buf, size,
             "; lab holds %.1f MiB in lab.Arrays (its pool reserves %.1f MiB) and %.1f MiB of kernel "
             "scratch (%.1f MiB reserved); the device has %.1f MiB free of %.1f MiB. Free arrays no longer "
             "needed, give lab's cached memory back with lab.empty_cache(), or use smaller inputs",
             usage.arrays.used / mib, usage.arrays.reserved / mib, usage.scratch.used / mib,
             usage.scratch.reserved / mib, usage.device_free / mib, usage.device_total / mib);
}
