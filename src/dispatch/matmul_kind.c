/* matmul_kind.c - the matrix product's launch (see matmul_kind.h): a cache of the library's
 * descriptors and chosen algorithm per problem, and the calls to cublasLtMatmul on the launch
 * stream with that stream's workspace.
 *
 * A problem is everything the heuristic looks at - types, transposes, sizes, leading dimensions,
 * batches, epilogue, how the pointers are aligned, whether a workspace is there - packed in one
 * key. The first call of a problem creates the descriptors and asks the heuristic; every later
 * one finds them by the key's hash, sets the pointers that change per call (bias, aux) and calls
 * cublasLtMatmul: no query, no allocation. The cache is bounded; when it fills it starts over. */
#include "dispatch/matmul_kind.h"

#include <string.h>

#include "dispatch/cublaslt.h"
#include "dispatch/dtype.h"
#include "dispatch/elementwise_kind.h"

typedef struct {
    int device, data_type, b_data_type, out_type, compute_type, scale_type, epilogue, fast_accum;
    int trans_a, trans_b, has_workspace, batched;
    int align[6];       /* log2 of each pointer's alignment (A, B, C, D, bias, aux), capped at 256 bytes */
    int64_t dims[3];    /* m, n, k */
    int64_t ld[5];      /* A, B, C, D, aux */
    int64_t strides[5]; /* batch strides, A, B, C, D, aux */
    int64_t batch_count;
} problem_key;

typedef struct {
    problem_key key;
    int used;
    lab_blas_desc desc;
    lab_blas_layout layouts[4]; /* A, B, C, D */
    lab_blas_algo algo;
    size_t workspace_size;
} problem_entry;

#define CACHE_SLOTS 256 /* a power of two */
static problem_entry cache[CACHE_SLOTS];
static int cache_used;

static uint64_t hash_key(const problem_key *key) {
    const unsigned char *bytes = (const unsigned char *)key;
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < sizeof *key; i++) h = (h ^ bytes[i]) * 1099511628211ull;
    return h;
}

static void release_entry(problem_entry *e) {
    if (e->desc) lab_cublaslt.desc_destroy(e->desc);
    for (int i = 0; i < 4; i++)
        if (e->layouts[i]) lab_cublaslt.layout_destroy(e->layouts[i]);
    memset(e, 0, sizeof *e);
}

static int alignment_log2(const void *pointer) {
    const uintptr_t address = (uintptr_t)pointer;
    int log2 = 0;
    while (log2 < 8 && !(address & ((uintptr_t)1 << log2))) log2++;
    return log2;
}

/* One step of building an entry: the status, or the first failure's, and where it happened. */
typedef struct {
    lab_blas_status status;
    const char *step;
} library_step;

static int step_ok(library_step *s, lab_blas_status status, const char *step) {
    if (s->status == LAB_BLAS_SUCCESS && status != LAB_BLAS_SUCCESS) {
        s->status = status;
        s->step = step;
    }
    return s->status == LAB_BLAS_SUCCESS;
}

static void make_layout(library_step *s, lab_blas_layout *layout, int type, const lab_matmul_operand *op,
                        const problem_key *key, int64_t stride) {
    if (!step_ok(s, lab_cublaslt.layout_create(layout, type, (uint64_t)op->rows, (uint64_t)op->cols, op->ld),
                 "creating a matrix layout")) {
        return;
    }
    if (!key->batched) return;
    const int32_t count = (int32_t)key->batch_count;
    step_ok(s, lab_cublaslt.layout_set(*layout, LAB_LAYOUT_BATCH_COUNT, &count, sizeof count),
            "setting a batch count");
    step_ok(s, lab_cublaslt.layout_set(*layout, LAB_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride),
            "setting a batch stride");
}

/* Points the descriptor at this call's bias (or bias gradient) and aux matrix: per call, since they
 * change while the problem stays; the heuristic also reads them, for their alignment. */
static void set_vectors(library_step *s, lab_blas_desc desc, const void *vector, const void *aux) {
    if (vector) {
        step_ok(s, lab_cublaslt.desc_set(desc, LAB_DESC_BIAS_POINTER, &vector, sizeof vector),
                "setting the bias pointer");
    }
    if (aux) {
        step_ok(s, lab_cublaslt.desc_set(desc, LAB_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux),
                "setting the aux pointer");
    }
}

/* Points the descriptor at this call's float8 scales (per call, as the vectors above). */
static void set_scales(library_step *s, lab_blas_desc desc, const lab_matmul_plan *p) {
    if (!p->A_scale) return;
    const void *a = p->A_scale->data, *b = p->B_scale->data;
    step_ok(s, lab_cublaslt.desc_set(desc, LAB_DESC_A_SCALE_POINTER, &a, sizeof a),
            "setting scale A's pointer");
    step_ok(s, lab_cublaslt.desc_set(desc, LAB_DESC_B_SCALE_POINTER, &b, sizeof b),
            "setting scale B's pointer");
}

