/* protocol_dtypes.h - lab's element types as the protocols spell them: __cuda_array_interface__
 * typestrs ("<f4") and DLPack (code, bits, lanes) triples, mapped to the lab_dtype enum. */
#ifndef LAB_PROTOCOL_DTYPES_H
#define LAB_PROTOCOL_DTYPES_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "dispatch/dlpack_exchange.h"
#include "dispatch/dtype.h"

typedef enum {
    LAB_TYPESTR_OK = 0,
    LAB_TYPESTR_MALFORMED,   /* not of the form <byteorder><kind><size> */
    LAB_TYPESTR_BIG_ENDIAN,  /* '>' with a multi-byte type */
    LAB_TYPESTR_AMBIGUOUS,   /* 'V2': bfloat16 or any other 2-byte void type; never guessed */
    LAB_TYPESTR_UNSUPPORTED, /* well-formed, but not a type lab computes on */
} lab_typestr_result;

/* How lab.Array spells each dtype when it exports itself: a typestr (NULL for bfloat16, which
 * __cuda_array_interface__ cannot say) and a DLPack type. */
extern const char *const lab_dtype_typestr[LAB_NUM_DTYPES];
extern const DLDataType lab_dtype_dlpack[LAB_NUM_DTYPES];

/* Parses a __cuda_array_interface__ typestr such as "<f4" or "|u1". */
lab_typestr_result lab_parse_typestr(const char *typestr, Py_ssize_t length, lab_dtype *dtype);

/* Maps a DLPack dtype (lanes must be 1); returns 0, or -1 when lab does not support it. The float8
 * types (DLPack 1.1's codes) map too: the reader refuses them where the op does not ask for them. */
int lab_dtype_from_dlpack(DLDataType dl, lab_dtype *dtype);

#endif
