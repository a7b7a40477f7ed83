/* list_kind.c - the list op kind's plan and launch (see list_kind.h). */
#include "dispatch/list_kind.h"

#include <stdlib.h>
#include <string.h>

#include "dispatch/dtype.h"
#include "dispatch/elementwise_kind.h"
#include "dispatch/iterator.h"

const lab_list_roles lab_list_op_roles[LAB_NUM_MT_OPS] = {
#define LAB_LIST_OP(id, step, lists, reads, writes, state, elementwise)                                      \
    {lists, reads, writes, state, elementwise},
#include "kernels/list_ops.def"
#undef LAB_LIST_OP
};

/* A non-contiguous array staged through a contiguous temporary (norms and optimizer steps). */
typedef struct {
    lab_array original;
    lab_array temporary; /* contiguous, same shape and dtype; data from cudaMallocAsync */
    int slot;            /* k * n + i: list k, index i */
    int written;         /* copied back after the op */
} staged_array;

/* Everything decided before the first launch, in one allocation-owning struct so one release
 * frees it all. */
struct lab_list_plan {
    int n_fast, n_slow, n_staged;
    int *fast;                          /* indexes for the multi-tensor kernel */
    lab_dtype *fast_dtypes;             /* (dtype, state dtype) per fast index */
    lab_elementwise_launch *slow_plans; /* per-tensor launches (foreach ops off the fast path) */
    staged_array *staged;
    char **ptrs; /* [k * n + i]: the pointer the kernel uses (staged or not) */
    int64_t *sizes;
    int *norm_index;
    char **group_ptrs[LAB_MAX_OPERANDS];
};

void lab_list_call_release(lab_list_call *call) {
    lab_list_plan *p = call->plan;
    if (!p) return;
    free(p->fast);
    free(p->fast_dtypes);
    free(p->slow_plans);
    free(p->staged);
    free(p->ptrs);
    free(p->sizes);
    free(p->norm_index);
    for (int k = 0; k < LAB_MAX_OPERANDS; k++) free(p->group_ptrs[k]);
    free(p);
    call->plan = NULL;
}

static int is_mt_dtype(lab_dtype d) { return d == LAB_FLOAT16 || d == LAB_BFLOAT16 || d == LAB_FLOAT32; }

/* Index i of every list: one shape, written arrays writable, and no written array partially
 * overlapping another list's array there (the identical view is in place, and fine). Names such as
 * "xs[17]" are formatted only for the message: a call checks hundreds of arrays. */
static int check_index(const lab_list_call *c, const lab_list_roles *roles, int i, const char *func) {
    const lab_array *first = &c->lists[0][i];
    char name[80], other[80];
    for (int k = 0; k < roles->n_lists; k++) {
        const lab_array *a = &c->lists[k][i];
        int same_shape = a->ndim == first->ndim;
        for (int d = 0; same_shape && d < a->ndim; d++) same_shape = a->shape[d] == first->shape[d];
        if (!same_shape) {
            lab_indexed_name(name, sizeof name, c->names[k], i);
            lab_fail(LAB_FAILURE_VALUE,
                     "%s(): '%s' and '%s[%d]' differ in shape; each index must hold arrays of one shape",
                     func, name, c->names[0], i);
            return -1;
        }
        if (((roles->writes >> k) & 1) && a->readonly) {
            lab_indexed_name(name, sizeof name, c->names[k], i);
            return lab_check_writable(a, func, name);
        }
        /* A written view with a zero stride (a broadcast) would have one element written by many
         * threads; only a non-contiguous view can be one, so contiguous arrays skip the test. */
        if (((roles->writes >> k) & 1) && !lab_array_is_contiguous(a)) {
            lab_indexed_name(name, sizeof name, c->names[k], i);
            if (lab_check_no_self_overlap(a, name, func) < 0) return -1;
        }
    }
    for (int w = 0; w < roles->n_lists; w++) {
        if (!((roles->writes >> w) & 1)) continue;
        for (int k = 0; k < roles->n_lists; k++) {
            if (k == w || !lab_partially_overlap(&c->lists[k][i], &c->lists[w][i])) continue;
            lab_indexed_name(name, sizeof name, c->names[w], i);
            lab_indexed_name(other, sizeof other, c->names[k], i);
            return lab_fail_partial_overlap(other, name, func);
        }
    }
    return 0;
}

