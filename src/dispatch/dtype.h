/* dtype.h - facts about lab's element types that plans need: names, item sizes, NumPy's type
 * promotion and the type arithmetic happens in. (How the protocols spell a dtype is the binding's
 * business: binding/protocol_dtypes.h.) */
#ifndef LAB_DTYPE_H
#define LAB_DTYPE_H

#include "kernels/launch.h"

extern const char *const lab_dtype_names[LAB_NUM_ALL_DTYPES];
extern const int lab_dtype_itemsize[LAB_NUM_ALL_DTYPES];

static inline int lab_dtype_is_integer(lab_dtype d) { return d >= LAB_INT8 && d <= LAB_UINT8; }

static inline int lab_dtype_is_float8(lab_dtype d) { return d == LAB_FLOAT8_E4M3FN || d == LAB_FLOAT8_E5M2; }

static inline int lab_dtype_is_half(lab_dtype d) { return d == LAB_FLOAT16 || d == LAB_BFLOAT16; }

/* NumPy's result type for a pair (bfloat16 promoted like float16: it also holds int8/uint8 exactly;
 * float16 with bfloat16 gives float32, as in PyTorch). */
lab_dtype lab_promote(lab_dtype a, lab_dtype b);

/* The type arithmetic is done in for a promoted type: half types compute in float32. */
static inline lab_dtype lab_compute_dtype(lab_dtype promoted) {
    return lab_dtype_is_half(promoted) ? LAB_FLOAT32 : promoted;
}

/* "float16, bfloat16, ..." for error messages; integers=0 lists the float types only. */
const char *lab_supported_dtypes_text(int integers);

#endif