/* Creates the descriptors of a new problem and asks the heuristic for its best algorithm. */
static void build_entry(library_step *s, problem_entry *e, const problem_key *key, const lab_matmul_plan *p,
                        lab_blas_handle handle, size_t workspace_bytes, const void *vector, const void *aux) {
    e->key = *key;
    if (!step_ok(s, lab_cublaslt.desc_create(&e->desc, key->compute_type, key->scale_type),
                 "creating the matmul descriptor")) {
        return;
    }
    const int32_t ta = key->trans_a, tb = key->trans_b;
    const uint32_t epilogue = (uint32_t)key->epilogue;
    step_ok(s, lab_cublaslt.desc_set(e->desc, LAB_DESC_TRANSA, &ta, sizeof ta), "setting transa");
    step_ok(s, lab_cublaslt.desc_set(e->desc, LAB_DESC_TRANSB, &tb, sizeof tb), "setting transb");
    step_ok(s, lab_cublaslt.desc_set(e->desc, LAB_DESC_EPILOGUE, &epilogue, sizeof epilogue),
            "setting the epilogue");
    if (key->ld[4]) {
        step_ok(s, lab_cublaslt.desc_set(e->desc, LAB_DESC_EPILOGUE_AUX_LD, &key->ld[4], sizeof key->ld[4]),
                "setting the aux leading dimension");
        if (key->batched) {
            step_ok(s,
                    lab_cublaslt.desc_set(e->desc, LAB_DESC_EPILOGUE_AUX_BATCH_STRIDE, &key->strides[4],
                                          sizeof key->strides[4]),
                    "setting the aux batch stride");
        }
    }
    if (key->fast_accum) {
        const int8_t fast = 1;
        step_ok(s, lab_cublaslt.desc_set(e->desc, LAB_DESC_FAST_ACCUM, &fast, sizeof fast),
                "setting fast accumulation");
    }
    if (p->A_scale && vector) { /* float8: the bias's type said, not left to the library's default */
        const int32_t bias_type = key->out_type;
        step_ok(s, lab_cublaslt.desc_set(e->desc, LAB_DESC_BIAS_DATA_TYPE, &bias_type, sizeof bias_type),
                "setting the bias type");
    }
    set_vectors(s, e->desc, vector, aux);
    set_scales(s, e->desc, p);
    make_layout(s, &e->layouts[0], key->data_type, &p->A, key, key->strides[0]);
    make_layout(s, &e->layouts[1], key->b_data_type, &p->B, key, key->strides[1]);
    make_layout(s, &e->layouts[2], key->out_type, &p->C, key, key->strides[2]);
    make_layout(s, &e->layouts[3], key->out_type, &p->D, key, key->strides[3]);
    if (s->status != LAB_BLAS_SUCCESS) return;

    lab_blas_preference preference = NULL;
    if (!step_ok(s, lab_cublaslt.preference_create(&preference), "creating a heuristic preference")) return;
    const uint64_t workspace = workspace_bytes;
    step_ok(
        s,
        lab_cublaslt.preference_set(preference, LAB_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof workspace),
        "setting the workspace size");
    const int attributes[4] = {LAB_PREF_MIN_ALIGNMENT_A_BYTES, LAB_PREF_MIN_ALIGNMENT_B_BYTES,
                               LAB_PREF_MIN_ALIGNMENT_C_BYTES, LAB_PREF_MIN_ALIGNMENT_D_BYTES};
    for (int i = 0; i < 4; i++) {
        const uint32_t bytes = 1u << key->align[i];
        step_ok(s, lab_cublaslt.preference_set(preference, attributes[i], &bytes, sizeof bytes),
                "setting an alignment");
    }
    lab_blas_heuristic result;
    int found = 0;
    if (step_ok(s,
                lab_cublaslt.heuristic(handle, e->desc, e->layouts[0], e->layouts[1], e->layouts[2],
                                       e->layouts[3], preference, 1, &result, &found),
                "asking the heuristic for an algorithm") &&
        found == 0) {
        step_ok(s, LAB_BLAS_NOT_SUPPORTED,
                "asking the heuristic for an algorithm (none fits these dtypes, "
                "layouts and epilogue)");
    }
    lab_cublaslt.preference_destroy(preference);
    if (s->status != LAB_BLAS_SUCCESS) return;
    e->algo = result.algo;
    e->workspace_size = result.workspace_size;
    e->used = 1;
}

