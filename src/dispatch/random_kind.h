/* random_kind.h - the random-number op kind: fills one C-contiguous float array (float16, bfloat16,
 * float32 or float64) from a distribution, with the device's generator state (level 3, between
 * binding/random.c and kernels/random.cu).
 *
 * The plan checks, before any CUDA call: the output writable, of a float dtype, C-contiguous (each
 * element's number is a function of its index, and a view's elements are not consecutive indices).
 * The launch takes the launch device's (seed, offset) and advances the offset past the groups it
 * used, so the next call draws new numbers and the same seed gives the same numbers again, on any
 * GPU and for any grid. */
#ifndef LAB_RANDOM_KIND_H
#define LAB_RANDOM_KIND_H

#include "dispatch/driver.h"
#include "kernels/launch.h"

typedef struct {
    lab_array *out;
    lab_random_generator *generators; /* the module's, one per device */
    lab_random_launch launch;
} lab_random_call;

extern const lab_op_kind lab_random_kind;

#endif
