/* iterator.c - from the operands of one call to the iteration space kernels walk (see iterator.h).
 * The steps follow PyTorch's TensorIterator (aten/src/ATen/TensorIterator.cpp), reduced to what
 * lab needs. */
#include "dispatch/iterator.h"

#include <stdlib.h>
#include <string.h>

#include "dispatch/dtype.h"

static int outputs_of(const lab_operands *ops) { return ops->n_outputs > 0 ? ops->n_outputs : 1; }

/* "'a' has shape (3, 4), 'b' has shape (5,)" for the broadcast error message. */
static void fail_broadcast(const lab_operands *ops, const char *func) {
    char parts[768] = "", shape[256];
    size_t used = 0;
    for (int i = outputs_of(ops); i < ops->count && used < sizeof parts; i++) {
        lab_shape_text(shape, sizeof shape, ops->arrays[i].shape, ops->arrays[i].ndim);
        used += (size_t)snprintf(parts + used, sizeof parts - used, "%s'%s' has shape %s",
                                 i > outputs_of(ops) ? ", " : "", ops->names[i], shape);
    }
    lab_fail(LAB_FAILURE_VALUE, "%s(): the inputs cannot be broadcast together: %s", func, parts);
}

/* NumPy broadcasting of the inputs into `shape` (the iteration space). The output is never
 * broadcast: in kept dimensions it has the iteration's size (inputs may broadcast up to it, as with
 * NumPy's out=); in reduced dimensions it has size 1 while the inputs give the size. */
static int check_broadcast(const lab_operands *ops, uint32_t reduced, const char *func, int64_t *shape) {
    const lab_array *out = &ops->arrays[0];
    const int ndim = out->ndim;
    for (int d = 0; d < ndim; d++) shape[d] = 1;
    const int first_input = outputs_of(ops);
    for (int i = first_input; i < ops->count;
         i++) { /* inputs first, so a mismatch among them is named as such */
        const lab_array *a = &ops->arrays[i];
        if (a->ndim > ndim) goto output_mismatch;
        for (int d = 0; d < a->ndim; d++) {
            int64_t *target = &shape[ndim - a->ndim + d];
            if (a->shape[d] == *target || a->shape[d] == 1) continue;
            if (*target != 1) {
                fail_broadcast(ops, func);
                return -1;
            }
            *target = a->shape[d];
        }
    }
    for (int d = 0; d < ndim; d++) {
        if ((reduced >> d) & 1) {
            if (out->shape[d] != 1) goto output_mismatch;
        } else {
            if (out->shape[d] != shape[d] && shape[d] != 1) goto output_mismatch;
            shape[d] = out->shape[d];
        }
    }
    return 0;
output_mismatch:;
    int64_t inputs_shape[LAB_MAX_DIMS];
    int inputs_ndim = 0;
    for (int i = first_input; i < ops->count; i++)
        if (ops->arrays[i].ndim > inputs_ndim) inputs_ndim = ops->arrays[i].ndim;
    for (int d = 0; d < inputs_ndim; d++) inputs_shape[d] = 1;
    for (int i = first_input; i < ops->count; i++) {
        const lab_array *a = &ops->arrays[i];
        for (int d = 0; d < a->ndim; d++)
            if (a->shape[d] != 1) inputs_shape[inputs_ndim - a->ndim + d] = a->shape[d];
    }
    char out_shape[256], inputs[256];
    lab_shape_text(out_shape, sizeof out_shape, out->shape, out->ndim);
    lab_shape_text(inputs, sizeof inputs, inputs_shape, inputs_ndim);
    lab_fail(LAB_FAILURE_VALUE,
             "%s(): argument '%s' has shape %s but the inputs broadcast to %s; the output must have %s (it "
             "is never broadcast itself)",
             func, ops->names[0], out_shape, inputs,
             reduced ? "the inputs' shape with size 1 in the reduced dimensions" : "the broadcast shape");
    return -1;
}

typedef struct {
    int64_t size;
    int64_t stride;
} dim_stride;

static int by_stride_magnitude(const void *x, const void *y) {
    const int64_t a = llabs(((const dim_stride *)x)->stride), b = llabs(((const dim_stride *)y)->stride);
    return a < b ? -1 : a > b;
}

/* The output may not write one element twice: no zero strides on dimensions longer than 1, and,
 * taking dimensions from the smallest stride up, each stride must clear the extent of the ones
 * below it (a sufficient test; it refuses only exotic layouts that interleave). */