/* Tensor i fits the multi-tensor kernel as it is: contiguous, float16/bfloat16/float32, every
 * non-state list of the first list's dtype, the state lists of one dtype (that, or float32). */
static int fits_fast_path(const lab_list_call *c, const lab_list_roles *roles, int i, lab_dtype *dtype,
                          lab_dtype *state_dtype) {
    *dtype = c->lists[0][i].dtype;
    *state_dtype = *dtype;
    int have_state = 0;
    for (int k = 0; k < roles->n_lists; k++) {
        const lab_array *a = &c->lists[k][i];
        if (!lab_array_is_contiguous(a) || !is_mt_dtype(a->dtype)) return 0;
        if ((roles->state >> k) & 1) {
            if (have_state && a->dtype != *state_dtype) return 0;
            *state_dtype = a->dtype;
            have_state = 1;
        } else if (a->dtype != *dtype) {
            return 0;
        }
    }
    return *state_dtype == *dtype || *state_dtype == LAB_FLOAT32;
}

/* Norms and optimizer steps have no per-tensor fallback for dtypes, only for layouts. */
static int check_multi_tensor_dtypes(const lab_list_call *c, const lab_list_roles *roles, int i,
                                     const char *func) {
    const lab_dtype param = c->lists[0][i].dtype;
    lab_dtype state = LAB_NUM_DTYPES;
    for (int k = 0; k < roles->n_lists; k++) {
        const lab_array *a = &c->lists[k][i];
        const int is_state = (roles->state >> k) & 1;
        int ok = is_mt_dtype(a->dtype);
        if (!is_state) {
            ok = ok && a->dtype == param;
        } else {
            ok = ok && (a->dtype == param || a->dtype == LAB_FLOAT32) &&
                 (state == LAB_NUM_DTYPES || a->dtype == state);
        }
        if (!ok) {
            lab_fail(LAB_FAILURE_TYPE,
                     "%s(): '%s[%d]' has dtype %s; this op needs float16, bfloat16 or float32, one "
                     "dtype for the arrays at an index, and state either of that dtype or float32",
                     func, c->names[k], i, lab_dtype_names[a->dtype]);
            return -1;
        }
        if (is_state) state = a->dtype;
    }
    return 0;
}

static int allocate_plan(lab_list_call *c, const lab_list_roles *roles) {
    const int n = c->n, slots = n * roles->n_lists + 1;
    lab_list_plan *p = c->plan = calloc(1, sizeof *p);
    if (!p) return -1;
    p->fast = malloc(sizeof(int) * (n + 1));
    p->fast_dtypes = malloc(sizeof(lab_dtype) * 2 * (n + 1));
    p->staged = calloc(slots, sizeof(staged_array));
    p->ptrs = calloc(slots, sizeof(char *));
    p->sizes = malloc(sizeof(int64_t) * (n + 1));
    p->norm_index = malloc(sizeof(int) * (n + 1));
    int ok = p->fast && p->fast_dtypes && p->staged && p->ptrs && p->sizes && p->norm_index;
    for (int k = 0; k < roles->n_lists; k++) {
        ok = ok && (p->group_ptrs[k] = malloc(sizeof(char *) * (n + 1)));
    }
    if (roles->elementwise_op >= 0) {
        ok = ok && (p->slow_plans = malloc(sizeof(lab_elementwise_launch) * (n + 1)));
    }
    return ok ? 0 : -1;
}

