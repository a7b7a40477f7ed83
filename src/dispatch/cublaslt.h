/* cublaslt.h - NVIDIA's cuBLASLt, bound the way a raw C extension binds a vendor library: loaded
 * with dlopen at the first matrix product (never linked, so `import lab` works on any machine),
 * its functions found with dlsym into one table, its handles and workspaces kept per device and
 * stream (level 3).
 *
 * No cuBLAS header is needed to build lab: the few types, enums and prototypes lab calls are
 * declared here with the values of NVIDIA's own cuBLASLt header, a C ABI that NVIDIA versions
 * (cuBLAS 12 and 13 keep these values). Only what lab uses is declared. */
#ifndef LAB_CUBLASLT_H
#define LAB_CUBLASLT_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#include "dispatch/dispatch_state.h"

/* ---- the ABI: opaque handles, enums, the heuristic's result ---- */

typedef int lab_blas_status; /* cublasStatus_t: 0 is CUBLAS_STATUS_SUCCESS */
#define LAB_BLAS_SUCCESS 0
#define LAB_BLAS_NOT_SUPPORTED 15

typedef struct lab_blas_context *lab_blas_handle;   /* cublasLtHandle_t */
typedef struct lab_blas_desc_opaque *lab_blas_desc; /* cublasLtMatmulDesc_t */
typedef struct lab_blas_layout_opaque *lab_blas_layout;
typedef struct lab_blas_pref_opaque *lab_blas_preference;

typedef struct {
    uint64_t data[8];
} lab_blas_algo; /* cublasLtMatmulAlgo_t */

typedef struct {
    lab_blas_algo algo;
    size_t workspace_size;
    lab_blas_status state;
    float waves_count;
    int reserved[4];
} lab_blas_heuristic; /* cublasLtMatmulHeuristicResult_t */

enum { /* cudaDataType_t */
       LAB_CUDA_R_32F = 0,
       LAB_CUDA_R_64F = 1,
       LAB_CUDA_R_16F = 2,
       LAB_CUDA_R_16BF = 14,
       LAB_CUDA_R_8F_E4M3 = 28,
       LAB_CUDA_R_8F_E5M2 = 29
};
enum { /* cublasComputeType_t */
       LAB_COMPUTE_32F = 68,
       LAB_COMPUTE_64F = 70,
       LAB_COMPUTE_32F_FAST_TF32 = 77
};
enum { LAB_OP_N = 0, LAB_OP_T = 1 }; /* cublasOperation_t */
enum {                               /* cublasLtMatmulDescAttributes_t */
       LAB_DESC_TRANSA = 3,
       LAB_DESC_TRANSB = 4,
       LAB_DESC_EPILOGUE = 7,
       LAB_DESC_BIAS_POINTER = 8,
       LAB_DESC_BIAS_BATCH_STRIDE = 10,
       LAB_DESC_EPILOGUE_AUX_POINTER = 11,
       LAB_DESC_EPILOGUE_AUX_LD = 12,
       LAB_DESC_EPILOGUE_AUX_BATCH_STRIDE = 13,
       LAB_DESC_A_SCALE_POINTER = 17,
       LAB_DESC_B_SCALE_POINTER = 18,
       LAB_DESC_FAST_ACCUM = 25,
       LAB_DESC_BIAS_DATA_TYPE = 26
};
enum { /* cublasLtMatrixLayoutAttribute_t */
       LAB_LAYOUT_BATCH_COUNT = 5,
       LAB_LAYOUT_STRIDED_BATCH_OFFSET = 6
};
enum { /* cublasLtMatmulPreferenceAttributes_t */
       LAB_PREF_MAX_WORKSPACE_BYTES = 1,
       LAB_PREF_MIN_ALIGNMENT_A_BYTES = 5,
       LAB_PREF_MIN_ALIGNMENT_B_BYTES = 6,
       LAB_PREF_MIN_ALIGNMENT_C_BYTES = 7,
       LAB_PREF_MIN_ALIGNMENT_D_BYTES = 8
};
enum { /* cublasLtEpilogue_t */
       LAB_EPILOGUE_DEFAULT = 1,
       LAB_EPILOGUE_RELU = 2,
       LAB_EPILOGUE_BIAS = 4,
       LAB_EPILOGUE_RELU_BIAS = 6,
       LAB_EPILOGUE_GELU = 32,
       LAB_EPILOGUE_GELU_BIAS = 36,
       LAB_EPILOGUE_GELU_AUX = 160,
       LAB_EPILOGUE_GELU_AUX_BIAS = 164,
       LAB_EPILOGUE_DGELU = 192,
       LAB_EPILOGUE_DGELU_BGRAD = 208,
       LAB_EPILOGUE_BGRADB = 512
};