/* The cached entry for a problem, built on a miss. NULL when building failed (s says why). */
static problem_entry *find_entry(library_step *s, const problem_key *key, const lab_matmul_plan *p,
                                 lab_blas_handle handle, size_t workspace_bytes, const void *vector,
                                 const void *aux) {
    uint64_t slot = hash_key(key) & (CACHE_SLOTS - 1);
    for (int probe = 0; probe < CACHE_SLOTS; probe++, slot = (slot + 1) & (CACHE_SLOTS - 1)) {
        if (!cache[slot].used) break;
        if (memcmp(&cache[slot].key, key, sizeof *key) == 0) return &cache[slot];
    }
    if (cache_used >= CACHE_SLOTS / 2) { /* keep probes short: start over */
        for (int i = 0; i < CACHE_SLOTS; i++)
            if (cache[i].used) release_entry(&cache[i]);
        cache_used = 0;
        slot = hash_key(key) & (CACHE_SLOTS - 1);
    }
    problem_entry *e = &cache[slot];
    build_entry(s, e, key, p, handle, workspace_bytes, vector, aux);
    if (s->status != LAB_BLAS_SUCCESS) {
        release_entry(e);
        return NULL;
    }
    cache_used++;
    return e;
}

static void fill_key(problem_key *key, const lab_matmul_call *c, int device, int has_workspace, int batched,
                     const char *const *pointers) { /* A, B, C, D, bias, aux (NULL: none) */
    const lab_matmul_plan *p = &c->plan;
    memset(key, 0, sizeof *key); /* padding too: keys are compared and hashed as bytes */
    key->device = device;
    key->data_type = p->data_type;
    key->b_data_type = p->b_data_type;
    key->out_type = p->out_type;
    key->compute_type = p->compute_type;
    key->scale_type = p->scale_type;
    key->epilogue = p->library_epilogue;
    key->fast_accum = p->fast_accum;
    key->trans_a = p->A.trans;
    key->trans_b = p->B.trans;
    key->has_workspace = has_workspace;
    key->batched = batched;
    for (int i = 0; i < 6; i++) key->align[i] = pointers[i] ? alignment_log2(pointers[i]) : -1;
    key->dims[0] = p->m;
    key->dims[1] = p->n;
    key->dims[2] = p->k;
    const lab_matmul_operand *ops[5] = {&p->A, &p->B, &p->C, &p->D, &p->aux};
    for (int i = 0; i < 5; i++) {
        key->ld[i] = ops[i]->ld;
        key->strides[i] = batched ? ops[i]->batch_stride : 0;
    }
    key->batch_count = batched ? p->batch_count : 1;
}

/* Element offset of batch `index` (row-major over the batch shape) for one operand. */
static int64_t batch_offset(const lab_matmul_plan *p, const lab_matmul_operand *op, int64_t index) {
    int64_t offset = 0;
    for (int d = p->n_batch_dims - 1; d >= 0; d--) {
        offset += (index % p->batch_shape[d]) * op->batch_strides[d];
        index /= p->batch_shape[d];
    }
    return offset;
}

/* Copies a or b, where they have no contiguous dimension, into scratch memory with lab's copy
 * kernel, on the launch stream before the product. The copy's plan is made here, once its buffer
 * exists (the iterator plans with real pointers); for a contiguous destination it cannot fail. */
static int stage_inputs(lab_matmul_call *c, lab_launch_scope *scope, const char *func) {
    for (int i = 0; i < 2; i++) {
        if (!c->stage[i]) continue;
        lab_array *copy = &c->staged[i];
        const size_t bytes = (size_t)copy->numel * (size_t)lab_dtype_itemsize[copy->dtype];
        void *memory = NULL;
        if (!lab_launch_scope_step(scope, "taking scratch memory for a staged copy",
                                   lab_scratch_alloc(&memory, bytes ? bytes : 1, scope->streams.launch))) {
            return 0;
        }
        copy->data = memory;
        lab_operands ops = {.count = 2, .n_outputs = 1};
        ops.arrays[0] = *copy;
        ops.arrays[1] = i ? *c->b : *c->a;
        ops.names[0] = "staged copy";
        ops.names[1] = i ? "b" : "a";
        lab_elementwise_launch copying;
        if (lab_plan_elementwise(&ops, 1, func, &copying) < 0) {
            lab_launch_scope_step(scope, "planning a staged copy", cudaErrorInvalidValue);
            return 0;
        }
        copying.op = LAB_OP_COPY;
        if (!lab_launch_scope_step(scope, "copying an operand with no contiguous dimension",
                                   lab_launch_elementwise(&copying, scope->streams.launch))) {
            return 0;
        }
    }
    return 1;
}