int lab_check_no_self_overlap(const lab_array *out, const char *name, const char *func) {
    dim_stride dims[LAB_MAX_DIMS];
    int n = 0;
    for (int d = 0; d < out->ndim; d++) {
        if (out->shape[d] <= 1) continue;
        if (out->strides[d] == 0) {
            lab_fail(LAB_FAILURE_VALUE,
                     "%s(): argument '%s' has stride 0 in dimension %d (a broadcast view); the "
                     "output must have one element per position",
                     func, name, d);
            return -1;
        }
        dims[n].size = out->shape[d];
        dims[n].stride = out->strides[d];
        n++;
    }
    qsort(dims, n, sizeof dims[0], by_stride_magnitude);
    int64_t extent = 0; /* elements spanned by the dimensions so far, minus one */
    for (int i = 0; i < n; i++) {
        if (llabs(dims[i].stride) <= extent) {
            lab_fail(LAB_FAILURE_VALUE,
                     "%s(): argument '%s' overlaps itself (its strides map several positions to "
                     "one element); the output must not",
                     func, name);
            return -1;
        }
        extent += (dims[i].size - 1) * llabs(dims[i].stride);
    }
    return 0;
}

/* [first byte, last byte + 1) that an array touches. */
static void byte_extent(const lab_array *a, uintptr_t *lo, uintptr_t *hi) {
    const int64_t itemsize = lab_dtype_itemsize[a->dtype];
    int64_t low = 0, high = 0;
    for (int d = 0; d < a->ndim; d++) {
        const int64_t span = (a->shape[d] - 1) * a->strides[d] * itemsize;
        if (span < 0) {
            low += span;
        } else {
            high += span;
        }
    }
    *lo = (uintptr_t)a->data + low;
    *hi = (uintptr_t)a->data + high + itemsize;
}

/* True when input and output name the same element at every position of the broadcast shape:
 * then in-place elementwise is safe, since each thread reads its element before writing it. */
static int is_same_view(const lab_array *in, const lab_array *out) {
    if (in->data != out->data || in->dtype != out->dtype || in->ndim > out->ndim) return 0;
    const int lead = out->ndim - in->ndim;
    for (int d = 0; d < out->ndim; d++) {
        if (out->shape[d] <= 1) continue;
        const int64_t in_stride = d < lead || in->shape[d - lead] == 1 ? 0 : in->strides[d - lead];
        if (in_stride != out->strides[d]) return 0;
    }
    return 1;
}

int lab_partially_overlap(const lab_array *in, const lab_array *out) {
    if (in->numel == 0 || out->numel == 0) return 0;
    uintptr_t out_lo, out_hi, lo, hi;
    byte_extent(out, &out_lo, &out_hi);
    byte_extent(in, &lo, &hi);
    return !(hi <= out_lo || lo >= out_hi || is_same_view(in, out));
}

int lab_share_memory(const lab_array *a, const lab_array *b) {
    if (a->numel == 0 || b->numel == 0) return 0;
    uintptr_t a_lo, a_hi, b_lo, b_hi;
    byte_extent(a, &a_lo, &a_hi);
    byte_extent(b, &b_lo, &b_hi);
    return !(a_hi <= b_lo || b_hi <= a_lo);
}

static int64_t gcd64(int64_t a, int64_t b) {
    while (b) {
        const int64_t rest = a % b;
        a = b;
        b = rest;
    }
    return a;
}

/* Every address of an array, taken modulo `period` (the gcd of the byte strides it adds up, so
 * those positions add multiples of it), falls in [start, start + span). With `element_run`, every
 * dimension goes into the period and the run is one element (even and odd columns: residues 0 and
 * 4 modulo 8); otherwise the innermost dimension is the run (the two halves of a row). */
static void address_run(const lab_array *a, int element_run, int64_t *period, uintptr_t *start,
                        int64_t *span) {
    const int64_t itemsize = lab_dtype_itemsize[a->dtype];
    int inner = -1;
    for (int d = 0; d < a->ndim && !element_run; d++) {
        if (a->shape[d] > 1 && (inner < 0 || llabs(a->strides[d]) < llabs(a->strides[inner]))) inner = d;
    }
    *start = (uintptr_t)a->data;
    *span = itemsize;
    for (int d = 0; d < a->ndim; d++) {
        if (a->shape[d] <= 1) continue;
        const int64_t stride = a->strides[d] * itemsize;
        if (d == inner) {
            *span += llabs(stride) * (a->shape[d] - 1);
            if (stride < 0) *start += stride * (a->shape[d] - 1);
        } else {
            *period = gcd64(*period, llabs(stride));
        }
    }
}

