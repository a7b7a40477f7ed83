/* dtype.h - lab's element types as the protocols spell them: CAI typestrs ("<f4") and DLPack
 * (code, bits) pairs, mapped to the lab_dtype enum the launchers take. */
#ifndef LAB_DTYPE_H
#define LAB_DTYPE_H

#include "kernels/launch.h"
#include "dlpack_exchange.h"

extern const char *const lab_dtype_names[LAB_NUM_DTYPES];
extern const int lab_dtype_itemsize[LAB_NUM_DTYPES];

static inline int lab_dtype_is_integer(lab_dtype d) { return d >= LAB_INT8; }

typedef enum {
    LAB_TYPESTR_OK = 0,
    LAB_TYPESTR_MALFORMED,   /* not of the form <byteorder><kind><size> */
    LAB_TYPESTR_BIG_ENDIAN,  /* '>' with a multi-byte type */
    LAB_TYPESTR_AMBIGUOUS,   /* 'V2': bfloat16 or any other 2-byte void type; never guessed */
    LAB_TYPESTR_UNSUPPORTED, /* well-formed, but not a type lab computes on */
} lab_typestr_result;

/* Parses a __cuda_array_interface__ typestr such as "<f4" or "|u1". */
lab_typestr_result lab_parse_typestr(const char *typestr, Py_ssize_t length, lab_dtype *dtype);

/* Maps a DLPack dtype (lanes must be 1); returns 0, or -1 when lab does not support it. */
int lab_dtype_from_dlpack(DLDataType dl, lab_dtype *dtype);

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
