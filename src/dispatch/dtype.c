/* dtype.c - the tables behind dtype.h: names, item sizes, promotion. */
#include "dispatch/dtype.h"

const char *const lab_dtype_names[LAB_NUM_ALL_DTYPES] = {
    "float16", "bfloat16", "float32", "float64",       "int8",        "int16",
    "int32",   "int64",    "uint8",   "float8_e4m3fn", "float8_e5m2",
};
const int lab_dtype_itemsize[LAB_NUM_ALL_DTYPES] = {2, 2, 4, 8, 1, 2, 4, 8, 1, 1, 1};

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
            const lab_dtype other =
                a == LAB_UINT8 ? b : a; /* a signed type: it needs 16 bits to hold uint8 */
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