static int runs_apart(const lab_array *a, const lab_array *b, int element_run) {
    int64_t period = 0, a_span, b_span;
    uintptr_t a_start, b_start;
    address_run(a, element_run, &period, &a_start, &a_span);
    address_run(b, element_run, &period, &b_start, &b_span);
    if (period == 0 || a_span + b_span > period) return 0;
    int64_t delta = (int64_t)(b_start - a_start) % period; /* where b's run starts after a's, mod period */
    if (delta < 0) delta += period;
    return delta >= a_span && delta <= period - b_span;
}

int lab_disjoint_views(const lab_array *a, const lab_array *b) {
    return runs_apart(a, b, 0) || runs_apart(a, b, 1);
}

int lab_fail_partial_overlap(const char *in_name, const char *out_name, const char *func) {
    lab_fail(
        LAB_FAILURE_VALUE,
        "%s(): argument '%s' overlaps '%s' in memory without being the same view of it; "
        "the result would depend on the order elements are written. Use the identical array for in-place, "
        "or copy the input first",
        func, in_name, out_name);
    return -1;
}

int lab_check_written_apart(const lab_array *const *arrays, const char *const *names, const int *written,
                            const int *in_place_group, int count, const char *func) {
    for (int i = 0; i < count; i++) {
        if (!written[i]) continue;
        if (lab_check_writable(arrays[i], func, names[i]) < 0 ||
            lab_check_no_self_overlap(arrays[i], names[i], func) < 0) {
            return -1;
        }
        for (int j = 0; j < count; j++) {
            if (j == i || !lab_share_memory(arrays[i], arrays[j]) ||
                lab_disjoint_views(arrays[i], arrays[j])) {
                continue;
            }
            if (!written[j] && in_place_group && in_place_group[i] &&
                in_place_group[i] == in_place_group[j]) {
                if (!lab_partially_overlap(arrays[j], arrays[i])) continue; /* the same view: in place */
                return lab_fail_partial_overlap(names[j], names[i], func);
            }
            lab_fail(LAB_FAILURE_VALUE,
                     "%s(): arguments '%s' and '%s' share memory; '%s' is written, so they must not", func,
                     names[i], names[j], names[i]);
            return -1;
        }
    }
    return 0;
}

/* Whether dimensions a and b of the iteration should swap so that the outer one comes first: the
 * first operand whose strides in both are nonzero decides (the output first), as in
 * TensorIterator::reorder_dimensions; ties and broadcasts leave the order as it is. */
static int inner_before_outer(const lab_iteration *it, int n_operands, int outer, int inner) {
    for (int i = 0; i < n_operands; i++) {
        const int64_t a = llabs(it->byte_strides[i][outer]), b = llabs(it->byte_strides[i][inner]);
        if (a == 0 || b == 0 || a == b) continue;
        return a < b;
    }
    return 0;
}

static void swap_dims(lab_iteration *it, int n_operands, int a, int b) {
    int64_t t = it->shape[a];
    it->shape[a] = it->shape[b];
    it->shape[b] = t;
    for (int i = 0; i < n_operands; i++) {
        t = it->byte_strides[i][a];
        it->byte_strides[i][a] = it->byte_strides[i][b];
        it->byte_strides[i][b] = t;
    }
    const uint32_t bit_a = (it->reduced >> a) & 1, bit_b = (it->reduced >> b) & 1;
    it->reduced &= ~((1u << a) | (1u << b));
    it->reduced |= (bit_a << b) | (bit_b << a);
}

/* Output k (k > 0) has the first output's shape exactly: outputs are never broadcast. */
static int check_same_shape(const lab_operands *ops, int k, const char *func) {
    const lab_array *first = &ops->arrays[0], *other = &ops->arrays[k];
    int same = first->ndim == other->ndim;
    for (int d = 0; same && d < first->ndim; d++) same = first->shape[d] == other->shape[d];
    if (same) return 0;
    char a[256], b[256];
    lab_shape_text(a, sizeof a, other->shape, other->ndim);
    lab_shape_text(b, sizeof b, first->shape, first->ndim);
    lab_fail(LAB_FAILURE_VALUE,
             "%s(): output '%s' has shape %s but output '%s' has shape %s; the outputs must have one shape",
             func, ops->names[k], a, ops->names[0], b);
    return -1;
}

int lab_iterate(const lab_operands *ops, uint32_t reduced, const char *func, lab_iteration *it) {
    return lab_iterate_with(ops, reduced, 0, func, it);
}

