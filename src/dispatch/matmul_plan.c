/* matmul_plan.c - the matrix product's plan (see matmul_kind.h): every check and the mapping of
 * NumPy's row-major semantics onto column-major cuBLASLt, with no CUDA call.
 *
 * A 2-D view whose last dimension has stride 1 is row-major (its rows ld elements apart); one whose
 * second-to-last has stride 1 is column-major (a transposed view). Column-major storage of an r x c
 * row-major matrix X is X^T (c x r), so with a row-major out the library computes
 * out^T = b^T @ a^T: its A is b, its B is a, and each is read transposed or not as its own layout
 * says. A column-major out is computed directly as a @ b. */
#include "dispatch/matmul_kind.h"

#include <string.h>

#include "dispatch/cublaslt.h"
#include "dispatch/dtype.h"
#include "dispatch/iterator.h"

enum { ROW_MAJOR = 1, COLUMN_MAJOR = 2 };

int lab_matmul_fuse_dgelu_bias_grad = 0;

/* The orientation of matrix (rows, cols) with row stride rs and column stride cs, and its leading
 * dimension; 0 when neither stride is 1 (or a stride is negative or too small to hold a row). A
 * matrix that is both (a single row or column) is called `prefer`. */
static int orientation(int64_t rows, int64_t cols, int64_t rs, int64_t cs, int prefer, int64_t *ld) {
    const int64_t min_row_ld = cols > 1 ? cols : 1, min_col_ld = rows > 1 ? rows : 1;
    if (rows == 0 || cols == 0) { /* nothing is read: any strides will do */
        *ld = prefer == ROW_MAJOR ? min_row_ld : min_col_ld;
        return prefer;
    }
    const int row_major = (cs == 1 || cols <= 1) && (rows <= 1 || rs >= min_row_ld);
    const int column_major = (rs == 1 || rows <= 1) && (cols <= 1 || cs >= min_col_ld);
    if (row_major && (prefer == ROW_MAJOR || !column_major)) {
        *ld = rows <= 1 ? min_row_ld : rs;
        return ROW_MAJOR;
    }
    if (column_major) {
        *ld = cols <= 1 ? min_col_ld : cs;
        return COLUMN_MAJOR;
    }
    return 0;
}

/* The last two dimensions of x as a matrix: orientation and ld, or a ValueError naming it. */
static int matrix_view(const lab_array *x, const char *name, const char *func, int *o, int64_t *ld) {
    const int d = x->ndim;
    *o = orientation(x->shape[d - 2], x->shape[d - 1], x->strides[d - 2], x->strides[d - 1], ROW_MAJOR, ld);
    if (*o) return 0;
    lab_fail(LAB_FAILURE_VALUE,
             "%s(): argument '%s' has strides (%lld, %lld) in its last two dimensions; the matrix "
             "product reads a matrix whose rows or columns are contiguous (stride 1), as any "
             "C-contiguous array or its transpose is - copy it into one first (lab.copy)",
             func, name, (long long)x->strides[d - 2], (long long)x->strides[d - 1]);
    return -1;
}

/* The library operand that reads user matrix X (rows r, cols c, orientation o, leading dimension
 * ld) as X^T when `transposed`, else as X. Its column-major storage is X^T (c x r) when X is
 * row-major, X (r x c) when column-major: the transpose flag is whatever turns one into the other. */
static lab_matmul_operand library_operand(int o, int64_t r, int64_t c, int64_t ld, int transposed) {
    lab_matmul_operand op = {0};
    op.trans = (o == ROW_MAJOR) != transposed;
    op.rows = o == ROW_MAJOR ? c : r;
    op.cols = o == ROW_MAJOR ? r : c;
    op.ld = ld;
    return op;
}

static int cuda_type(lab_dtype d) {
    switch (d) {
    case LAB_FLOAT8_E4M3FN: return LAB_CUDA_R_8F_E4M3;
    case LAB_FLOAT8_E5M2: return LAB_CUDA_R_8F_E5M2;
    case LAB_FLOAT16: return LAB_CUDA_R_16F;
    case LAB_BFLOAT16: return LAB_CUDA_R_16BF;
    case LAB_FLOAT32: return LAB_CUDA_R_32F;
    default: return LAB_CUDA_R_64F;
    }
}

