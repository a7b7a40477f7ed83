/* xla_ffi_abi.h - lab's own declarations of the part of XLA's FFI C ABI it uses: the layout of XLA's
 * FFI header, c_api.h, which jaxlib ships under jax.ffi.include_dir() (API version 0.1 and later). A
 * handler is a plain C function taking the call frame XLA builds - buffers, attributes, the execution
 * context - so lab needs no XLA header and no C++ to be called from inside jax.jit. Every struct
 * starts with its size: lab checks that XLA's is at least the size lab reads. */
#ifndef LAB_XLA_FFI_ABI_H
#define LAB_XLA_FFI_ABI_H

#include <stddef.h>
#include <stdint.h>

#define LAB_XLA_FFI_API_MAJOR 0
#define LAB_XLA_FFI_API_MINOR 1 /* the fields lab reads were all in the first minor version */

typedef struct lab_xla_ffi_extension {
    size_t struct_size;
    int type; /* 1: the metadata query */
    struct lab_xla_ffi_extension *next;
} lab_xla_ffi_extension;
#define LAB_XLA_FFI_EXTENSION_METADATA 1

typedef struct {
    size_t struct_size;
    lab_xla_ffi_extension *extension_start;
    int major_version, minor_version;
} lab_xla_ffi_api_version;

typedef struct lab_xla_ffi_error lab_xla_ffi_error; /* opaque: made by XLA's Error_Create */

typedef struct {
    size_t struct_size;
    lab_xla_ffi_extension *extension_start;
    const char *message;
    int errc; /* 3: INVALID_ARGUMENT, 13: INTERNAL */
} lab_xla_ffi_error_create_args;

typedef struct {
    size_t struct_size;
    lab_xla_ffi_extension *extension_start;
    void *ctx;
    void *stream; /* out: the cudaStream_t XLA runs this call on */
} lab_xla_ffi_stream_get_args;

/* The API table XLA passes in every frame: lab calls the first and the fifth entry. */
typedef struct {
    size_t struct_size;
    lab_xla_ffi_extension *extension_start;
    lab_xla_ffi_api_version api_version;
    const void *internal_api;
    lab_xla_ffi_error *(*error_create)(lab_xla_ffi_error_create_args *args);
    void *error_get_message;
    void *error_destroy;
    void *handler_register;
    lab_xla_ffi_error *(*stream_get)(lab_xla_ffi_stream_get_args *args);
} lab_xla_ffi_api;

/* XLA's element types (XLA_FFI_DataType) that lab computes on. */
enum {
    LAB_XLA_S8 = 2,
    LAB_XLA_S16 = 3,
    LAB_XLA_S32 = 4,
    LAB_XLA_S64 = 5,
    LAB_XLA_U8 = 6,
    LAB_XLA_F16 = 10,
    LAB_XLA_F32 = 11,
    LAB_XLA_F64 = 12,
    LAB_XLA_BF16 = 16
};

typedef struct {
    size_t struct_size;
    lab_xla_ffi_extension *extension_start;
    int dtype;
    void *data;
    int64_t rank;
    int64_t *dims;
} lab_xla_ffi_buffer;

typedef struct {
    size_t struct_size;
    lab_xla_ffi_extension *extension_start;
    int64_t size;
    int *types; /* 1: a buffer */
    void **items;
} lab_xla_ffi_list; /* the frame's arguments and results have this one layout */

typedef struct {
    const char *ptr;
    size_t len;
} lab_xla_ffi_bytes;

typedef struct {
    int dtype;
    void *value;
} lab_xla_ffi_scalar;

enum { LAB_XLA_ATTR_SCALAR = 3 };

typedef struct {
    size_t struct_size;
    lab_xla_ffi_extension *extension_start;
    int64_t size;
    int *types;
    lab_xla_ffi_bytes **names;
    void **attrs;
} lab_xla_ffi_attrs;

enum { LAB_XLA_STAGE_EXECUTE = 3 };

typedef struct {
    size_t struct_size;
    lab_xla_ffi_extension *extension_start;
    const lab_xla_ffi_api *api;
    void *ctx;
    int stage;
    lab_xla_ffi_list args;
    lab_xla_ffi_list rets;
    lab_xla_ffi_attrs attrs;
} lab_xla_ffi_call_frame;

/* The metadata query: XLA asks a handler which API version it was written against (and its traits)
 * by calling it with this extension and nothing else. */
typedef struct {
    size_t struct_size;
    lab_xla_ffi_api_version api_version;
    uint32_t traits;
} lab_xla_ffi_metadata;

/* The trait bit saying a handler may be recorded into XLA's command buffers (XLA_FFI_Handler_TraitsBits). */
#define LAB_XLA_FFI_TRAIT_COMMAND_BUFFER_COMPATIBLE 1u

typedef struct {
    lab_xla_ffi_extension extension_base;
    lab_xla_ffi_metadata *metadata;
} lab_xla_ffi_metadata_extension;

#endif
