/* protocol_dtypes.c - the two protocol spellings of a dtype (see protocol_dtypes.h). One table per
 * protocol serves both directions: lab.Array exports with it, and the reader looks types up in it. */
#include "binding/protocol_dtypes.h"

#include <string.h>

const char *const lab_dtype_typestr[LAB_NUM_DTYPES] = {"<f2", NULL,  "<f4", "<f8", "|i1",
                                                       "<i2", "<i4", "<i8", "|u1"};
const DLDataType lab_dtype_dlpack[LAB_NUM_DTYPES] = {
    {kDLFloat, 16, 1}, {kDLBfloat, 16, 1}, {kDLFloat, 32, 1}, {kDLFloat, 64, 1}, {kDLInt, 8, 1},
    {kDLInt, 16, 1},   {kDLInt, 32, 1},    {kDLInt, 64, 1},   {kDLUInt, 8, 1},
};

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
    /* The byte order of a one-byte type is '|' by convention, but any order names the same type. */
    for (int d = 0; d < LAB_NUM_DTYPES; d++) {
        const char *spelling = lab_dtype_typestr[d];
        if (spelling && spelling[1] == kind && lab_dtype_itemsize[d] == size) {
            *dtype = (lab_dtype)d;
            return LAB_TYPESTR_OK;
        }
    }
    return LAB_TYPESTR_UNSUPPORTED;
}

int lab_dtype_from_dlpack(DLDataType dl, lab_dtype *dtype) {
    static const struct {
        DLDataType spelled;
        lab_dtype dtype;
    } float8[] = {{{kDLFloat8_e4m3fn, 8, 1}, LAB_FLOAT8_E4M3FN}, {{kDLFloat8_e5m2, 8, 1}, LAB_FLOAT8_E5M2}};
    for (size_t i = 0; i < sizeof float8 / sizeof float8[0]; i++) {
        if (dl.code == float8[i].spelled.code && dl.bits == float8[i].spelled.bits && dl.lanes == 1) {
            *dtype = float8[i].dtype;
            return 0;
        }
    }
    for (int d = 0; d < LAB_NUM_DTYPES; d++) {
        const DLDataType known = lab_dtype_dlpack[d];
        if (dl.code == known.code && dl.bits == known.bits && dl.lanes == known.lanes) {
            *dtype = (lab_dtype)d;
            return 0;
        }
    }
    return -1;
}
