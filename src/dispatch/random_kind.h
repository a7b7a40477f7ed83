/* random_kind.h - the random-number op kind: fills one C-contiguous float array (float16, bfloat16,
 * float32 or float64) from a distribution, or an array of any lab dtype with integers from a range,
 * with the device's generator state (level 3, between binding/random.c and kernels/random.cu).
 *
 * The plan checks, before any CUDA call: the output writable, of a float dtype (for randint any
 * dtype whose values hold the range), C-contiguous (each
 * element's number is a function of its index, and a view's elements are not consecutive indices);
 * dropout's x and residual of the output's shape, dtype and contiguity, its mask uint8 of the
 * same shape, C-contiguous and writable, sharing memory with no other operand (the output may be x
 * or residual itself: in place).
 * The launch takes the launch device's (seed, offset) - or the state the call names, for a dropout's
 * backward, which then advances nothing - and advances the offset past the groups it used, so the next call
 * draws new numbers and the same seed gives the same numbers again, on any GPU and for any grid.
 * Inside a lab.Graph's capture the numbers come from the state each replay writes (dispatch_state.h,
 * lab_random_capture), and so does a given rng_state drawn in the same capture; a draw from the
 * generator inside any other capture is refused (each replay would repeat its numbers). */
#ifndef LAB_RANDOM_KIND_H
#define LAB_RANDOM_KIND_H

#include "dispatch/driver.h"
#include "kernels/launch.h"

typedef struct {
    lab_array *out;
    lab_array *x, *residual, *mask;     /* dropout's (residual and mask optional); NULL for the fills */
    const char *x_name;                 /* "x", or the backward's name for it */
    lab_random_generator *generators;   /* the module's, one per device */
    const lab_random_capture *captures; /* the module's lab.Graph captures, one per device */
    int explicit_state;                 /* rng_state given: launch.seed/offset hold it, nothing advances */
    lab_random_launch launch;
} lab_random_call;

/* Adds the call's arrays to the op call, the written ones first. */
void lab_random_add_operands(lab_op_call *call, lab_random_call *c);

extern const lab_op_kind lab_random_kind;

#endif
