/* foreach.c - lists of arrays in one launch: lab.foreach_add/mul/axpby/scale/copy/norm and the fused
 * optimizer steps lab.sgd_step and lab.adam_step (level 2 and 3 for kernels/multi_tensor.cu).
 *
 * Every list is read and checked first (lengths, array types, shapes per index, writability, one
 * device, dtypes, overlap), then the tensors that fit the multi-tensor kernel - contiguous,
 * float16/bfloat16/float32, one dtype per list role - go in as few launches as the kernel's
 * parameter space allows. The rest take a correct slower path: foreach ops run the elementwise
 * kernels per tensor (any layout or dtype mix); norms and optimizer steps stage a non-contiguous
 * tensor through a contiguous temporary. Stream policy as for every op (stream.h), decided from the
 * first array of each list. */
#include "foreach.h"

#include <math.h>
#include <string.h>

#include "args.h"
#include "array.h"
#include "device.h"
#include "dtype.h"
#include "launch_scope.h"
#include "plan.h"
#include "stream.h"

typedef struct {
    const char *name;   /* "xs": for messages */
    lab_array *arrays;  /* n of them */
    int written;
    int state;          /* optimizer state: may be float32 while params are half */
} tensor_list;

typedef struct {
    const char *func;
    int n;              /* arrays per list */
    int n_lists;
    tensor_list lists[LAB_MAX_OPERANDS];
    lab_array *storage; /* one allocation for every list's arrays */
} tensor_lists;

static void free_lists(tensor_lists *lists) { PyMem_Free(lists->storage); }

static int is_mt_dtype(lab_dtype d) { return d == LAB_FLOAT16 || d == LAB_BFLOAT16 || d == LAB_FLOAT32; }

/* Every array whose device is known (and `norms`, if given) on one device. ValueError names the
 * first array that differs and the first whose device was known. */
static int check_devices(const tensor_lists *lists, const lab_array *norms) {
    const lab_array *reference = norms && norms->device >= 0 ? norms : NULL;
    const char *reference_list = "out";
    int reference_index = -1;
    for (int k = 0; k < lists->n_lists; k++) {
        for (int i = 0; i < lists->n; i++) {
            const lab_array *a = &lists->lists[k].arrays[i];
            if (a->device < 0) continue;
            if (!reference) {
                reference = a;
                reference_list = lists->lists[k].name;
                reference_index = i;
            } else if (a->device != reference->device) {
                char where[80] = "out";
                if (reference_index >= 0) snprintf(where, sizeof where, "%s[%d]", reference_list, reference_index);
                PyErr_Format(PyExc_ValueError, "%s(): '%s[%d]' is on cuda:%d but '%s' is on cuda:%d; all arrays must be "
                             "on one device", lists->func, lists->lists[k].name, i, a->device, where, reference->device);
                return -1;
            }
        }
    }
    return 0;
}

/* Reads the lists `objects` (names `names`) into lists->lists. Checks lengths, arrays, shapes per
 * index against the first list, writability and the devices the protocols name. Returns 0 or -1. */
static int read_lists(lab_state *state, tensor_lists *lists, const char *const *names, PyObject *const *objects,
                      int n_lists, int written_mask, int state_mask) {
    const char *func = lists->func;
    PyObject *sequences[LAB_MAX_OPERANDS] = {NULL};
    int rc = -1;
    lists->n_lists = n_lists;
    lists->storage = NULL;
    for (int k = 0; k < n_lists; k++) {
        if (!PyList_Check(objects[k]) && !PyTuple_Check(objects[k])) {
            PyErr_Format(PyExc_TypeError, "%s(): '%s' must be a list or tuple of CUDA arrays, got %s", func, names[k],
                         Py_TYPE(objects[k])->tp_name);
            goto done;
        }
        sequences[k] = PySequence_Fast(objects[k], "");
        if (!sequences[k]) goto done;
        const Py_ssize_t length = PySequence_Fast_GET_SIZE(sequences[k]);
        if (k == 0) lists->n = (int)length;
        if (length != lists->n) {
            PyErr_Format(PyExc_ValueError, "%s(): '%s' has %zd arrays but '%s' has %d; the lists must match", func,
                         names[k], length, names[0], lists->n);
            goto done;
        }
    }
    lists->storage = PyMem_Calloc((size_t)(n_lists * lists->n) + 1, sizeof(lab_array));
    if (!lists->storage) {
        PyErr_NoMemory();
        goto done;
    }
    for (int k = 0; k < n_lists; k++) {
        tensor_list *list = &lists->lists[k];
        list->name = names[k];
        list->arrays = lists->storage + (size_t)k * lists->n;
        list->written = (written_mask >> k) & 1;
        list->state = (state_mask >> k) & 1;
        for (int i = 0; i < lists->n; i++) {
            char argname[64];
            lab_indexed_name(argname, sizeof argname, names[k], i);
            lab_array *a = &list->arrays[i];
            if (lab_read_array(state, PySequence_Fast_GET_ITEM(sequences[k], i), func, argname, a) < 0) goto done;
            if (list->written && a->readonly) {
                PyErr_Format(PyExc_ValueError, "%s(): argument '%s' is read-only", func, argname);
                goto done;
            }
            const lab_array *first = &lists->lists[0].arrays[i];
            int same_shape = a->ndim == first->ndim;
            for (int d = 0; same_shape && d < a->ndim; d++) same_shape = a->shape[d] == first->shape[d];
            if (!same_shape) {
                PyErr_Format(PyExc_ValueError, "%s(): '%s' and '%s[%d]' differ in shape; each index must hold arrays of "
                             "one shape", func, argname, names[0], i);
                goto done;
            }
        }
    }
    rc = check_devices(lists, NULL);
done:
    for (int k = 0; k < n_lists; k++) Py_XDECREF(sequences[k]);
    if (rc < 0) {
        PyMem_Free(lists->storage);
        lists->storage = NULL;
    }
    return rc;
}