static int is_float(lab_dtype d) {
    return d == LAB_FLOAT16 || d == LAB_BFLOAT16 || d == LAB_FLOAT32 || d == LAB_FLOAT64;
}

/* a and b: float dtypes of one kind (or float8: matmul_float8.c's rules); out: theirs, or float32 for
 * half inputs; every other array out's dtype (cuBLASLt reads c, bias and aux, and writes the bias
 * gradient, in D's type), whatever the inputs. */
static int check_dtypes(const lab_matmul_call *c, const char *func) {
    const int float8 = lab_matmul_check_float8(c, func);
    if (float8 < 0) return -1;
    const lab_dtype in = c->a->dtype, out = c->out->dtype;
    if (!float8 && (!is_float(in) || c->b->dtype != in)) {
        lab_fail(LAB_FAILURE_TYPE,
                 "%s(): 'a' and 'b' must have one floating dtype (float16, bfloat16, float32 or float64), "
                 "got %s and %s",
                 func, lab_dtype_names[in], lab_dtype_names[c->b->dtype]);
        return -1;
    }
    const int half = in == LAB_FLOAT16 || in == LAB_BFLOAT16;
    if (!float8 && out != in && !(half && out == LAB_FLOAT32)) {
        lab_fail(LAB_FAILURE_TYPE, "%s(): argument 'out' has dtype %s; for %s inputs it must be %s%s", func,
                 lab_dtype_names[out], lab_dtype_names[in], lab_dtype_names[in], half ? " or float32" : "");
        return -1;
    }
    const lab_array *others[] = {c->c, c->bias, c->aux_out, c->aux, c->bias_grad_out};
    const char *names[] = {"c", "bias", "aux_out", "aux", "bias_grad_out"};
    for (int i = 0; i < 5; i++) {
        if (others[i] && others[i]->dtype != out) {
            lab_fail(LAB_FAILURE_TYPE, "%s(): argument '%s' has dtype %s; it must be out's, %s", func,
                     names[i], lab_dtype_names[others[i]->dtype], lab_dtype_names[out]);
            return -1;
        }
    }
    return 0;
}

static int check_matrix(const lab_array *x, const char *name, const char *func) {
    if (x->ndim >= 2) return 0;
    lab_fail(LAB_FAILURE_VALUE,
             "%s(): argument '%s' has %d dimension(s); the matrix product takes matrices (2-D) or batches "
             "of them (3-D and more)",
             func, name, x->ndim);
    return -1;
}

/* a (..., m, k) and b (..., k, n) chain; fills m, n, k. */
static int check_chain(const lab_array *a, const lab_array *b, const char *func, int64_t *m, int64_t *n,
                       int64_t *k) {
    if (check_matrix(a, "a", func) < 0 || check_matrix(b, "b", func) < 0) return -1;
    *m = a->shape[a->ndim - 2];
    *k = a->shape[a->ndim - 1];
    *n = b->shape[b->ndim - 1];
    if (b->shape[b->ndim - 2] == *k) return 0;
    lab_fail(LAB_FAILURE_VALUE,
             "%s(): shapes do not chain: 'a' is (..., %lld, %lld) and 'b' is (..., %lld, %lld)", func,
             (long long)*m, (long long)*k, (long long)b->shape[b->ndim - 2], (long long)*n);
    return -1;
}

/* The size of a's (or b's) batch dimension d of the result's nb, 1 where it has none. */
static int64_t batch_size(const lab_array *x, int nb, int d) {
    const int dx = d - (nb - (x->ndim - 2));
    return dx >= 0 ? x->shape[dx] : 1;
}

int lab_matmul_result_shape(const lab_array *a, const lab_array *b, const char *func, int64_t *shape,
                            int *ndim) {
    int64_t m, n, k;
    if (check_chain(a, b, func, &m, &n, &k) < 0) return -1;
    const int nb = (a->ndim > b->ndim ? a->ndim : b->ndim) - 2;
    for (int d = 0; d < nb; d++) {
        const int64_t sa = batch_size(a, nb, d), sb = batch_size(b, nb, d);
        if (sa != sb && sa != 1 && sb != 1) {
            lab_fail(LAB_FAILURE_VALUE,
                     "%s(): batch dimension %d: 'a' has %lld and 'b' %lld, which do not "
                     "broadcast (NumPy's rules)",
                     func, d, (long long)sa, (long long)sb);
            return -1;
        }
        shape[d] = sa == 1 ? sb : sa;
    }
    shape[nb] = m;
    shape[nb + 1] = n;
    *ndim = nb + 2;
    return 0;
}