int lab_iterate_with(const lab_operands *ops, uint32_t reduced, unsigned flags, const char *func,
                     lab_iteration *it) {
    const lab_array *out = &ops->arrays[0];
    const int n = ops->count, n_outputs = outputs_of(ops);
    for (int k = 0; k < n_outputs; k++) {
        if (lab_check_writable(&ops->arrays[k], func, ops->names[k]) < 0) return -1;
        if (k > 0 && check_same_shape(ops, k, func) < 0) return -1;
    }
    int64_t shape[LAB_MAX_DIMS];
    if (check_broadcast(ops, reduced, func, shape) < 0) return -1;
    const int ndim = out->ndim;
    it->numel = 1;
    for (int d = 0; d < ndim; d++) it->numel *= shape[d];
    for (int i = 0; i < n; i++) it->data[i] = ops->arrays[i].data;
    it->ndim = 0;
    it->reduced = 0;
    if (it->numel == 0) return 0;
    for (int k = 0; k < n_outputs; k++) {
        const lab_array *written = &ops->arrays[k];
        if (lab_check_no_self_overlap(written, ops->names[k], func) < 0) return -1;
        for (int j = 0; j < k; j++) { /* two outputs: one element would be written twice, or raced */
            if (lab_share_memory(&ops->arrays[j], written) && !lab_disjoint_views(&ops->arrays[j], written)) {
                lab_fail(LAB_FAILURE_VALUE,
                         "%s(): outputs '%s' and '%s' share memory; each output needs its own", func,
                         ops->names[j], ops->names[k]);
                return -1;
            }
        }
        for (int i = n_outputs; i < n; i++) {
            if (lab_partially_overlap(&ops->arrays[i], written)) {
                return lab_fail_partial_overlap(ops->names[i], ops->names[k], func);
            }
        }
    }

    /* Byte strides of every operand over the iteration shape (0 where an operand is broadcast, and
     * for the output along reduced dimensions), keeping only dimensions longer than 1. */
    int kept = 0;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] == 1) continue;
        it->shape[kept] = shape[d];
        for (int i = 0; i < n; i++) {
            const lab_array *a = &ops->arrays[i];
            const int ad = d - (ndim - a->ndim);
            const int64_t stride = ad < 0 || a->shape[ad] == 1 ? 0 : a->strides[ad];
            it->byte_strides[i][kept] = stride * lab_dtype_itemsize[a->dtype];
        }
        it->reduced |= ((reduced >> d) & 1u) << kept;
        kept++;
    }
    /* Walk every dimension in the direction the output's memory goes (the order is free). */
    for (int d = 0; d < kept; d++) {
        if (it->byte_strides[0][d] >= 0) continue;
        for (int i = 0; i < n; i++) {
            it->data[i] += (it->shape[d] - 1) * it->byte_strides[i][d];
            it->byte_strides[i][d] = -it->byte_strides[i][d];
        }
    }
    /* Outermost first: larger strides outside (insertion sort: at most 8 dimensions). With
     * LAB_ITERATE_KEEP_REDUCED_ORDER two reduced dimensions never trade places. */
    const int keep_reduced_order = (flags & LAB_ITERATE_KEEP_REDUCED_ORDER) != 0;
    for (int d = 1; d < kept; d++) {
        for (int e = d; e > 0 && inner_before_outer(it, n, e - 1, e); e--) {
            if (keep_reduced_order && ((it->reduced >> (e - 1)) & 1) && ((it->reduced >> e) & 1)) break;
            swap_dims(it, n, e - 1, e);
        }
    }
    /* Merge an outer dimension into the inner one whenever both are kept or both reduced and, for
     * every operand, stepping the outer one is the same as stepping the inner one its whole length. */
    int merged = 0;
    uint32_t merged_reduced = 0;
    for (int d = 0; d < kept; d++) {
        const uint32_t is_reduced = (it->reduced >> d) & 1;
        if (merged > 0 && ((merged_reduced >> (merged - 1)) & 1) == is_reduced) {
            const int outer = merged - 1;
            int can_merge = 1;
            for (int i = 0; i < n && can_merge; i++) {
                can_merge = it->byte_strides[i][outer] == it->byte_strides[i][d] * it->shape[d];
            }
            if (can_merge) {
                it->shape[outer] *= it->shape[d];
                for (int i = 0; i < n; i++) it->byte_strides[i][outer] = it->byte_strides[i][d];
                continue;
            }
        }
        it->shape[merged] = it->shape[d];
        for (int i = 0; i < n; i++) it->byte_strides[i][merged] = it->byte_strides[i][d];
        merged_reduced |= is_reduced << merged;
        merged++;
    }
    it->reduced = merged_reduced;
    if (merged == 0) { /* a single element */
        it->shape[0] = 1;
        for (int i = 0; i < n; i++) it->byte_strides[i][0] = lab_dtype_itemsize[ops->arrays[i].dtype];
        merged = 1;
    }
    it->ndim = merged;
    return 0;
}