/* A written array at index i may be identical to another list's array there (in place), but not
 * partially overlap it. Contiguous arrays are checked here; views go through the per-tensor plan,
 * whose overlap check knows strides. */
static int check_overlap(const tensor_lists *lists, int i) {
    for (int w = 0; w < lists->n_lists; w++) {
        if (!lists->lists[w].written) continue;
        const lab_array *out = &lists->lists[w].arrays[i];
        for (int k = 0; k < lists->n_lists; k++) {
            const lab_array *other = &lists->lists[k].arrays[i];
            if (k == w || out->numel == 0 || other->numel == 0 || !lab_array_is_contiguous(out) ||
                !lab_array_is_contiguous(other) || (other->data == out->data && other->dtype == out->dtype))
                continue;
            const char *out_end = out->data + out->numel * lab_dtype_itemsize[out->dtype];
            const char *other_end = other->data + other->numel * lab_dtype_itemsize[other->dtype];
            if (other_end <= out->data || out_end <= other->data) continue;
            PyErr_Format(PyExc_ValueError, "%s(): '%s[%d]' partially overlaps '%s[%d]'; use the identical array for in-place",
                         lists->func, lists->lists[w].name, i, lists->lists[k].name, i);
            return -1;
        }
    }
    return 0;
}

static int read_float(PyObject *obj, const char *func, const char *name, double *value) {
    *value = PyFloat_AsDouble(obj);
    if (*value == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s(): '%s' must be a real number, got %s", func, name, Py_TYPE(obj)->tp_name);
        return -1;
    }
    return 0;
}

/* ---- staging a non-contiguous array through a contiguous temporary ---- */

typedef struct {
    lab_array original;
    lab_array temporary;  /* contiguous, same shape and dtype; data from cudaMallocAsync */
    int slot;             /* k * n + i: list k, index i */
    int written;          /* copied back after the op */
} staged_array;

static lab_array contiguous_like(const lab_array *a) {
    lab_array t = *a;
    t.data = NULL;
    int64_t stride = 1;
    for (int d = a->ndim - 1; d >= 0; d--) {
        t.strides[d] = stride;
        stride *= a->shape[d] > 0 ? a->shape[d] : 1;
    }
    t.readonly = 0;
    t.source = LAB_SOURCE_CAI;
    t.has_stream = 0;
    t.lab_array = NULL;
    t.stream_owner = NULL;
    return t;
}

/* dst[...] = src through the elementwise copy kernel (a strided copy of one array's two layouts). */
static cudaError_t copy_array(const lab_array *dst, const lab_array *src, cudaStream_t stream) {
    lab_operands ops = {{*dst, *src}, {"dst", "src"}, 2};
    lab_elementwise_launch plan;
    if (lab_plan_elementwise(&ops, 1, "staging copy", &plan) < 0) {
        PyErr_Clear(); /* two layouts of one shape and dtype, disjoint: validation cannot fail */
        return cudaErrorInvalidValue;
    }
    plan.op = LAB_OP_COPY;
    plan.scalars = (lab_scalars){{1.0, 1.0}, {1, 1}};
    return lab_launch_elementwise(&plan, stream);
}

/* ---- running a list op ---- */

typedef struct {
    lab_mt_op op;
    int elementwise_op;     /* foreach ops: the lab_op for tensors off the fast path; -1 for the others */
    int integers;           /* that kernel accepts integers */
    lab_mt_params params;
    lab_scalars scalars;    /* the same scalars, for the per-tensor kernel */
    lab_array *norms;       /* foreach_norm's output, else NULL */
} list_op;

/* Tensor i fits the multi-tensor kernel as it is: contiguous, float16/bfloat16/float32, every
 * non-state list of the first list's dtype, the state lists of one dtype (that, or float32). */
