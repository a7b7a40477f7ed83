/* iterator.h - lab's TensorIterator: from the operands of one call to the iteration space a kernel
 * walks (level 3). Every op kind that walks arrays element by element plans on top of it: the
 * elementwise kind (elementwise_kind.c), and reductions, which mark the dimensions they reduce.
 *
 * lab_iterate() checks each output is writable, never writes one element twice and shares no
 * memory with another output, broadcasts the inputs (NumPy's rules) against the outputs' shape,
 * refuses inputs that partially overlap an output, then
 * simplifies the iteration space: drop size-1 dimensions, flip dimensions the output walks
 * backwards, order dimensions outermost first by the operands' strides, and merge neighbours that
 * are contiguous with each other - never a kept dimension with a reduced one. No CUDA call;
 * everything here runs (and is tested, through lab.lab._iterate) on machines without a GPU. */
#ifndef LAB_ITERATOR_H
#define LAB_ITERATOR_H

#include "dispatch/operand.h"

/* The most operands one iteration walks: lab's own ops take at most LAB_MAX_OPERANDS, a
 * lab.ElementwiseKernel up to this many arrays (and its position counter). */
#define LAB_ITER_MAX_OPERANDS (LAB_MAX_GROUPS + 1)

/* Operands of one call: the outputs first (the first decides device and stream), then the array
 * inputs. n_outputs 0 means 1: lab's own ops write one array; a lab.ElementwiseKernel may write
 * several, all of the first one's shape. */
typedef struct {
    lab_array arrays[LAB_ITER_MAX_OPERANDS];
    const char *names[LAB_ITER_MAX_OPERANDS];
    int count;
    int n_outputs;
} lab_operands;

/* The simplified iteration space: dimensions outermost first, strides in bytes per operand (in the
 * order of lab_operands; 0 where an operand is broadcast, and for the output along reduced
 * dimensions), data pointers moved to the first element walked. */
typedef struct {
    int ndim;      /* 0 when numel is 0 */
    int64_t numel; /* elements of the iteration space (the inputs' side, for reductions) */
    int64_t shape[LAB_MAX_DIMS];
    int64_t byte_strides[LAB_ITER_MAX_OPERANDS][LAB_MAX_DIMS];
    char *data[LAB_ITER_MAX_OPERANDS];
    uint32_t reduced; /* bit d: dimension d of this space is reduced (the output does not move) */
} lab_iteration;

/* `reduced`: bit d set for each dimension d of the output that a reduction collapses; there the
 * output has size 1 (keepdim form) and the inputs give the size. 0 for elementwise ops.
 * Returns 0, or -1 with TypeError/ValueError set naming the arguments. */
int lab_iterate(const lab_operands *ops, uint32_t reduced, const char *func, lab_iteration *it);

/* The same, with flags: LAB_ITERATE_KEEP_REDUCED_ORDER keeps the reduced dimensions in their
 * logical order (never reordered among themselves; they are never flipped), so a linear position
 * along them is the flat index argmax reports. */
#define LAB_ITERATE_KEEP_REDUCED_ORDER 1u
int lab_iterate_with(const lab_operands *ops, uint32_t reduced, unsigned flags, const char *func,
                     lab_iteration *it);

/* An input may be the very view the output is (in place) or disjoint from it; anything between
 * would make the result depend on the order elements are written: 1 when `in` and `out` are in
 * that case, else 0. No Python call, so a list op checks hundreds of pairs cheaply. */
int lab_partially_overlap(const lab_array *in, const lab_array *out);

/* 1 when the byte ranges two arrays span intersect (a conservative test: interleaved views of one
 * buffer count as sharing), else 0. */
int lab_share_memory(const lab_array *a, const lab_array *b);

/* 1 when two arrays provably share no byte although their ranges intersect - interleaved views of
 * one buffer such as the two halves of a [rows, 2h] array: every address of each, modulo the gcd of
 * both arrays' outer strides, falls in its innermost run, and the two runs do not meet. 0 when
 * they may share (or the test cannot tell). */
int lab_disjoint_views(const lab_array *a, const lab_array *b);

/* An output may not write one element twice: no zero strides on dimensions longer than 1, no
 * strides that map two positions to one element. Returns 0, or -1 with ValueError naming it. */
int lab_check_no_self_overlap(const lab_array *out, const char *name, const char *func);

/* The ValueError for a partial overlap, naming both arguments. Returns -1. */
int lab_fail_partial_overlap(const char *in_name, const char *out_name, const char *func);

/* The written arrays among `count` operands: writable, no element written twice, and sharing memory
 * with no other operand - except an operand only read whose very view a written one is, where both
 * are in one in-place group (in_place_group: 0 for none, equal nonzero numbers for operands that may
 * be one view; NULL: no operand may): an update in place. A partial overlap there is the
 * partial-overlap error. 0, or -1 with ValueError naming both arguments. */
int lab_check_written_apart(const lab_array *const *arrays, const char *const *names, const int *written,
                            const int *in_place_group, int count, const char *func);

#endif