/* Shapes: a (..., m, k), b (..., k, n), out (..., m, n) with out's leading dimensions NumPy's
 * broadcast of a's and b's. Fills the batch shape. */
static int check_shapes(lab_matmul_call *c, const char *func, int64_t *m, int64_t *n, int64_t *k) {
    const lab_array *a = c->a, *b = c->b, *out = c->out;
    if (check_chain(a, b, func, m, n, k) < 0 || check_matrix(out, "out", func) < 0) return -1;
    const int nb = (a->ndim > b->ndim ? a->ndim : b->ndim) - 2;
    if (out->ndim - 2 != nb || out->shape[out->ndim - 2] != *m || out->shape[out->ndim - 1] != *n) {
        lab_fail(LAB_FAILURE_VALUE,
                 "%s(): argument 'out' must have %d dimensions ending in (%lld, %lld): a @ b's shape", func,
                 nb + 2, (long long)*m, (long long)*n);
        return -1;
    }
    lab_matmul_plan *p = &c->plan;
    p->n_batch_dims = nb;
    p->batch_count = 1;
    for (int d = 0; d < nb; d++) {
        const int64_t sa = batch_size(a, nb, d), sb = batch_size(b, nb, d), size = out->shape[d];
        if ((sa != size && sa != 1) || (sb != size && sb != 1) || (sa == 1 && sb == 1 && size != 1)) {
            lab_fail(LAB_FAILURE_VALUE,
                     "%s(): batch dimension %d: 'a' has %lld, 'b' %lld and 'out' %lld; they must broadcast "
                     "(NumPy's rules) to out's",
                     func, d, (long long)sa, (long long)sb, (long long)size);
            return -1;
        }
        p->batch_shape[d] = size;
        p->batch_count *= size;
    }
    return 0;
}

/* Operand x's stride along batch dimension d of out (0 where x broadcasts along it). */
static int64_t batch_stride(const lab_array *x, int nb, int d) {
    const int dx = d - (nb - (x->ndim - 2));
    return dx >= 0 && x->shape[dx] != 1 ? x->strides[dx] : 0;
}

/* Fills op's per-dimension batch strides; returns 1 when they are one stride apart (the batches of a
 * strided-batched call), setting op->batch_stride. */
static int collapse_batches(lab_matmul_operand *op, const lab_array *x, const lab_matmul_plan *p) {
    const int nb = p->n_batch_dims;
    int64_t unit = -1, span = 1;
    int collapses = 1;
    for (int d = nb - 1; d >= 0; d--) {
        op->batch_strides[d] = batch_stride(x, nb, d);
        if (p->batch_shape[d] == 1) continue;
        if (unit < 0) unit = op->batch_strides[d]; /* the innermost batch dimension that counts */
        collapses &= op->batch_strides[d] == unit * span;
        span *= p->batch_shape[d];
    }
    op->batch_stride = unit < 0 ? 0 : unit;
    return collapses;
}

/* The array `x` (named `name`) must be the matrix out is, up to the leading dimension: same shape
 * and orientation (cuBLASLt reads C and the aux matrix in D's order). */
static int like_out(const lab_array *x, const char *name, const lab_matmul_call *c, int out_orientation,
                    const char *func, int64_t *ld, int allow_batch_broadcast) {
    const lab_array *out = c->out;
    int same = x->ndim == out->ndim || (allow_batch_broadcast && x->ndim >= 2 && x->ndim <= out->ndim);
    for (int d = 1; same && d <= x->ndim; d++) {
        const int64_t want = out->shape[out->ndim - d], have = x->shape[x->ndim - d];
        same = have == want || (allow_batch_broadcast && d > 2 && have == 1);
    }
    if (!same) {
        lab_fail(LAB_FAILURE_VALUE, "%s(): argument '%s' must have out's shape%s", func, name,
                 allow_batch_broadcast ? " (its leading dimensions may broadcast)" : "");
        return -1;
    }
    int o;
    if (matrix_view(x, name, func, &o, ld) < 0) return -1;
    if (o != out_orientation && x->shape[x->ndim - 2] > 1 && x->shape[x->ndim - 1] > 1) {
        lab_fail(LAB_FAILURE_VALUE,
                 "%s(): argument '%s' must be laid out as 'out' is (%s); cuBLASLt reads it in D's order",
                 func, name, out_orientation == ROW_MAJOR ? "rows contiguous" : "columns contiguous");
        return -1;
    }
    return 0;
}

