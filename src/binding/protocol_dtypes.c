/* protocol_dtypes.c - the two protocol spellings of a dtype (see protocol_dtypes.h). */
#include "binding/protocol_dtypes.h"

#include <string.h>

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
