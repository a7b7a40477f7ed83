/* device.c - device checks and selection for launches (see device.h). */
#include "dispatch/device.h"

#include "dispatch/failure.h"

int lab_check_same_device(const lab_operand_group *groups, int n_groups, const char *func) {
    const lab_array *first = NULL;
    const char *first_name = NULL;
    int first_index = -1;
    for (int g = 0; g < n_groups; g++) {
        for (int i = 0; i < groups[g].count; i++) {
            const lab_array *a = &groups[g].arrays[i];
            if (a->device < 0) continue;
            if (!first) {
                first = a;
                first_name = groups[g].name;
                first_index = groups[g].is_list ? i : -1;
            } else if (a->device != first->device) {
                char name[80], other[80];
                lab_indexed_name(name, sizeof name, groups[g].name, groups[g].is_list ? i : -1);
                lab_indexed_name(other, sizeof other, first_name, first_index);
                lab_fail(LAB_FAILURE_VALUE,
                         "%s(): argument '%s' is on cuda:%d but '%s' is on cuda:%d; all operands "
                         "must be on one device",
                         func, name, a->device, other, first->device);
                return -1;
            }
        }
    }
    return 0;
}

/* The memory check below asks the driver once per 2 MiB page: device allocations are mapped in
 * 2 MiB-granular virtual ranges that never also hold host memory, so one answer serves every array
 * in the page, and the per-call cost on a hit is one table lookup. Entries are (page << 8) |
 * (device + 1); 0 is empty. A page is cached only when it holds device or managed memory. */
#define PAGE_SHIFT 21

static uintptr_t *page_slot(lab_dispatch_state *state, uintptr_t page) {
    return &state->device_pages[(page ^ (page >> 12)) & (LAB_DEVICE_PAGE_SLOTS - 1)];
}

static int refuse_unreachable(lab_dispatch_state *state, const lab_array *array, const char *argname,
                              const char *func) {
    int device = 0, pageable = 0;
    cudaError_t err = cudaGetDevice(&device);
    if (err == cudaSuccess) err = cudaDeviceGetAttribute(&pageable, cudaDevAttrPageableMemoryAccess, device);
    if (err != cudaSuccess) {
        lab_fail_cuda(err, func, "checking whether the GPU can read host memory");
        return -1;
    }
    if (pageable) return 0; /* HMM/ATS: the GPU reads pageable host memory itself */
    lab_fail(
        LAB_FAILURE_VALUE,
        "%s(): argument '%s' points to memory the GPU cannot access (address %p is not "
        "device, managed or page-locked host memory; its __cuda_array_interface__ 'data' must be a device "
        "pointer)",
        func, argname, (void *)array->data);
    return -1;
}

int lab_locate_array(lab_dispatch_state *state, lab_array *array, const char *name, int index,
                     const char *func) {
    if (array->device >= 0 || array->numel == 0) return 0; /* the protocol said where; or nothing is read */
    const uintptr_t page = (uintptr_t)array->data >> PAGE_SHIFT;
    uintptr_t *slot = page_slot(state, page);
    /* atomic: XLA's threads run ops without the GIL, beside Python threads (a whole word either way) */
    const uintptr_t entry = __atomic_load_n(slot, __ATOMIC_RELAXED);
    if (entry != 0 && entry >> 8 == page) {
        array->device = (int)(entry & 0xff) - 1;
        return 0;
    }
    char argname[80];
    lab_indexed_name(argname, sizeof argname, name, index);
    struct cudaPointerAttributes attributes;
    cudaError_t err = cudaPointerGetAttributes(&attributes, array->data);
    if (err != cudaSuccess) {
        char step[128];
        snprintf(step, sizeof step, "locating the memory of argument '%s'", argname);
        lab_fail_cuda(err, func, step);
        return -1;
    }
    switch (attributes.type) {
    case cudaMemoryTypeDevice:
    case cudaMemoryTypeManaged:
        array->device = attributes.device;
        if (attributes.device >= 0 && attributes.device < 255) {
            __atomic_store_n(slot, (page << 8) | (uintptr_t)(attributes.device + 1), __ATOMIC_RELAXED);
        }
        return 0;
    case cudaMemoryTypeHost: /* page-locked host memory: mapped into the device's address space */
        return attributes.devicePointer ? 0 : refuse_unreachable(state, array, argname, func);
    default: /* cudaMemoryTypeUnregistered: ordinary host memory, or an address nobody mapped */
        return refuse_unreachable(state, array, argname, func);
    }
}

int lab_locate_memory(lab_dispatch_state *state, lab_operand_group *groups, int n_groups, const char *func) {
    for (int g = 0; g < n_groups; g++)
        for (int i = 0; i < groups[g].count; i++)
            if (lab_locate_array(state, &groups[g].arrays[i], groups[g].name, groups[g].is_list ? i : -1,
                                 func) < 0) {
                return -1;
            }
    return 0;
}

cudaError_t lab_select_device(const lab_array *const *arrays, int n, int *target, int *current) {
    cudaError_t err = cudaGetDevice(current);
    if (err != cudaSuccess) return err;
    *target = *current; /* only page-locked host memory: any device reaches it */
    for (int i = 0; i < n; i++) {
        if (arrays[i]->device >= 0) {
            *target = arrays[i]->device;
            break;
        }
    }
    return cudaSuccess;
}

cudaError_t lab_with_device(int device, cudaError_t (*call)(void *context), void *context) {
    int current = 0;
    cudaError_t err = cudaGetDevice(&current);
    if (err != cudaSuccess) return err;
    if (device < 0 || device == current) return call(context);
    if ((err = cudaSetDevice(device)) != cudaSuccess) return err;
    err = call(context);
    cudaError_t restore = cudaSetDevice(current);
    return err != cudaSuccess ? err : restore;
}