/* The product's cuBLASLt calls: one, or one per batch where the batches do not collapse. */
static void run_products(lab_matmul_call *c, lab_launch_scope *scope) {
    const lab_matmul_plan *p = &c->plan;
    const cudaStream_t stream = scope->streams.launch;
    void *workspace = NULL;
    size_t workspace_bytes = 0;
    if (!lab_launch_scope_step(scope, "making the stream's cuBLASLt workspace",
                               lab_cublaslt_workspace(scope->target, stream, &workspace, &workspace_bytes))) {
        return;
    }
    library_step s = {LAB_BLAS_SUCCESS, NULL};
    lab_blas_handle handle = NULL;
    step_ok(&s, lab_cublaslt_handle(scope->target, &handle), "creating the cuBLASLt handle");
    const lab_array *cc = c->c ? c->c : c->out;
    const size_t in_size = (size_t)lab_dtype_itemsize[c->a->dtype],
                 out_size = (size_t)lab_dtype_itemsize[c->out->dtype];
    const lab_array *aux = c->aux_out ? c->aux_out : c->aux;
    /* the vector the library's epilogue reads or writes: the bias, or the bias gradient it sums itself */
    const lab_array *vector = c->bias ? c->bias : c->sum_bias_grad ? NULL : c->bias_grad_out;
    const char *pointers[6] = {
        p->A_array->data,      p->B_array->data, cc->data, c->out->data, vector ? vector->data : NULL,
        aux ? aux->data : NULL};
    const int batched = p->collapsed && p->batch_count > 1;
    problem_key key;
    fill_key(&key, c, scope->target, workspace_bytes > 0, batched, pointers);
    problem_entry *e = s.status == LAB_BLAS_SUCCESS
                           ? find_entry(&s, &key, p, handle, workspace_bytes, pointers[4], pointers[5])
                           : NULL;
    const float alpha32 = (float)c->alpha, beta32 = (float)c->beta;
    const void *alpha = p->scale_type == LAB_CUDA_R_64F ? (const void *)&c->alpha : (const void *)&alpha32;
    const void *beta = p->scale_type == LAB_CUDA_R_64F ? (const void *)&c->beta : (const void *)&beta32;
    const int64_t calls = batched ? 1 : p->batch_count;
    for (int64_t i = 0; e && s.status == LAB_BLAS_SUCCESS && i < calls; i++) {
        const char *a = pointers[0] + (size_t)batch_offset(p, &p->A, i) * in_size;
        const char *b = pointers[1] + (size_t)batch_offset(p, &p->B, i) * in_size;
        const char *cp = pointers[2] + (size_t)batch_offset(p, &p->C, i) * out_size;
        char *d = (char *)pointers[3] + (size_t)batch_offset(p, &p->D, i) * out_size;
        set_vectors(&s, e->desc, pointers[4],
                    aux ? aux->data + (size_t)batch_offset(p, &p->aux, i) * out_size : NULL);
        set_scales(&s, e->desc, p);
        step_ok(&s,
                lab_cublaslt.matmul(handle, e->desc, alpha, a, e->layouts[0], b, e->layouts[1], beta, cp,
                                    e->layouts[2], d, e->layouts[3], &e->algo, workspace, e->workspace_size,
                                    stream),
                "cublasLtMatmul");
    }
    if (s.status != LAB_BLAS_SUCCESS) {
        lab_launch_scope_library_error(scope, "cuBLASLt", s.step, s.status,
                                       lab_cublaslt_status_name(s.status));
    }
}

static void launch(lab_op_call *call, lab_launch_scope *scope) {
    lab_matmul_call *c = call->description;
    const cudaStream_t stream = scope->streams.launch;
    if (c->out->numel == 0) { /* only a bias gradient to write: the sum over no rows is 0 */
        lab_launch_scope_step(
            scope, "zeroing bias_grad_out",
            cudaMemsetAsync(c->bias_grad_out->data, 0,
                            (size_t)c->bias_grad_out->numel * lab_dtype_itemsize[c->out->dtype], stream));
        return;
    }
    if (stage_inputs(c, scope, call->func)) run_products(c, scope);
    for (int i = 0; i < 2; i++) { /* given back whatever failed: stream-ordered, after the product */
        if (c->stage[i] && c->staged[i].data) {
            lab_launch_scope_step(scope, "returning a staged copy to the scratch pool",
                                  cudaFreeAsync(c->staged[i].data, stream));
        }
    }
    if (c->sum_bias_grad && lab_launch_scope_ok(scope)) lab_reduction_kind.launch(&c->bias_sum_call, scope);
}

static int plan(lab_op_call *call) {
    lab_matmul_call *c = call->description;
    return c->planned ? c->planned - 1 : lab_plan_matmul(c, call->func);
}

const lab_op_kind lab_matmul_kind = {"matmul", plan, launch};