/* A vector argument: 1-D, `length` elements, contiguous (cuBLASLt reads a packed vector). */
static int check_vector(const lab_array *v, const char *name, int64_t length, const char *what,
                        const char *func) {
    if (v->ndim != 1 || v->shape[0] != length || (length > 1 && v->strides[0] != 1)) {
        lab_fail(LAB_FAILURE_VALUE,
                 "%s(): argument '%s' must be a contiguous 1-D array of %lld elements (%s)", func, name,
                 (long long)length, what);
        return -1;
    }
    return 0;
}

/* Which epilogue the library runs, and every argument combination that cannot be. */
static int choose_epilogue(lab_matmul_call *c, int out_row_major, const char *func) {
    const int bias = c->bias != NULL, aux_out = c->aux_out != NULL, grad = c->bias_grad_out != NULL;
    const struct {
        int refused;
        const char *why;
    } rules[] = {
        {bias && grad, "'bias' and 'bias_grad_out' cannot both be given"},
        {c->aux && c->epilogue != LAB_MATMUL_DGELU, "'aux' is read by epilogue='dgelu' alone"},
        {aux_out && c->epilogue != LAB_MATMUL_GELU_TANH,
         "'aux_out' is written by epilogue='gelu_tanh' alone"},
        {c->epilogue == LAB_MATMUL_DGELU && !c->aux, "epilogue='dgelu' needs 'aux' (the saved gelu input)"},
        {c->epilogue == LAB_MATMUL_DGELU && bias, "epilogue='dgelu' takes no 'bias'"},
        {c->epilogue == LAB_MATMUL_DGELU && c->c, "epilogue='dgelu' takes no 'c'"},
        {grad && c->epilogue != LAB_MATMUL_NONE && c->epilogue != LAB_MATMUL_DGELU,
         "'bias_grad_out' goes with epilogue=None or 'dgelu'"},
        {(bias || grad) && !out_row_major, "'bias' and 'bias_grad_out' need an out whose rows are contiguous "
                                           "(the library's bias runs along D's "
                                           "rows)"},
    };
    const char *refused = NULL;
    for (size_t i = 0; !refused && i < sizeof rules / sizeof rules[0]; i++) {
        if (rules[i].refused) refused = rules[i].why;
    }
    if (refused) {
        lab_fail(LAB_FAILURE_VALUE, "%s(): %s", func, refused);
        return -1;
    }
    int e = LAB_EPILOGUE_DEFAULT;
    switch (c->epilogue) {
    case LAB_MATMUL_NONE:
        e = bias ? LAB_EPILOGUE_BIAS : grad ? LAB_EPILOGUE_BGRADB : LAB_EPILOGUE_DEFAULT;
        break;
    case LAB_MATMUL_RELU: e = bias ? LAB_EPILOGUE_RELU_BIAS : LAB_EPILOGUE_RELU; break;
    case LAB_MATMUL_GELU_TANH:
        e = aux_out ? (bias ? LAB_EPILOGUE_GELU_AUX_BIAS : LAB_EPILOGUE_GELU_AUX)
                    : (bias ? LAB_EPILOGUE_GELU_BIAS : LAB_EPILOGUE_GELU);
        break;
    case LAB_MATMUL_DGELU:
        c->sum_bias_grad = grad && !lab_matmul_fuse_dgelu_bias_grad;
        e = grad && !c->sum_bias_grad ? LAB_EPILOGUE_DGELU_BGRAD : LAB_EPILOGUE_DGELU;
        break;
    }
    c->plan.library_epilogue = e;
    return 0;
}

/* Nothing the product writes may share memory with what it reads (a GEMM reads its inputs while it
 * writes tiles of out), except c, which may be out itself. */