static int plan(lab_op_call *call) {
    lab_list_call *c = call->description;
    const lab_list_roles *roles = &lab_list_op_roles[c->op];
    const int n = c->n;
    /* n counts the arrays read (a list subclass's __iter__ may not agree with its len()): the norms'
     * output must hold exactly that many, or the kernel would write past its end */
    if (c->norms && (c->norms->dtype != LAB_FLOAT32 || c->norms->ndim != 1 || c->norms->numel != n ||
                     !lab_array_is_contiguous(c->norms))) {
        lab_fail(LAB_FAILURE_VALUE,
                 "%s(): 'out' must be a contiguous 1-D float32 array of %d elements (one norm per array "
                 "of 'xs')",
                 call->func, n);
        return -1;
    }
    if (allocate_plan(c, roles) < 0) {
        lab_fail(LAB_FAILURE_MEMORY, "%s(): out of host memory for %d tensors", call->func, n);
        return -1;
    }
    lab_list_plan *p = c->plan;
    for (int i = 0; i < n; i++) {
        if (check_index(c, roles, i, call->func) < 0) return -1;
        for (int k = 0; k < roles->n_lists; k++) p->ptrs[k * n + i] = c->lists[k][i].data;
        if (c->lists[0][i].numel == 0) continue;
        lab_dtype dtype, state_dtype;
        if (fits_fast_path(c, roles, i, &dtype, &state_dtype)) {
            /* as it is */
        } else if (roles->elementwise_op >= 0) {
            /* foreach op: the elementwise plan takes any layout and dtype mix (out is the last list) */
            lab_operands ops;
            ops.count = 0;
            ops.n_outputs = 1;
            ops.arrays[ops.count] = c->lists[roles->n_lists - 1][i];
            ops.names[ops.count++] = c->names[roles->n_lists - 1];
            for (int k = 0; k < roles->n_lists - 1; k++) {
                ops.arrays[ops.count] = c->lists[k][i];
                ops.names[ops.count++] = c->names[k];
            }
            lab_elementwise_launch *slow = &p->slow_plans[p->n_slow++];
            if (lab_plan_elementwise(&ops, lab_op_integers[roles->elementwise_op], call->func, slow) < 0) {
                return -1;
            }
            slow->op = (lab_op)roles->elementwise_op;
            slow->scalars = c->scalars;
            continue;
        } else {
            /* norm / optimizer step: the dtypes must fit; layouts go through contiguous temporaries */
            if (check_multi_tensor_dtypes(c, roles, i, call->func) < 0) return -1;
            dtype = c->lists[0][i].dtype;
            state_dtype = dtype;
            for (int k = 0; k < roles->n_lists; k++) {
                const lab_array *a = &c->lists[k][i];
                if ((roles->state >> k) & 1) state_dtype = a->dtype;
                if (lab_array_is_contiguous(a)) continue;
                staged_array *st = &p->staged[p->n_staged++];
                st->original = *a;
                st->temporary = lab_contiguous_like(a);
                st->slot = k * n + i;
                st->written = (roles->writes >> k) & 1;
            }
        }
        p->fast_dtypes[2 * p->n_fast] = dtype;
        p->fast_dtypes[2 * p->n_fast + 1] = state_dtype;
        p->fast[p->n_fast++] = i;
    }
    return p->n_fast + p->n_slow > 0 || (c->norms && n > 0); /* norms of empty tensors are still written */
}

/* CUDA 12.1 drivers accept 32 KB of kernel parameters; ask once. */
static int large_parameters_allowed(void) {
    static int answer = -1;
    if (answer < 0) {
        int version = 0;
        answer = cudaDriverGetVersion(&version) == cudaSuccess && version >= 12010;
    }
    return answer;
}

