/* launch.h - the one boundary between the binding (C, level 2-3) and the kernels (CUDA, level 4).
 *
 * Everything that crosses it is plain C: a struct of pointers, sizes, strides, dtype and op enums and
 * the op's scalar parameters, and a cudaStream_t. Launchers return cudaError_t and never touch Python;
 * the C side turns a non-success code into lab.CudaError. */
#ifndef LAB_KERNELS_LAUNCH_H
#define LAB_KERNELS_LAUNCH_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "strided_layout.h" /* LAB_MAX_DIMS */

#ifdef __cplusplus
extern "C" {
#endif

/* Element types lab computes on. The order is also the order of the tables in dtype.c. */
typedef enum {
    LAB_FLOAT16 = 0,
    LAB_BFLOAT16,
    LAB_FLOAT32,
    LAB_FLOAT64,
    LAB_INT8,
    LAB_INT16,
    LAB_INT32,
    LAB_INT64,
    LAB_UINT8,
    LAB_NUM_DTYPES,
    /* Read only where an op asks for them (lab.matmul's a and b, lab.cast_float8's outputs, from
     * producers that name them through DLPack); every other op refuses them. */
    LAB_FLOAT8_E4M3FN = LAB_NUM_DTYPES,
    LAB_FLOAT8_E5M2,
    LAB_NUM_ALL_DTYPES
} lab_dtype;

/* Kernel-level elementwise ops, one per row of ops.def (some rows are internal variants that the
 * Python layer picks, e.g. fused_add_mul with a Python-number scale). */
typedef enum {
#define LAB_OP(id, functor, n_inputs, integers) LAB_OP_##id,
#include "ops.def"
#undef LAB_OP
    LAB_NUM_OPS
} lab_op;

/* Scalar parameters of an op (alpha, beta, a scale). The C layer fills the float half for float
 * dtypes and the integer half for integer dtypes; the kernel converts them to its compute type. */
typedef struct {
    double as_float[2];
    int64_t as_int[2];
} lab_scalars;

#define LAB_MAX_OPERANDS 4 /* the output and up to three inputs */

/* How the kernels walk memory; the plan (dispatch/elementwise_kind.c) picks one per call. */
typedef enum {
    LAB_PATH_EMPTY = 0,          /* no elements: nothing is launched */
    LAB_PATH_VECTORIZED,         /* one dtype, contiguous, every pointer 16-byte aligned: 16-byte packets */
    LAB_PATH_CONTIGUOUS,         /* one dtype, contiguous, some pointer misaligned: one element at a time */
    LAB_PATH_STRIDED,            /* one dtype, any strides (broadcast inputs have stride 0) */
    LAB_PATH_STRIDED_VECTORIZED, /* one dtype, the innermost dimension contiguous (or broadcast) for
                                    every operand and 16-byte aligned: strided over 16-byte packets */
    LAB_PATH_CASTING,            /* mixed dtypes: each operand converted on load / on store, any strides */
    LAB_PATH_CASTING_CONTIGUOUS, /* mixed dtypes, every operand contiguous and aligned to 8 elements:
                                    groups of 8 elements loaded raw, converted in registers */
} lab_path;

/* One elementwise launch, fully decided on the host. Operand 0 is the output, 1..n_inputs the
 * inputs. Dimensions run outermost first; strides are in bytes and may be negative or zero (inputs).
 * For the typed paths every operand has dtype `compute`'s storage type, dtypes[0]. */
typedef struct {
    lab_op op;
    lab_path path;
    int n_inputs;
    lab_dtype dtypes[LAB_MAX_OPERANDS];
    lab_dtype compute; /* CASTING: the type arithmetic is done in (never a half type) */
    char *data[LAB_MAX_OPERANDS];
    int ndim;
    int64_t numel;
    int64_t shape[LAB_MAX_DIMS];
    int64_t byte_strides[LAB_MAX_OPERANDS][LAB_MAX_DIMS];
    lab_scalars scalars;
} lab_elementwise_launch;

/* Launches one planned elementwise op on `stream`. LAB_PATH_EMPTY launches nothing. */
cudaError_t lab_launch_elementwise(const lab_elementwise_launch *launch, cudaStream_t stream);

/* ---- multi-tensor apply: one launch for many tensors (foreach ops, optimizer steps) ---- */

/* One per row of list_ops.def. */
typedef enum {
#define LAB_LIST_OP(id, step, lists, reads, writes, state, elementwise) LAB_MT_##id,
#include "list_ops.def"
#undef LAB_LIST_OP
    LAB_NUM_MT_OPS
} lab_mt_op;

/* Scalars of a multi-tensor op, all float32 (what the kernels compute in). */
typedef struct {
    float alpha, beta;
    float lr, weight_decay, momentum, dampening;
    float beta1, beta2, eps, step_size, bias_correction2_sqrt;
    int nesterov, first_step, decoupled_weight_decay;
} lab_mt_params;

/* Tensor i of list k is at ptrs[k][i] with sizes[i] contiguous elements. Lists that hold optimizer
 * state (SGD's buf, Adam's exp_avg and exp_avg_sq) have dtype state_dtype, the others dtype; both
 * are float16, bfloat16 or float32. For LAB_MT_NORM, norms[norm_index[i]] receives tensor i's norm,
 * the same bits on every run (chunks combined in order, no atomics); the caller zeroes `norms`
 * first, since empty tensors are not launched. large_params: the driver takes 32 KB of kernel
 * parameters (CUDA 12.1+), so one launch covers more tensors. */
typedef struct {
    lab_mt_op op;
    int n_lists;
    int n_tensors;
    lab_dtype dtype, state_dtype;
    char *const *ptrs[LAB_MAX_OPERANDS];
    const int64_t *sizes;
    float *norms;
    const int *norm_index;
    int n_norms;
    lab_mt_params params;
    int large_params;
} lab_multi_tensor_launch;

cudaError_t lab_launch_multi_tensor(const lab_multi_tensor_launch *launch, cudaStream_t stream);

/* ---- reductions: one output element from many input elements ---- */

/* One per row of reduce_ops.def. */
typedef enum {
#define LAB_REDUCE_OP(id, reducer, integers, index_output, empty_value, finish, unit) LAB_REDUCE_##id,
#include "reduce_ops.def"
#undef LAB_REDUCE_OP
    LAB_NUM_REDUCE_OPS
} lab_reduce_op;

/* What happens to the combined value before it is stored (reduce_ops.def's finish column). */
typedef enum {
    LAB_FINISH_STORE = 0, /* as it is (a variance: the sums turned into one) */
    LAB_FINISH_DIVIDE,    /* divided by the number of elements (mean) */
    LAB_FINISH_SQRT,      /* its square root (the 2-norm, std) */
} lab_reduce_finish;

/* How threads share the work; the plan (dispatch/reduction_kind.c) picks one per call. */
typedef enum {
    LAB_REDUCE_BY_QUAD = 0, /* four lanes per output: many outputs, rows of at most 64 (rows of 32) */
    LAB_REDUCE_BY_WARP,     /* a warp per output: many outputs, rows of 65 .. 4095 */
    LAB_REDUCE_BY_BLOCK,    /* a block per output: long rows */
    LAB_REDUCE_BY_COLUMN,   /* the innermost dimension kept (a column sum): neighbouring threads take
                               neighbouring outputs, a block's rows of threads share each output's
                               elements, and blocks split them further when outputs are few */
    LAB_REDUCE_SPLIT,       /* few outputs, long rows: blocks reduce slices of each output into
                               partials, a second kernel combines each output's partials in order */
} lab_reduce_strategy;

/* One reduction, decided on the host. The input's iteration space is split into kept dimensions
 * (one output each) and reduced ones, each list outermost first, strides in bytes; operand 0 is
 * the input, 1 the output, 2 the second input (dot: sum of products). Reduced dimensions keep their
 * logical order, so a position along them is the flat index argmax reports. The launcher decides
 * how many slices split an output (from the device's multiprocessor count). */
typedef struct {
    lab_reduce_op op;
    lab_reduce_strategy strategy;
    lab_dtype in_dtype, out_dtype;
    const char *in[2];
    char *out;
    double correction; /* var, std: divide by n - correction */
    int64_t n_outputs, n_reduce;
    int kept_ndim, reduced_ndim;
    int64_t kept_shape[LAB_MAX_DIMS], kept_strides[3][LAB_MAX_DIMS];
    int64_t reduced_shape[LAB_MAX_DIMS], reduced_strides[2][LAB_MAX_DIMS];
} lab_reduction_launch;

/* Launches one planned reduction on `stream` (split strategies take their partials from the
 * stream-ordered pool and free them on the stream). Deterministic: the same input gives bitwise the
 * same output on every run - fixed combination trees, no atomics. */
cudaError_t lab_launch_reduction(const lab_reduction_launch *launch, cudaStream_t stream);

/* Test-only tuning (src/testing): the waves of blocks a split reduction's first pass is cut into
 * (1 to 64, 4 by default; one wave fills every multiprocessor once). Returns the previous value. */
int lab_reduce_set_slice_waves(int waves);

/* ---- row-wise ops: softmax, the norms, cross-entropy, the GLU backwards: a row at a time ---- */

typedef enum {
    LAB_ROW_SOFTMAX = 0,
    LAB_ROW_LOG_SOFTMAX,
    LAB_ROW_SOFTMAX_BACKWARD,     /* grad_x = y * (grad_out - sum(grad_out * y)) */
    LAB_ROW_LOG_SOFTMAX_BACKWARD, /* grad_x = grad_out - exp(y) * sum(grad_out) */
    LAB_ROW_LAYER_NORM,
    LAB_ROW_RMS_NORM,
    LAB_ROW_LAYER_NORM_BACKWARD,
    LAB_ROW_RMS_NORM_BACKWARD,
    LAB_ROW_CROSS_ENTROPY, /* loss per row (or reduced), and optionally its gradient in the same pass */
    LAB_ROW_CROSS_ENTROPY_BACKWARD, /* the saved gradient times the upstream one, in place; 1 skips the row */
    LAB_ROW_SWIGLU_BACKWARD, /* grad_gate = grad_out * up * silu'(gate), grad_up = grad_out * silu(gate) */
    LAB_ROW_GEGLU_BACKWARD,  /* the same with gelu's tanh approximation */
    LAB_NUM_ROW_OPS
} lab_row_op;

/* Operands with one row each, and the per-row ones (MEAN, RSTD, TARGET, LOSS: one value per row).
 * Which ones an op uses: softmax OUT, X; the softmax backwards OUT (grad_x), X (y), GRAD
 * (grad_out); the norms OUT, X and optionally RESIDUAL + RESIDUAL_OUT (rms_norm), MEAN, RSTD;
 * their backwards OUT (grad_x), X, GRAD, MEAN (layer_norm), RSTD; cross-entropy X (logits), TARGET,
 * LOSS (per row, or one number for a reduced loss) and optionally OUT (the gradient), its backward
 * OUT and X (the gradient, scaled in place) and LOSS (the upstream gradient, read); the GLU
 * backwards GRAD (grad_out), X (gate), UP, OUT (grad_gate), GRAD_UP and optionally PRODUCT (the
 * forward's act(gate) * up, made again in the same pass for a weight gradient that needs it). */
typedef enum {
    LAB_ROW_OUT = 0,
    LAB_ROW_X,
    LAB_ROW_GRAD,
    LAB_ROW_RESIDUAL,
    LAB_ROW_RESIDUAL_OUT,
    LAB_ROW_MEAN,
    LAB_ROW_RSTD,
    LAB_ROW_TARGET,
    LAB_ROW_LOSS,
    LAB_ROW_PRODUCT,
    LAB_ROW_OPERANDS,
    /* The GLU backwards' second input and second output take the residual's slots: no op has both. */
    LAB_ROW_UP = LAB_ROW_RESIDUAL,
    LAB_ROW_GRAD_UP = LAB_ROW_RESIDUAL_OUT
} lab_row_operand;

/* How cross-entropy reduces its per-row losses: kept (a loss per row), their mean over the rows
 * whose target is not ignore_index, or their sum. */
typedef enum { LAB_LOSS_NONE = 0, LAB_LOSS_MEAN, LAB_LOSS_SUM } lab_loss_reduction;

/* Operands with one element per column: the norms' weight and bias, their gradients. */
typedef enum {
    LAB_COL_WEIGHT = 0,
    LAB_COL_BIAS,
    LAB_COL_GRAD_WEIGHT,
    LAB_COL_GRAD_BIAS,
    LAB_COL_OPERANDS
} lab_col_operand;

/* One row-wise op, decided on the host. Rows are the positions of the leading dimensions (merged
 * where every operand allows; outermost first, byte strides per operand, 0 for an operand the op
 * does not use); a row's elements are `n` apart by col_strides bytes. A NULL pointer is an unused
 * operand. The statistics (MEAN, RSTD) have stats_dtype (float32, or float64), TARGET target_dtype
 * (int32 or int64), LOSS loss_dtype; everything else dtype. The launcher picks how many threads
 * share a row and whether the row stays in registers. */
typedef struct {
    lab_row_op op;
    lab_dtype dtype, stats_dtype, target_dtype, loss_dtype;
    int64_t rows, n;
    double eps;
    /* cross-entropy */
    lab_loss_reduction reduction;
    int64_t ignore_index;
    double label_smoothing;
    double softcap; /* > 0: each logit x is read as softcap * tanh(x / softcap) (Gemma's); 0: as it is */
    double z_loss;  /* PaLM's: z_loss * logsumexp^2 added to each row's loss */
    /* With row_data[LAB_ROW_GRAD], the forward's gradient of each row is also multiplied by that
     * row's upstream gradient (upstream_dtype; lead_strides 0 for one number shared by every row). */
    lab_dtype upstream_dtype;
    char *row_data[LAB_ROW_OPERANDS];
    int64_t col_strides[LAB_ROW_OPERANDS];
    int lead_ndim;
    int64_t lead_shape[LAB_MAX_DIMS];
    int64_t lead_strides[LAB_ROW_OPERANDS][LAB_MAX_DIMS];
    char *col_data[LAB_COL_OPERANDS];
    int64_t col_data_strides[LAB_COL_OPERANDS];
} lab_rowwise_launch;

/* Cross-entropy in parts, for a caller that has its logits a block of rows at a time (the fused
 * linear cross-entropy computes them chunk by chunk and never holds them all):
 * - LAB_CE_COUNT: over `launch`'s targets (every row of the call), totals[0] = 1 / the rows that
 *   count and totals[1] = that count (totals in float32, float64 for float64 logits);
 * - LAB_CE_ROWS: `launch`'s rows (one chunk): each row's loss into row_losses (the compute type) when
 *   the loss is reduced, else into the LOSS operand; the gradient, where OUT is given, scaled by
 *   totals[0] for 'mean';
 * - LAB_CE_SUM: the reduced loss from every row's loss, in a fixed order, into the LOSS operand.
 * lab_launch_rowwise runs the three on one call's rows with its own scratch. */
typedef enum { LAB_CE_COUNT, LAB_CE_ROWS, LAB_CE_SUM } lab_cross_entropy_part;
cudaError_t lab_launch_cross_entropy_part(const lab_rowwise_launch *launch, lab_cross_entropy_part part,
                                          void *totals, void *row_losses, cudaStream_t stream);

/* Launches one planned row-wise op on `stream`. Weight and bias gradients are summed over rows
 * through per-block partials (lab's scratch pool) combined in a fixed order: deterministic. */
cudaError_t lab_launch_rowwise(const lab_rowwise_launch *launch, cudaStream_t stream);

/* Test-only tuning (src/testing): the most 16-byte chunks a row-wise lane holds, 1, 2 or 4 (the
 * default). Returns the previous value. */
int lab_rowwise_set_max_chunks(int chunks);
/* Test-only tuning: the fewest 16-byte vectors a row needs for the staged kernel (256 by default; a
 * larger value than any row turns staging off). Returns the previous value. */
int64_t lab_rowwise_set_staged_min_vectors(int64_t vectors);
/* Test-only tuning: the 16-byte vectors of a staged row each thread copies and computes, for every
 * op (0, the default, leaves each op its own): blocks of 128 to 1024 threads, the fewest that keep
 * to it. Returns the previous value. */
int lab_rowwise_set_staged_vectors_per_thread(int vectors);
/* Test-only tuning: the most bytes a staged row's copies (x, and a second input) may take past the
 * 47 KB every kernel has without opting in: -1, the default, half of the shared memory a block may
 * opt in to (two blocks an SM); else that many, at most what a block may have (47 KB or less: no
 * kernel opts in). Returns the previous value. */
int64_t lab_rowwise_set_staged_most_bytes(int64_t bytes);
/* Test-only tuning: the steps of a row (two 16-byte vectors a thread each) whose copies a window-rows
 * kernel keeps in flight (cross-entropy's long rows): -1, the default, six where the SM keeps its
 * blocks; 0 turns window rows off (the streamed walk), and rms_norm's backward's buffered rows with
 * them. Returns the previous value. */
int lab_rowwise_set_window_depth(int depth);
/* Test-only tuning: the blocks of a thread-block cluster a row of the norms' backward is cut across
 * (GPUs with clusters): -1, the default, the fewest (2, 4 or 8) whose slices fit a block, for rows
 * too long for the registers (else streamed); 0 never; 2, 4 or 8 that many, for any row that cuts into slices
 * of whole 16-byte vectors that fit. Returns the previous value. */
int lab_rowwise_set_cluster_blocks(int blocks);

/* ---- rotary position embedding: q and k rotated pairwise by angles from cos/sin tables ---- */

/* One of the (at most two) tensors a rope launch rotates: rows are its (batch, head, position)
 * triples, `shape` outermost first in the order the plan chose (by x's strides, so neighbouring
 * threads read neighbouring memory); strides in bytes for x, out, cos and sin (the tables' head
 * stride is 0: one angle for every head). col_strides: bytes between neighbours along the head
 * dimension. in_place: out is x's very view, so the unrotated tail is left as it is. */
#define LAB_ROPE_X 0
#define LAB_ROPE_OUT 1
#define LAB_ROPE_COS 2
#define LAB_ROPE_SIN 3
typedef struct {
    const char *x;
    char *out;
    int64_t rows;
    int64_t shape[3];
    int64_t strides[4][3];
    int64_t col_strides[4];
    int in_place;
} lab_rope_tensor;

/* Rotates the first rotary_dim elements of every row, in pairs: (j, j + rotary_dim / 2) in the
 * rotate-half convention (Llama, NeoX), (2i, 2i + 1) when interleaved (GPT-J). Forward, element j
 * of a pair whose partner is p: out[j] = x[j] cos[j] + sign(j) x[p] sin[j], sign -1 for the pair's
 * first element and +1 for its second; backward (the transpose, given the forward's output
 * gradient as x): out[j] = x[j] cos[j] - sign(j) x[p] sin[p]. pair_table: the tables hold one
 * column per pair (rotary_dim / 2 of them, flash-attn's form) instead of one per element (Hugging
 * Face's). x and out have `dtype`, the tables table_dtype (dtype or float32); halves compute in
 * float32. The rest of each row (rotary_dim .. head_dim) is copied. */
typedef struct {
    lab_dtype dtype, table_dtype;
    int interleaved, backward, pair_table;
    int64_t head_dim, rotary_dim;
    const char *cos, *sin;
    int n_tensors;
    lab_rope_tensor tensors[2];
} lab_rope_launch;

/* Launches one planned rope on `stream`: both tensors in one kernel. */
cudaError_t lab_launch_rope(const lab_rope_launch *launch, cudaStream_t stream);

/* ---- attention: softmax(q k^T * scale) v, flash-style (scores never leave the SM) ---- */

/* One operand of an attention launch: (batch, heads, positions, head_dim), or (tokens, heads,
 * head_dim) in a packed batch (batch_stride unused), as a base and strides in elements. head_dim's
 * stride is 1 and every other stride a multiple of 8 elements (rows start 16-byte aligned). */
typedef struct {
    char *data;
    int64_t batch_stride, position_stride, head_stride;
} lab_attention_tensor;

/* Key j is visible from query i (positions within their sequence) when j < seqlen_k and
 *   i + seqlen_k - seqlen_q - window_left <= j <= i + seqlen_k - seqlen_q + window_right,
 * each bound dropped where its window is -1: the diagonal sits at the bottom right when the
 * lengths differ (flash-attn's convention); causal is window_right 0. Scores are
 * s = softcap * tanh(q.k * scale / softcap) when softcap > 0, else q.k * scale. lse (float32,
 * NULL in a forward that does not keep it) holds each query row's log-sum-exp of its scores,
 * +inf for a row that sees no key (its output is 0). */
typedef struct {
    lab_dtype dtype;                 /* float16 or bfloat16; accumulation in float32 */
    int head_dim;                    /* 64, 96, 128 (256: forward only) */
    int64_t batch, heads_q, heads_k; /* heads_q a multiple of heads_k (grouped queries) */
    /* A fixed batch: every sequence's lengths. A packed one: the longest (the grid covers them). */
    int64_t seqlen_q, seqlen_k;
    /* A packed batch: batch + 1 cumulative lengths each (int32, strides in elements), and the rows
     * q and k hold; a sequence's bounds are clamped into those rows, so no cumulative length can
     * make a kernel touch memory outside its operands. NULL: a fixed batch. */
    const int32_t *cu_seqlens_q, *cu_seqlens_k;
    int64_t cu_seqlens_q_stride, cu_seqlens_k_stride, total_q, total_k;
    lab_attention_tensor q, k, v, out;
    lab_attention_tensor grad_out, grad_q, grad_k, grad_v; /* the backward's */
    float *lse;
    int64_t lse_batch_stride, lse_head_stride, lse_position_stride;
    float scale, softcap;
    int64_t window_left, window_right;
} lab_attention_launch;

/* The forward: out (and lse) from q, k, v. */
cudaError_t lab_launch_attention_forward(const lab_attention_launch *launch, cudaStream_t stream);

/* The backward: grad_q, grad_k, grad_v from grad_out, q, k, v, out and lse, with no atomics
 * (bitwise the same run to run): one kernel for grad_q (which also keeps each row's
 * sum(grad_out * out) in scratch memory), then one for grad_k and grad_v. */
cudaError_t lab_launch_attention_backward(const lab_attention_launch *launch, cudaStream_t stream);

/* ---- random numbers: Philox4x32-10 (kernels/philox.cuh), counter-based ---- */

typedef enum {
    LAB_RANDOM_UNIFORM = 0,
    LAB_RANDOM_NORMAL,
    LAB_RANDOM_BERNOULLI,
    LAB_RANDOM_DROPOUT, /* out = residual + (u >= p ? x / (1 - p) : 0), mask = (u >= p) */
    LAB_RANDOM_RANDINT  /* out = low + an integer uniform in [0, range), out of any lab dtype */
} lab_random_distribution;

/* A C-contiguous float array of numel elements filled from `distribution` with parameters a, b
 * (low, high; mean, std; p, unused; p, 1 / (1 - p)), or for randint an array of any lab dtype with
 * integers from [low, low + range). Element i's number depends only on (seed, offset, i): it takes
 * the words of Philox group offset + i / per_group (lab_random_per_group). Dropout also reads x (and
 * residual, where not NULL), of out's dtype and shape, and writes mask (uint8, 1 where x was kept) where not
 * NULL. */
typedef struct {
    void *out;
    const void *x, *residual;
    uint8_t *mask;
    lab_dtype dtype;
    int64_t numel;
    lab_random_distribution distribution;
    double a, b;
    int64_t low; /* randint's: integers in [low, low + range), range >= 1 */
    uint64_t range;
    uint64_t seed, offset;
    /* NULL, or (seed, offset) in device memory read at run time in place of `seed`, with `offset`
     * added to its offset: a lab.Graph's captured draw, whose replays write new state there. */
    const uint64_t *replay_state;
} lab_random_launch;
cudaError_t lab_launch_random(const lab_random_launch *launch, cudaStream_t stream);

/* Elements a Philox group of four words serves: one word each (four); two each (two) for float64
 * numbers and for integers from a range wider than 2^32; half a word each (eight) for float16 and
 * bfloat16 numbers other than normal ones (random.cu's elements_per_group, on the device). */
static inline int lab_random_per_group(const lab_random_launch *launch) {
    if (launch->distribution == LAB_RANDOM_RANDINT) return launch->range > ((uint64_t)1 << 32) ? 2 : 4;
    if (launch->dtype == LAB_FLOAT64) return 2;
    const int sixteen_bits = launch->dtype == LAB_FLOAT16 || launch->dtype == LAB_BFLOAT16;
    return sixteen_bits && launch->distribution != LAB_RANDOM_NORMAL ? 8 : 4;
}

/* Writes (seed, offset) into a lab.Graph's replay state on `stream`, ahead of the graph's launch. */
cudaError_t lab_launch_random_replay_state(uint64_t *replay_state, uint64_t seed, uint64_t offset,
                                           cudaStream_t stream);

/* ---- float8 casts: the operands of lab.matmul's float8 products (kernels/float8_cast.cu) ---- */

/* x (float16, bfloat16 or float32; rows x cols, C-contiguous) cast to float8 (e4m3fn or e5m2) as
 * x * (1 / *scale), rounded to nearest and saturated to the format's largest finite value (NaN stays
 * NaN): `scale` is the dequantization scale lab.matmul's scale_a / scale_b take, one float32 in device
 * memory (0 casts every element to 0). Writes out (rows x cols) and/or out_t (cols x rows, the
 * transpose), either may be NULL, and
 * where amax is not NULL the largest |x| (NaN if x holds one) into *amax. */
typedef struct {
    const void *x;
    lab_dtype x_dtype, out_dtype;
    int64_t rows, cols;
    void *out, *out_t;
    const float *scale;
    float *amax;
} lab_float8_cast_launch;
cudaError_t lab_launch_float8_cast(const lab_float8_cast_launch *launch, cudaStream_t stream);

/* Scratch memory for a kernel's own use on `stream`, from lab's per-device pool (kernels/scratch.cu),
 * which keeps its memory between calls; give it back with cudaFreeAsync on the same stream. */
cudaError_t lab_scratch_alloc(void **ptr, size_t bytes, cudaStream_t stream);

/* The scratch pool of the current device (NULL before its first scratch allocation): lab.memory_stats
 * reads it, lab.empty_cache trims it. */
cudaError_t lab_scratch_pool(cudaMemPool_t *pool);

/* Architectures this build carries, as "sm_80 sm_90 compute_90" (for `python -m lab`). */
const char *lab_compiled_architectures(void);

#ifdef __cplusplus
}
#endif

#endif /* LAB_KERNELS_LAUNCH_H */