static int check_overlaps(const lab_matmul_call *c, const char *func) {
    const lab_array *written[] = {c->out, c->aux_out, c->bias_grad_out};
    const char *written_names[] = {"out", "aux_out", "bias_grad_out"};
    const lab_array *read[] = {c->a, c->b, c->c, c->bias, c->aux, c->out, c->aux_out, c->bias_grad_out};
    const char *read_names[] = {"a", "b", "c", "bias", "aux", "out", "aux_out", "bias_grad_out"};
    for (int w = 0; w < 3; w++) {
        if (!written[w]) continue;
        if (lab_check_writable(written[w], func, written_names[w]) < 0 ||
            (written[w]->numel > 0 && lab_check_no_self_overlap(written[w], written_names[w], func) < 0)) {
            return -1;
        }
        for (int r = 0; r < 8; r++) {
            if (!read[r] || read[r] == written[w] || read[r]->numel == 0 || written[w]->numel == 0) continue;
            const int same_view = read[r]->data == written[w]->data && read[r]->ndim == written[w]->ndim &&
                                  !lab_partially_overlap(read[r], written[w]);
            if (w == 0 && r == 2 && same_view) continue; /* c is out: out = alpha * a @ b + beta * out */
            if (lab_share_memory(read[r], written[w]) && !lab_disjoint_views(read[r], written[w])) {
                lab_fail(LAB_FAILURE_VALUE, "%s(): '%s' shares memory with '%s'; the product %s", func,
                         written_names[w], read_names[r],
                         w == 0 && r == 2 ? "may write into c only when c is out itself, the same view"
                                          : "must write where it does not read");
                return -1;
            }
        }
    }
    return 0;
}

/* Input i (a or b) as the product reads it: the array itself when its rows or columns are
 * contiguous, else a contiguous copy (c->staged[i], its memory taken from lab's scratch pool and
 * filled by lab's copy kernel at launch: section "layouts" of docs/gemm.md). Float8 inputs are read
 * in the one layout cuBLASLt's float8 kernels take (a's rows contiguous, b's columns: see
 * matmul_float8.c), or refused: lab's copy kernel does not take float8 (lab.cast_float8 writes the
 * layout wanted). */
static const lab_array *stage_input(lab_matmul_call *c, int i, int *o, int64_t *ld, const char *func) {
    const lab_array *x = i ? c->b : c->a;
    const int d = x->ndim, float8 = lab_dtype_is_float8(x->dtype), want = i ? COLUMN_MAJOR : ROW_MAJOR;
    *o = orientation(x->shape[d - 2], x->shape[d - 1], x->strides[d - 2], x->strides[d - 1],
                     float8 ? want : ROW_MAJOR, ld);
    if (float8 && (*o != want || *ld % 16 != 0)) {
        lab_fail(LAB_FAILURE_VALUE,
                 "%s(): float8 '%s' must have its %s contiguous and a leading dimension of a multiple of 16 "
                 "elements (cuBLASLt's float8 kernels read a row-major a and a column-major b, such as w.T "
                 "of a row-major weight w); it has strides (%lld, %lld)",
                 func, i ? "b" : "a", i ? "columns" : "rows", (long long)x->strides[d - 2],
                 (long long)x->strides[d - 1]);
        return NULL;
    }
    c->stage[i] = *o == 0;
    if (!c->stage[i]) return x;
    lab_array *copy = &c->staged[i];
    *copy = *x;
    copy->data = NULL; /* the scratch buffer's, at launch */
    copy->readonly = 0;
    copy->last_use = NULL;
    lab_fill_contiguous_strides(copy);
    *o = ROW_MAJOR;
    *ld = x->shape[d - 1] > 1 ? x->shape[d - 1] : 1;
    return copy;
}

/* bias_grad_out = out summed over its rows, planned by the reduction kind itself (its launch runs
 * after the product's, in the same scope). */
static int plan_bias_sum(lab_matmul_call *c, const char *func) {
    lab_reduction_call *r = &c->bias_sum;
    memset(r, 0, sizeof *r);
    r->op = LAB_REDUCE_SUM;
    r->in = c->out;
    r->out = c->bias_grad_out;
    r->in_names[0] = "out";
    r->reduced = 1u << (c->out->ndim - 2);
    c->bias_sum_call = (lab_op_call){.func = func, .description = r};
    return lab_reduction_kind.plan(&c->bias_sum_call) < 0 ? -1 : 0;
}

