/* dtype.c - the tables behind dtype.h: names, item sizes, and the two protocol spellings. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "dtype.h"

const char *const lab_dtype_names[LAB_NUM_DTYPES] = {
    "float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8",
};
const int lab_dtype_itemsize[LAB_NUM_DTYPES] = {2, 2, 4, 8, 1, 2, 4, 8, 1};

lab_typestr_result lab_parse_typestr(const char *typestr, Py_ssize_t length, lab_dtype *dtype) {
    /* <byte order><kind><item size in bytes>, e.g. "<f4"; the size may have several digits ("<V16") */
    if (length < 3 || length > 8) return LAB_TYPESTR_MALFORMED;
    const char order = typestr[0], kind = typestr[1];
    if (order != '<' && order != '>' && order != '|' && order != '=') return LAB_TYPESTR_MALFORMED;
    if (!strchr("biufcmMOSUV", kind) || kind == '\0') return LAB_TYPESTR_MALFORMED;
    int size = 0;
    for (Py_ssize_t i = 2; i < length; i++) {
        if (typestr[i] < '0' || typestr[i] > '9') return LAB_TYPESTR_MALFORMED;
        size = size * 10 + (typestr[i] - '0');
    }
    if (size == 0) return LAB_TYPESTR_MALFORMED;
    if (order == '>' && size > 1) return LAB_TYPESTR_BIG_ENDIAN;
    if (kind == 'V' && size == 2) return LAB_TYPESTR_AMBIGUOUS;
    switch (kind) {
    case 'f':
        if (size == 2) { *dtype = LAB_FLOAT16; return LAB_TYPESTR_OK; }
        if (size == 4) { *dtype = LAB_FLOAT32; return LAB_TYPESTR_OK; }
        if (size == 8) { *dtype = LAB_FLOAT64; return LAB_TYPESTR_OK; }
        break;
    case 'i':
        if (size == 1) { *dtype = LAB_INT8; return LAB_TYPESTR_OK; }
        if (size == 2) { *dtype = LAB_INT16; return LAB_TYPESTR_OK; }
        if (size == 4) { *dtype = LAB_INT32; return LAB_TYPESTR_OK; }
        if (size == 8) { *dtype = LAB_INT64; return LAB_TYPESTR_OK; }
        break;
    case 'u':
        if (size == 1) { *dtype = LAB_UINT8; return LAB_TYPESTR_OK; }
        break;
    default:
        break;
    }
    return LAB_TYPESTR_UNSUPPORTED;
}

int lab_dtype_from_dlpack(DLDataType dl, lab_dtype *dtype) {
    if (dl.lanes != 1) return -1;
    switch (dl.code) {
    case kDLFloat:
        if (dl.bits == 16) { *dtype = LAB_FLOAT16; return 0; }
        if (dl.bits == 32) { *dtype = LAB_FLOAT32; return 0; }
        if (dl.bits == 64) { *dtype = LAB_FLOAT64; return 0; }
        return -1;
    case kDLBfloat:
        if (dl.bits == 16) { *dtype = LAB_BFLOAT16; return 0; }
        return -1;
    case kDLInt:
        if (dl.bits == 8) { *dtype = LAB_INT8; return 0; }
        if (dl.bits == 16) { *dtype = LAB_INT16; return 0; }
        if (dl.bits == 32) { *dtype = LAB_INT32; return 0; }
        if (dl.bits == 64) { *dtype = LAB_INT64; return 0; }
        return -1;
    case kDLUInt:
        if (dl.bits == 8) { *dtype = LAB_UINT8; return 0; }
        return -1;
    default:
        return -1;
    }
}

/* Bits of the widest integer a float type holds exactly: float16/bfloat16 8 (uint8/int8), float32 16. */
static int float_holds_int_bits(lab_dtype f) { return f == LAB_FLOAT64 ? 64 : f == LAB_FLOAT32 ? 16 : 8; }
static int int_bits(lab_dtype i) { return 8 * lab_dtype_itemsize[i]; }

lab_dtype lab_promote(lab_dtype a, lab_dtype b) {
    if (a == b) return a;
    const int a_int = lab_dtype_is_integer(a), b_int = lab_dtype_is_integer(b);
    if (!a_int && !b_int) {
        if (lab_dtype_is_half(a) && lab_dtype_is_half(b)) return LAB_FLOAT32; /* float16 with bfloat16 */
        return lab_dtype_itemsize[a] >= lab_dtype_itemsize[b] ? a : b;
    }
    if (a_int && b_int) {
        if (a == LAB_UINT8 || b == LAB_UINT8) {
            const lab_dtype other = a == LAB_UINT8 ? b : a; /* a signed type: it needs 16 bits to hold uint8 */
            return other == LAB_INT8 ? LAB_INT16 : other;
        }
        return lab_dtype_itemsize[a] >= lab_dtype_itemsize[b] ? a : b;
    }
    const lab_dtype f = a_int ? b : a, i = a_int ? a : b;
    /* the integer's magnitude needs bits; a signed int8 and uint8 both fit in 8 */
    if (int_bits(i) <= float_holds_int_bits(f)) return f;
    return int_bits(i) <= 16 ? LAB_FLOAT32 : LAB_FLOAT64;
}

const char *lab_supported_dtypes_text(int integers) {
    return integers ? "float16, bfloat16, float32, float64, int8, int16, int32, int64, uint8"
                    : "float16, bfloat16, float32, float64";
}