/* One lab_launch_multi_tensor per (dtype, state dtype) group of the fast indexes. */
static cudaError_t launch_fast(const lab_list_call *c, const lab_list_roles *roles, cudaStream_t stream) {
    lab_list_plan *p = c->plan;
    const int n = c->n;
    cudaError_t err = cudaSuccess;
    for (int g = 0; err == cudaSuccess && g < p->n_fast; g++) {
        if (p->fast[g] < 0) continue; /* already launched with an earlier group */
        const lab_dtype dtype = p->fast_dtypes[2 * g], state_dtype = p->fast_dtypes[2 * g + 1];
        int members = 0;
        for (int h = g; h < p->n_fast; h++) {
            if (p->fast[h] < 0 || p->fast_dtypes[2 * h] != dtype ||
                p->fast_dtypes[2 * h + 1] != state_dtype) {
                continue;
            }
            const int i = p->fast[h];
            p->sizes[members] = c->lists[0][i].numel;
            p->norm_index[members] = i;
            for (int k = 0; k < roles->n_lists; k++) p->group_ptrs[k][members] = p->ptrs[k * n + i];
            members++;
            p->fast[h] = -1;
        }
        lab_multi_tensor_launch launch = {0};
        launch.op = c->op;
        launch.n_lists = roles->n_lists;
        launch.n_tensors = members;
        launch.dtype = dtype;
        launch.state_dtype = state_dtype;
        for (int k = 0; k < roles->n_lists; k++) launch.ptrs[k] = p->group_ptrs[k];
        launch.sizes = p->sizes;
        launch.norms = c->norms ? (float *)c->norms->data : NULL;
        launch.norm_index = p->norm_index;
        launch.n_norms = c->norms ? n : 0;
        launch.params = c->params;
        launch.large_params = large_parameters_allowed();
        err = lab_launch_multi_tensor(&launch, stream);
    }
    return err;
}

/* dst[...] = src through the elementwise copy kernel (a strided copy of one array's two layouts). */
static cudaError_t copy_array(const lab_array *dst, const lab_array *src, cudaStream_t stream) {
    lab_operands ops = {.arrays = {*dst, *src}, .names = {"dst", "src"}, .count = 2, .n_outputs = 1};
    lab_elementwise_launch copy;
    if (lab_plan_elementwise(&ops, 1, "staging copy", &copy) < 0) {
        /* two layouts of one shape and dtype, disjoint: validation cannot fail */
        return cudaErrorInvalidValue;
    }
    copy.op = LAB_OP_COPY;
    copy.scalars = (lab_scalars){{1.0, 1.0}, {1, 1}};
    return lab_launch_elementwise(&copy, stream);
}

static void launch(lab_op_call *call, lab_launch_scope *scope) {
    lab_list_call *c = call->description;
    lab_list_plan *p = c->plan;
    const cudaStream_t stream = scope->streams.launch;
    for (int s = 0; lab_launch_scope_ok(scope) && s < p->n_staged; s++) { /* stage in */
        staged_array *st = &p->staged[s];
        const char *step = "staging a non-contiguous array";
        const size_t bytes = (size_t)(st->original.numel * lab_dtype_itemsize[st->original.dtype]);
        if (lab_launch_scope_step(scope, step,
                                  cudaMallocAsync((void **)&st->temporary.data, bytes, stream))) {
            lab_launch_scope_step(scope, step, copy_array(&st->temporary, &st->original, stream));
        }
        p->ptrs[st->slot] = st->temporary.data;
    }
    if (lab_launch_scope_ok(scope) && c->norms) { /* empty tensors are not launched: their norm is 0 */
        lab_launch_scope_step(scope, "zeroing the norms",
                              cudaMemsetAsync(c->norms->data, 0, sizeof(float) * (size_t)c->n, stream));
    }
    if (lab_launch_scope_ok(scope)) {
        lab_launch_scope_step(scope, "multi-tensor launch",
                              launch_fast(c, &lab_list_op_roles[c->op], stream));
    }
    for (int s = 0; lab_launch_scope_ok(scope) && s < p->n_slow; s++) {
        lab_launch_scope_step(scope, "kernel launch", lab_launch_elementwise(&p->slow_plans[s], stream));
    }
    for (int s = 0; s < p->n_staged; s++) { /* stage out, and free every temporary made */
        staged_array *st = &p->staged[s];
        if (!st->temporary.data) continue;
        if (lab_launch_scope_ok(scope) && st->written) {
            lab_launch_scope_step(scope, "copying a staged array back",
                                  copy_array(&st->original, &st->temporary, stream));
        }
        lab_launch_scope_step(scope, "freeing a staging buffer", cudaFreeAsync(st->temporary.data, stream));
    }
}

const lab_op_kind lab_list_kind = {"list", plan, launch};