static int fits_fast_path(const tensor_lists *lists, int i, lab_dtype *dtype, lab_dtype *state_dtype) {
    *dtype = lists->lists[0].arrays[i].dtype;
    *state_dtype = *dtype;
    int have_state = 0;
    for (int k = 0; k < lists->n_lists; k++) {
        const lab_array *a = &lists->lists[k].arrays[i];
        if (!lab_array_is_contiguous(a) || !is_mt_dtype(a->dtype)) return 0;
        if (lists->lists[k].state) {
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
static int check_multi_tensor_dtypes(const tensor_lists *lists, int i) {
    const lab_dtype param = lists->lists[0].arrays[i].dtype;
    lab_dtype state = LAB_NUM_DTYPES;
    for (int k = 0; k < lists->n_lists; k++) {
        const lab_array *a = &lists->lists[k].arrays[i];
        int ok = is_mt_dtype(a->dtype);
        if (!lists->lists[k].state) ok = ok && a->dtype == param;
        else ok = ok && (a->dtype == param || a->dtype == LAB_FLOAT32) && (state == LAB_NUM_DTYPES || a->dtype == state);
        if (!ok) {
            PyErr_Format(PyExc_TypeError, "%s(): '%s[%d]' has dtype %s; this op needs float16, bfloat16 or float32, one "
                         "dtype for the arrays at an index, and state either of that dtype or float32", lists->func,
                         lists->lists[k].name, i, lab_dtype_names[a->dtype]);
            return -1;
        }
        if (lists->lists[k].state) state = a->dtype;
    }
    return 0;
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

/* Everything decided before the first launch, held in one place so one cleanup frees it all. */
typedef struct {
    int n_fast, n_slow, n_staged;
    int *fast;                           /* indexes for the multi-tensor kernel */
    lab_dtype *fast_dtypes;              /* (dtype, state dtype) per fast index */
    int *members;                        /* scratch: one dtype group's indexes */
    lab_elementwise_launch *slow_plans;  /* per-tensor launches (foreach ops off the fast path) */
    staged_array *staged;
    char **ptrs;                         /* [k * n + i]: the pointer the kernel uses (staged or not) */
    int64_t *sizes;
    int *norm_index;
    char **group_ptrs[LAB_MAX_OPERANDS];
} list_plan;

static void free_plan(list_plan *p) {
    PyMem_Free(p->fast);
    PyMem_Free(p->fast_dtypes);
    PyMem_Free(p->members);
    PyMem_Free(p->slow_plans);
    PyMem_Free(p->staged);
    PyMem_Free(p->ptrs);
    PyMem_Free(p->sizes);
    PyMem_Free(p->norm_index);
    for (int k = 0; k < LAB_MAX_OPERANDS; k++) PyMem_Free(p->group_ptrs[k]);
}

static int make_plan(const tensor_lists *lists, const list_op *op, list_plan *p) {
    const int n = lists->n, slots = n * lists->n_lists + 1;
    memset(p, 0, sizeof *p);
    p->fast = PyMem_Malloc(sizeof(int) * (n + 1));
    p->fast_dtypes = PyMem_Malloc(sizeof(lab_dtype) * 2 * (n + 1));
    p->members = PyMem_Malloc(sizeof(int) * (n + 1));
    p->staged = PyMem_Calloc(slots, sizeof(staged_array));
    p->ptrs = PyMem_Calloc(slots, sizeof(char *));
    p->sizes = PyMem_Malloc(sizeof(int64_t) * (n + 1));
    p->norm_index = PyMem_Malloc(sizeof(int) * (n + 1));
    int ok = p->fast && p->fast_dtypes && p->members && p->staged && p->ptrs && p->sizes && p->norm_index;
    for (int k = 0; k < lists->n_lists; k++) ok = ok && (p->group_ptrs[k] = PyMem_Malloc(sizeof(char *) * (n + 1)));
    if (op->elementwise_op >= 0) ok = ok && (p->slow_plans = PyMem_Malloc(sizeof(lab_elementwise_launch) * (n + 1)));
    if (!ok) {
        PyErr_NoMemory();
        return -1;
    }
    for (int i = 0; i < n; i++) {
        if (check_overlap(lists, i) < 0) return -1;
        for (int k = 0; k < lists->n_lists; k++) p->ptrs[k * n + i] = lists->lists[k].arrays[i].data;
        if (lists->lists[0].arrays[i].numel == 0) continue;
        lab_dtype dtype, state_dtype;
        if (fits_fast_path(lists, i, &dtype, &state_dtype)) {
            /* as it is */
        } else if (op->elementwise_op >= 0) {
            /* foreach op: the elementwise machinery takes any layout and dtype mix (out is the last list) */
            const tensor_list *out_list = &lists->lists[lists->n_lists - 1];
            lab_operands ops;
            ops.count = 0;
            ops.arrays[ops.count] = out_list->arrays[i];
            ops.names[ops.count++] = out_list->name;
            for (int k = 0; k < lists->n_lists - 1; k++) {
                ops.arrays[ops.count] = lists->lists[k].arrays[i];
                ops.names[ops.count++] = lists->lists[k].name;
            }
            lab_elementwise_launch *plan = &p->slow_plans[p->n_slow++];
            if (lab_plan_elementwise(&ops, op->integers, lists->func, plan) < 0) return -1;
            plan->op = (lab_op)op->elementwise_op;
            plan->scalars = op->scalars;
            continue;
        } else {
            /* norm / optimizer step: the dtypes must fit; layouts go through contiguous temporaries */
            if (check_multi_tensor_dtypes(lists, i) < 0) return -1;
            dtype = lists->lists[0].arrays[i].dtype;
            state_dtype = dtype;
            for (int k = 0; k < lists->n_lists; k++) {
                const lab_array *a = &lists->lists[k].arrays[i];
                if (lists->lists[k].state) state_dtype = a->dtype;
                if (lab_array_is_contiguous(a)) continue;
                staged_array *st = &p->staged[p->n_staged++];
                st->original = *a;
                st->temporary = contiguous_like(a);
                st->slot = k * n + i;
                st->written = lists->lists[k].written;
            }
        }
        p->fast_dtypes[2 * p->n_fast] = dtype;
        p->fast_dtypes[2 * p->n_fast + 1] = state_dtype;
        p->fast[p->n_fast++] = i;
    }
    return 0;
}

/* One lab_launch_multi_tensor per (dtype, state dtype) group of the fast indexes. */
static cudaError_t launch_fast(const tensor_lists *lists, const list_op *op, list_plan *p, cudaStream_t stream) {
    const int n = lists->n;
    cudaError_t err = cudaSuccess;
    for (int g = 0; err == cudaSuccess && g < p->n_fast; g++) {
        if (p->fast[g] < 0) continue; /* already launched with an earlier group */
        const lab_dtype dtype = p->fast_dtypes[2 * g], state_dtype = p->fast_dtypes[2 * g + 1];
        int members = 0;
        for (int h = g; h < p->n_fast; h++) {
            if (p->fast[h] < 0 || p->fast_dtypes[2 * h] != dtype || p->fast_dtypes[2 * h + 1] != state_dtype) continue;
            const int i = p->fast[h];
            p->sizes[members] = lists->lists[0].arrays[i].numel;
            p->norm_index[members] = i;
            for (int k = 0; k < lists->n_lists; k++) p->group_ptrs[k][members] = p->ptrs[k * n + i];
            members++;
            p->fast[h] = -1;
        }
        lab_multi_tensor_launch launch = {0};
        launch.op = op->op;
        launch.n_lists = lists->n_lists;
        launch.n_tensors = members;
        launch.dtype = dtype;
        launch.state_dtype = state_dtype;
        for (int k = 0; k < lists->n_lists; k++) launch.ptrs[k] = p->group_ptrs[k];
        launch.sizes = p->sizes;
        launch.norms = op->norms ? (float *)op->norms->data : NULL;
        launch.norm_index = p->norm_index;
        launch.n_norms = op->norms ? n : 0;
        launch.params = op->params;
        launch.large_params = large_parameters_allowed();
        err = lab_launch_multi_tensor(&launch, stream);
    }
    return err;
}

/* Validated lists and op -> launches, with the stream and device policy of every lab op. */
static PyObject *run_list_op(lab_state *state, tensor_lists *lists, const list_op *op, PyObject *stream_obj,
                             PyObject *result) {
    const char *func = lists->func;
    const int n = lists->n;
    int stream_given = 0;
    cudaStream_t stream = 0;
    if (lab_parse_stream_arg(state, stream_obj, func, &stream_given, &stream) < 0) return NULL;
    list_plan p;
    PyObject *returned = NULL;
    if (make_plan(lists, op, &p) < 0) goto done;
    if (p.n_fast + p.n_slow == 0 && !(op->norms && n > 0)) { /* nothing to compute: no CUDA call at all */
        returned = Py_NewRef(result);
        goto done;
    }

    /* Where each CAI array lives (the driver is asked once per 2 MiB page), then one device for all. */
    if (op->norms && lab_locate_array(state, op->norms, "out", -1, func) < 0) goto done;
    for (int k = 0; k < lists->n_lists; k++)
        for (int i = 0; i < n; i++)
            if (lab_locate_array(state, &lists->lists[k].arrays[i], lists->lists[k].name, i, func) < 0) goto done;
    if (check_devices(lists, op->norms) < 0) goto done;

    /* The launch stream and device, decided from the first array of each list (and the norms). */
    lab_array representatives[LAB_MAX_OPERANDS];
    int n_rep = 0;
    if (op->norms) representatives[n_rep++] = *op->norms;
    for (int k = lists->n_lists - 1; k >= 0 && n > 0 && n_rep < LAB_MAX_OPERANDS; k--)
        representatives[n_rep++] = lists->lists[k].arrays[0];
    lab_launch_scope scope;
    if (lab_launch_scope_begin(state, &scope, representatives, n_rep, stream_obj, stream_given, stream) < 0) goto done;
    const cudaStream_t launch_stream = scope.streams.launch;
    for (int s = 0; lab_launch_scope_ok(&scope) && s < p.n_staged; s++) { /* stage in */
        staged_array *st = &p.staged[s];
        const char *step = "staging a non-contiguous array";
        if (lab_launch_scope_step(&scope, step, cudaMallocAsync((void **)&st->temporary.data,
                                  (size_t)(st->original.numel * lab_dtype_itemsize[st->original.dtype]), launch_stream)))
            lab_launch_scope_step(&scope, step, copy_array(&st->temporary, &st->original, launch_stream));
        p.ptrs[st->slot] = st->temporary.data;
    }
    if (lab_launch_scope_ok(&scope))
        lab_launch_scope_step(&scope, "multi-tensor launch", launch_fast(lists, op, &p, launch_stream));
    if (lab_launch_scope_ok(&scope) && op->norms && p.n_fast == 0)  /* no non-empty tensor: every norm is 0 */
        lab_launch_scope_step(&scope, "zeroing the norms", cudaMemsetAsync(op->norms->data, 0, sizeof(float) * n, launch_stream));
    for (int s = 0; lab_launch_scope_ok(&scope) && s < p.n_slow; s++)
        lab_launch_scope_step(&scope, "kernel launch", lab_launch_elementwise(&p.slow_plans[s], launch_stream));
    for (int s = 0; s < p.n_staged; s++) { /* stage out, and free every temporary made */
        staged_array *st = &p.staged[s];
        if (!st->temporary.data) continue;
        if (lab_launch_scope_ok(&scope) && st->written)
            lab_launch_scope_step(&scope, "copying a staged array back", copy_array(&st->original, &st->temporary, launch_stream));
        lab_launch_scope_step(&scope, "freeing a staging buffer", cudaFreeAsync(st->temporary.data, launch_stream));
    }
    if (lab_launch_scope_end(state, &scope, func) < 0) goto done;
    for (int k = 0; k < lists->n_lists; k++) lab_launch_scope_note_stream(&scope, lists->lists[k].arrays, n);
    if (op->norms) lab_launch_scope_note_stream(&scope, op->norms, 1);
    returned = Py_NewRef(result);
done:
    free_plan(&p);
    return returned;
}

/* ---- the Python functions ---- */

#define N(id) LAB_NAME_##id

/* A keyword-only argument without a default. */
static int require(PyObject *value, const char *func, const char *name) {
    if (value) return 0;
    PyErr_Format(PyExc_TypeError, "%s() missing required keyword argument '%s'", func, name);
    return -1;
}

static list_op make_op(lab_mt_op mt, int elementwise_op, int integers, double alpha, double beta) {
    list_op op;
    memset(&op, 0, sizeof op);
    op.op = mt;
    op.elementwise_op = elementwise_op;
    op.integers = integers;
    op.params.alpha = (float)alpha;
    op.params.beta = (float)beta;
    op.scalars = (lab_scalars){{alpha, beta}, {(int64_t)alpha, (int64_t)beta}};
    return op;
}

/* foreach_add(xs, ys, outs, *, alpha=1) / foreach_mul(xs, ys, outs) */
static PyObject *foreach_binary(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                                const char *func, lab_mt_op mt, lab_op elementwise_op) {
    lab_state *state = lab_get_state(module);
    static const lab_signature signature = {3, 3, 5, {N(xs), N(ys), N(outs), N(alpha), N(stream)}};
    PyObject *slots[5];
    if (lab_parse_args(state, func, &signature, args, nargs, kwnames, slots) < 0) return NULL;
    double alpha = 1.0;
    if (slots[3]) {
        if (mt != LAB_MT_ADD) return PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument 'alpha'", func);
        if (read_float(slots[3], func, "alpha", &alpha) < 0) return NULL;
    }
    tensor_lists lists = {.func = func};
    static const char *const names[] = {"xs", "ys", "outs"};
    if (read_lists(state, &lists, names, slots, 3, 0b100, 0) < 0) return NULL;
    list_op op = make_op(mt, elementwise_op, 1, alpha, 1.0);
    PyObject *result = run_list_op(state, &lists, &op, slots[4], slots[2]);
    free_lists(&lists);
    return result;
}

static PyObject *py_foreach_add(PyObject *m, PyObject *const *a, Py_ssize_t n, PyObject *k) {
    return foreach_binary(m, a, n, k, "foreach_add", LAB_MT_ADD, LAB_OP_ADD);
}
static PyObject *py_foreach_mul(PyObject *m, PyObject *const *a, Py_ssize_t n, PyObject *k) {
    return foreach_binary(m, a, n, k, "foreach_mul", LAB_MT_MUL, LAB_OP_MUL);
}

static PyObject *py_foreach_axpby(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    lab_state *state = lab_get_state(module);
    const char *func = "foreach_axpby";
    static const lab_signature signature = {5, 5, 6, {N(alpha), N(xs), N(beta), N(ys), N(outs), N(stream)}};
    PyObject *slots[6];
    if (lab_parse_args(state, func, &signature, args, nargs, kwnames, slots) < 0) return NULL;
    double alpha, beta;
    if (read_float(slots[0], func, "alpha", &alpha) < 0 || read_float(slots[2], func, "beta", &beta) < 0) return NULL;
    tensor_lists lists = {.func = func};
    static const char *const names[] = {"xs", "ys", "outs"};
    PyObject *objects[3] = {slots[1], slots[3], slots[4]};
    if (read_lists(state, &lists, names, objects, 3, 0b100, 0) < 0) return NULL;
    list_op op = make_op(LAB_MT_AXPBY, LAB_OP_AXPBY, 0, alpha, beta);
    PyObject *result = run_list_op(state, &lists, &op, slots[5], slots[4]);
    free_lists(&lists);
    return result;
}

static PyObject *py_foreach_scale(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    lab_state *state = lab_get_state(module);
    const char *func = "foreach_scale";
    static const lab_signature signature = {3, 3, 4, {N(xs), N(scalar), N(outs), N(stream)}};
    PyObject *slots[4];
    if (lab_parse_args(state, func, &signature, args, nargs, kwnames, slots) < 0) return NULL;
    double scalar;
    if (read_float(slots[1], func, "scalar", &scalar) < 0) return NULL;
    tensor_lists lists = {.func = func};
    static const char *const names[] = {"xs", "outs"};
    PyObject *objects[2] = {slots[0], slots[2]};
    if (read_lists(state, &lists, names, objects, 2, 0b10, 0) < 0) return NULL;
    list_op op = make_op(LAB_MT_SCALE, LAB_OP_SCALE, 1, scalar, 1.0);
    PyObject *result = run_list_op(state, &lists, &op, slots[3], slots[2]);
    free_lists(&lists);
    return result;
}

static PyObject *py_foreach_copy(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    lab_state *state = lab_get_state(module);
    const char *func = "foreach_copy";
    static const lab_signature signature = {2, 2, 3, {N(srcs), N(dsts), N(stream)}};
    PyObject *slots[3];
    if (lab_parse_args(state, func, &signature, args, nargs, kwnames, slots) < 0) return NULL;
    tensor_lists lists = {.func = func};
    static const char *const names[] = {"srcs", "dsts"};
    if (read_lists(state, &lists, names, slots, 2, 0b10, 0) < 0) return NULL;
    list_op op = make_op(LAB_MT_COPY, LAB_OP_COPY, 1, 1.0, 1.0);
    PyObject *result = run_list_op(state, &lists, &op, slots[2], slots[1]);
    free_lists(&lists);
    return result;
}

static PyObject *py_foreach_norm(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    lab_state *state = lab_get_state(module);
    const char *func = "foreach_norm";
    static const lab_signature signature = {2, 2, 3, {N(xs), N(out), N(stream)}};
    PyObject *slots[3];
    if (lab_parse_args(state, func, &signature, args, nargs, kwnames, slots) < 0) return NULL;
    tensor_lists lists = {.func = func};
    static const char *const names[] = {"xs"};
    if (read_lists(state, &lists, names, slots, 1, 0, 0) < 0) return NULL;
    lab_array norms;
    PyObject *result = NULL;
    if (lab_read_array(state, slots[1], func, "out", &norms) < 0) goto done;
    if (norms.dtype != LAB_FLOAT32 || norms.ndim != 1 || norms.numel != lists.n || !lab_array_is_contiguous(&norms)) {
        PyErr_Format(PyExc_ValueError, "%s(): 'out' must be a contiguous 1-D float32 array of %d elements (one norm per "
                     "array of 'xs')", func, lists.n);
        goto done;
    }
    if (norms.readonly) {
        PyErr_Format(PyExc_ValueError, "%s(): argument 'out' is read-only", func);
        goto done;
    }
    list_op op = make_op(LAB_MT_NORM, -1, 0, 1.0, 1.0);
    op.norms = &norms;
    result = run_list_op(state, &lists, &op, slots[2], slots[1]);
done:
    free_lists(&lists);
    return result;
}

/* sgd_step(params, grads, momentum_bufs, *, lr, momentum=0, dampening=0, weight_decay=0,
 *          nesterov=False, first_step=False) */
static PyObject *py_sgd_step(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    lab_state *state = lab_get_state(module);
    const char *func = "sgd_step";
    static const lab_signature signature = {
        3, 3, 10, {N(params), N(grads), N(momentum_bufs), N(lr), N(momentum), N(dampening), N(weight_decay), N(nesterov),
                   N(first_step), N(stream)}};
    PyObject *slots[10];
    if (lab_parse_args(state, func, &signature, args, nargs, kwnames, slots) < 0) return NULL;
    if (require(slots[3], func, "lr") < 0) return NULL;
    double lr, momentum = 0, dampening = 0, weight_decay = 0;
    if (read_float(slots[3], func, "lr", &lr) < 0 || (slots[4] && read_float(slots[4], func, "momentum", &momentum) < 0) ||
        (slots[5] && read_float(slots[5], func, "dampening", &dampening) < 0) ||
        (slots[6] && read_float(slots[6], func, "weight_decay", &weight_decay) < 0))
        return NULL;
    const int nesterov = slots[7] ? PyObject_IsTrue(slots[7]) : 0;
    const int first_step = slots[8] ? PyObject_IsTrue(slots[8]) : 0;
    if (nesterov < 0 || first_step < 0) return NULL;
    if (lr < 0 || momentum < 0 || weight_decay < 0)
        return PyErr_Format(PyExc_ValueError, "%s(): lr, momentum and weight_decay must be >= 0", func);
    if (nesterov && (momentum <= 0 || dampening != 0))
        return PyErr_Format(PyExc_ValueError, "%s(): nesterov momentum requires a momentum and zero dampening", func);
    const int with_momentum = momentum != 0;
    if (with_momentum && slots[2] == Py_None)
        return PyErr_Format(PyExc_TypeError, "%s(): momentum=%R needs 'momentum_bufs' (a list of arrays), got None", func,
                            slots[4]);
    tensor_lists lists = {.func = func};
    static const char *const names[] = {"params", "grads", "momentum_bufs"};
    if (read_lists(state, &lists, names, slots, with_momentum ? 3 : 2, with_momentum ? 0b101 : 0b01, 0b100) < 0)
        return NULL;
    list_op op = make_op(with_momentum ? LAB_MT_SGD_MOMENTUM : LAB_MT_SGD, -1, 0, 1.0, 1.0);
    op.params.lr = (float)lr;
    op.params.momentum = (float)momentum;
    op.params.dampening = (float)dampening;
    op.params.weight_decay = (float)weight_decay;
    op.params.nesterov = nesterov;
    op.params.first_step = first_step;
    PyObject *result = run_list_op(state, &lists, &op, slots[9], Py_None);
    free_lists(&lists);
    return result;
}

/* adam_step(params, grads, exp_avgs, exp_avg_sqs, *, step, lr, beta1=0.9, beta2=0.999, eps=1e-8,
 *           weight_decay=0, decoupled_weight_decay=False) */
static PyObject *py_adam_step(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    lab_state *state = lab_get_state(module);
    const char *func = "adam_step";
    static const lab_signature signature = {
        4, 4, 12, {N(params), N(grads), N(exp_avgs), N(exp_avg_sqs), N(step), N(lr), N(beta1), N(beta2), N(eps),
                   N(weight_decay), N(decoupled_weight_decay), N(stream)}};
    PyObject *slots[12];
    if (lab_parse_args(state, func, &signature, args, nargs, kwnames, slots) < 0) return NULL;
    if (require(slots[4], func, "step") < 0 || require(slots[5], func, "lr") < 0) return NULL;
    if (!PyLong_Check(slots[4])) return PyErr_Format(PyExc_TypeError, "%s(): 'step' must be an int", func);
    const long long step = PyLong_AsLongLong(slots[4]);
    if (step == -1 && PyErr_Occurred()) return NULL;
    double lr, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
    if (read_float(slots[5], func, "lr", &lr) < 0 || (slots[6] && read_float(slots[6], func, "beta1", &beta1) < 0) ||
        (slots[7] && read_float(slots[7], func, "beta2", &beta2) < 0) ||
        (slots[8] && read_float(slots[8], func, "eps", &eps) < 0) ||
        (slots[9] && read_float(slots[9], func, "weight_decay", &weight_decay) < 0))
        return NULL;
    const int decoupled = slots[10] ? PyObject_IsTrue(slots[10]) : 0;
    if (decoupled < 0) return NULL;
    if (step < 1) return PyErr_Format(PyExc_ValueError, "%s(): 'step' counts from 1, got %lld", func, step);
    if (lr < 0 || eps < 0 || weight_decay < 0 || !(beta1 >= 0 && beta1 < 1) || !(beta2 >= 0 && beta2 < 1))
        return PyErr_Format(PyExc_ValueError, "%s(): need lr, eps, weight_decay >= 0 and 0 <= beta1, beta2 < 1", func);
    tensor_lists lists = {.func = func};
    static const char *const names[] = {"params", "grads", "exp_avgs", "exp_avg_sqs"};
    if (read_lists(state, &lists, names, slots, 4, 0b1101, 0b1100) < 0) return NULL;
    /* Bias corrections in double on the host, as torch computes them in Python floats. */
    const double bias_correction1 = 1.0 - pow(beta1, (double)step);
    const double bias_correction2 = 1.0 - pow(beta2, (double)step);
    list_op op = make_op(LAB_MT_ADAM, -1, 0, 1.0, 1.0);
    op.params.lr = (float)lr;
    op.params.beta1 = (float)beta1;
    op.params.beta2 = (float)beta2;
    op.params.eps = (float)eps;
    op.params.weight_decay = (float)weight_decay;
    op.params.decoupled_weight_decay = decoupled;
    op.params.step_size = (float)(lr / bias_correction1);
    op.params.bias_correction2_sqrt = (float)sqrt(bias_correction2);
    PyObject *result = run_list_op(state, &lists, &op, slots[11], Py_None);
    free_lists(&lists);
    return result;
}
#undef N

#define LAB_LIST_DOC " Lists are lists or tuples of CUDA arrays of equal length; the arrays at one index have one " \
    "shape. One launch covers many arrays (contiguous float16/bfloat16/float32); others take a slower, correct path."

PyMethodDef lab_foreach_methods[] = {
    {"foreach_add", (PyCFunction)(void (*)(void))py_foreach_add, METH_FASTCALL | METH_KEYWORDS,
     "foreach_add(xs, ys, outs, *, alpha=1, stream=None)\n--\n\nouts[i] = xs[i] + alpha * ys[i]; returns outs." LAB_LIST_DOC},
    {"foreach_mul", (PyCFunction)(void (*)(void))py_foreach_mul, METH_FASTCALL | METH_KEYWORDS,
     "foreach_mul(xs, ys, outs, *, stream=None)\n--\n\nouts[i] = xs[i] * ys[i]; returns outs." LAB_LIST_DOC},
    {"foreach_axpby", (PyCFunction)(void (*)(void))py_foreach_axpby, METH_FASTCALL | METH_KEYWORDS,
     "foreach_axpby(alpha, xs, beta, ys, outs, *, stream=None)\n--\n\nouts[i] = alpha * xs[i] + beta * ys[i]; returns "
     "outs." LAB_LIST_DOC},
    {"foreach_scale", (PyCFunction)(void (*)(void))py_foreach_scale, METH_FASTCALL | METH_KEYWORDS,
     "foreach_scale(xs, scalar, outs, *, stream=None)\n--\n\nouts[i] = scalar * xs[i]; returns outs." LAB_LIST_DOC},
    {"foreach_copy", (PyCFunction)(void (*)(void))py_foreach_copy, METH_FASTCALL | METH_KEYWORDS,
     "foreach_copy(srcs, dsts, *, stream=None)\n--\n\ndsts[i][...] = srcs[i]; returns dsts." LAB_LIST_DOC},
    {"foreach_norm", (PyCFunction)(void (*)(void))py_foreach_norm, METH_FASTCALL | METH_KEYWORDS,
     "foreach_norm(xs, out, *, stream=None)\n--\n\nout[i] = L2 norm of xs[i], into a 1-D float32 CUDA array of len(xs) "
     "elements, with no host sync; returns out." LAB_LIST_DOC},
    {"sgd_step", (PyCFunction)(void (*)(void))py_sgd_step, METH_FASTCALL | METH_KEYWORDS,
     "sgd_step(params, grads, momentum_bufs, *, lr, momentum=0, dampening=0, weight_decay=0, nesterov=False, "
     "first_step=False, stream=None)\n--\n\nOne torch.optim.SGD step over all params, in place (float32 math). "
     "momentum_bufs may be None without momentum; pass first_step=True on the first step, where torch starts the "
     "buffer as a copy of the gradient." LAB_LIST_DOC},
    {"adam_step", (PyCFunction)(void (*)(void))py_adam_step, METH_FASTCALL | METH_KEYWORDS,
     "adam_step(params, grads, exp_avgs, exp_avg_sqs, *, step, lr, beta1=0.9, beta2=0.999, eps=1e-08, "
     "weight_decay=0, decoupled_weight_decay=False, stream=None)\n--\n\nOne torch.optim.Adam step "
     "(AdamW with decoupled_weight_decay=True) over all params, in place: the same update and bias correction, float32 "
     "math for half-precision params; `step` counts from 1. State may be float32 for half params." LAB_LIST_DOC},
    {NULL, NULL, 0, NULL},
};
