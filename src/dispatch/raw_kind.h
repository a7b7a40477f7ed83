/* raw_kind.h - the runtime-compiled kernel op kind: a user's kernel (lab.RawKernel), launched with
 * the arguments the binding marshalled (level 3, between binding/raw_kernel.c and the CUDA runtime).
 *
 * The kernel is a cudaKernel_t from a library loaded with cudaLibraryLoadData; the runtime launches
 * it with cudaLaunchKernel like any kernel of lab's own. Everything else - the devices the arrays
 * are on, the stream policy (`stream=`, `with lab.stream`, the producer's stream, events for other
 * streams), graph capture, lab.CudaError naming the kernel - is the op driver's, as for every op. */
#ifndef LAB_RAW_KIND_H
#define LAB_RAW_KIND_H

#include "dispatch/driver.h"

typedef struct {
    const void *kernel; /* a cudaKernel_t */
    unsigned int grid[3], block[3];
    size_t shared_mem;
    void **argv;    /* one pointer per kernel parameter, to its bytes */
    char step[160]; /* "launching kernel 'name'": what a lab.CudaError says failed */
} lab_raw_call;

extern const lab_op_kind lab_raw_kind;

#endif