int lab_plan_matmul(lab_matmul_call *c, const char *func) {
    lab_matmul_plan *p = &c->plan;
    int64_t m, n, k;
    if (check_dtypes(c, func) < 0 || check_shapes(c, func, &m, &n, &k) < 0) return -1;
    int oa, ob, oo;
    int64_t lda, ldb, ldo;
    const lab_array *a = stage_input(c, 0, &oa, &lda, func),
                    *b = a ? stage_input(c, 1, &ob, &ldb, func) : NULL;
    if (!b || matrix_view(c->out, "out", func, &oo, &ldo) < 0) return -1;
    p->swapped = oo == ROW_MAJOR;
    const int t = p->swapped; /* out row-major: D = out^T = b^T @ a^T */
    p->A_array = t ? b : a;
    p->B_array = t ? a : b;
    p->A = t ? library_operand(ob, k, n, ldb, 1) : library_operand(oa, m, k, lda, 0);
    p->B = t ? library_operand(oa, m, k, lda, 1) : library_operand(ob, k, n, ldb, 0);
    p->D = library_operand(oo, m, n, ldo, t);
    p->m = t ? n : m;
    p->n = t ? m : n;
    p->k = k;
    p->C = p->D;
    if (c->c) {
        int64_t ldc;
        if (like_out(c->c, "c", c, oo, func, &ldc, 1) < 0) return -1;
        p->C.ld = ldc;
    } else if (c->beta != 0.0) {
        lab_fail(LAB_FAILURE_VALUE,
                 "%s(): argument 'beta' scales 'c', which was not given (without c, beta "
                 "must be 0)",
                 func);
        return -1;
    }
    const lab_array *aux = c->aux_out ? c->aux_out : c->aux;
    if (aux) {
        const char *name = c->aux_out ? "aux_out" : "aux";
        if (like_out(aux, name, c, oo, func, &p->aux.ld, 0) < 0) return -1;
        if (p->aux.ld % 8 != 0) {
            lab_fail(LAB_FAILURE_VALUE,
                     "%s(): argument '%s' has a leading dimension of %lld elements; cuBLASLt needs a "
                     "multiple of 8",
                     func, name, (long long)p->aux.ld);
            return -1;
        }
    }
    if (choose_epilogue(c, p->swapped, func) < 0) return -1;
    if (c->bias && check_vector(c->bias, "bias", n, "one per column of out", func) < 0) return -1;
    if (c->bias_grad_out) {
        const int per_column = c->epilogue == LAB_MATMUL_DGELU;
        if (check_vector(c->bias_grad_out, "bias_grad_out", per_column ? n : m,
                         per_column ? "out summed over its rows" : "a summed over its last dimension",
                         func) < 0) {
            return -1;
        }
    }
    if ((c->bias_grad_out || c->bias) && p->batch_count > 1) {
        lab_fail(LAB_FAILURE_VALUE,
                 "%s(): 'bias' and 'bias_grad_out' are for 2-D products; this one is "
                 "batched",
                 func);
        return -1;
    }
    if (check_overlaps(c, func) < 0) return -1;

    p->collapsed = p->batch_count <= 0x7fffffff;
    p->collapsed &= collapse_batches(&p->A, p->A_array, p);
    p->collapsed &= collapse_batches(&p->B, p->B_array, p);
    p->collapsed &= collapse_batches(&p->D, c->out, p);
    p->collapsed &= collapse_batches(&p->C, c->c ? c->c : c->out, p);
    if (aux) p->collapsed &= collapse_batches(&p->aux, aux, p);

    const lab_dtype in = c->a->dtype;
    p->data_type = cuda_type(p->A_array->dtype);
    p->b_data_type = cuda_type(p->B_array->dtype);
    p->A_scale = t ? c->scale_b : c->scale_a;
    p->B_scale = t ? c->scale_a : c->scale_b;
    p->fast_accum = c->fast_accum;
    p->out_type = cuda_type(c->out->dtype);
    p->compute_type = in == LAB_FLOAT64                    ? LAB_COMPUTE_64F
                      : in == LAB_FLOAT32 && c->allow_tf32 ? LAB_COMPUTE_32F_FAST_TF32
                                                           : LAB_COMPUTE_32F;
    p->scale_type = in == LAB_FLOAT64 ? LAB_CUDA_R_64F : LAB_CUDA_R_32F;
    if (c->sum_bias_grad && plan_bias_sum(c, func) < 0) return -1;
    const int zero_bias_grad = c->bias_grad_out && c->bias_grad_out->numel > 0;
    return (c->out->numel > 0 || zero_bias_grad) ? 1 : 0;
}