/* ---- the function table, filled by lab_cublaslt_load ---- */

typedef struct {
    void *library; /* the dlopen handle; NULL until loaded */
    char path[512];
    size_t version; /* cublasLtGetVersion(): 130100 for 13.1.0 */
    lab_blas_status (*create)(lab_blas_handle *handle);
    const char *(*status_name)(lab_blas_status status);
    size_t (*get_version)(void);
    lab_blas_status (*desc_create)(lab_blas_desc *desc, int compute_type, int scale_type);
    lab_blas_status (*desc_destroy)(lab_blas_desc desc);
    lab_blas_status (*desc_set)(lab_blas_desc desc, int attribute, const void *value, size_t size);
    lab_blas_status (*layout_create)(lab_blas_layout *layout, int type, uint64_t rows, uint64_t cols,
                                     int64_t ld);
    lab_blas_status (*layout_destroy)(lab_blas_layout layout);
    lab_blas_status (*layout_set)(lab_blas_layout layout, int attribute, const void *value, size_t size);
    lab_blas_status (*preference_create)(lab_blas_preference *preference);
    lab_blas_status (*preference_destroy)(lab_blas_preference preference);
    lab_blas_status (*preference_set)(lab_blas_preference preference, int attribute, const void *value,
                                      size_t size);
    lab_blas_status (*heuristic)(lab_blas_handle handle, lab_blas_desc desc, lab_blas_layout a,
                                 lab_blas_layout b, lab_blas_layout c, lab_blas_layout d,
                                 lab_blas_preference preference, int requested, lab_blas_heuristic *results,
                                 int *returned);
    lab_blas_status (*matmul)(lab_blas_handle handle, lab_blas_desc desc, const void *alpha, const void *a,
                              lab_blas_layout a_layout, const void *b, lab_blas_layout b_layout,
                              const void *beta, const void *c, lab_blas_layout c_layout, void *d,
                              lab_blas_layout d_layout, const lab_blas_algo *algo, void *workspace,
                              size_t workspace_size, cudaStream_t stream);
} lab_cublaslt_api;

/* The process's table (a library is loaded once per process, whatever the interpreters). */
extern lab_cublaslt_api lab_cublaslt;

/* Tries `paths` in order with dlopen and fills the table from the first library that has every
 * function. Returns 0 (also when already loaded), or -1 with ImportError set naming every path
 * tried and why each failed. */
int lab_cublaslt_load(const char *const *paths, int n_paths);

/* A status's name ("CUBLAS_STATUS_NOT_SUPPORTED"), from the library when it is loaded. */
const char *lab_cublaslt_status_name(lab_blas_status status);

/* The device's handle, made on first use (cublasLtCreate needs no current device, but a handle
 * serves one device's calls, as in PyTorch's per-device pool). */
lab_blas_status lab_cublaslt_handle(int device, lab_blas_handle *handle);

/* The workspace of (device, stream): LAB_CUBLASLT_WORKSPACE bytes made with cudaMalloc on first
 * use - never during stream capture, where *bytes comes back 0 and the caller picks an algorithm
 * that needs none. One per stream because two GEMMs running concurrently on one workspace race. */
#define LAB_CUBLASLT_WORKSPACE ((size_t)32 << 20)
cudaError_t lab_cublaslt_workspace(int device, cudaStream_t stream, void **workspace, size_t *bytes);

#endif
