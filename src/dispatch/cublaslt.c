/* cublaslt.c - loading cuBLASLt at first use, and its per-device handles and per-stream workspaces
 * (see cublaslt.h). Every table here is guarded by the GIL: only the Python face reaches them
 * (lab.matmul, lab.linear_cross_entropy), which runs with it held; XLA's targets make no products. */
#include "dispatch/cublaslt.h"
#include "dispatch/failure.h"
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

lab_cublaslt_api lab_cublaslt;

/* Each function lab calls, by its exported name, and where its address goes in the table. */
#define ENTRY(field, symbol) {offsetof(lab_cublaslt_api, field), symbol}
static const struct {
    size_t offset;
    const char *symbol;
} FUNCTIONS[] = {
    ENTRY(create, "cublasLtCreate"),
    ENTRY(status_name, "cublasLtGetStatusName"),
    ENTRY(get_version, "cublasLtGetVersion"),
    ENTRY(desc_create, "cublasLtMatmulDescCreate"),
    ENTRY(desc_destroy, "cublasLtMatmulDescDestroy"),
    ENTRY(desc_set, "cublasLtMatmulDescSetAttribute"),
    ENTRY(layout_create, "cublasLtMatrixLayoutCreate"),
    ENTRY(layout_destroy, "cublasLtMatrixLayoutDestroy"),
    ENTRY(layout_set, "cublasLtMatrixLayoutSetAttribute"),
    ENTRY(preference_create, "cublasLtMatmulPreferenceCreate"),
    ENTRY(preference_destroy, "cublasLtMatmulPreferenceDestroy"),
    ENTRY(preference_set, "cublasLtMatmulPreferenceSetAttribute"),
    ENTRY(heuristic, "cublasLtMatmulAlgoGetHeuristic"),
    ENTRY(matmul, "cublasLtMatmul"),
};
#undef ENTRY

/* Fills a copy of the table from one opened library; the name of the first missing symbol, or NULL. */
static const char *fill_table(void *library, lab_cublaslt_api *table) {
    for (size_t i = 0; i < sizeof FUNCTIONS / sizeof FUNCTIONS[0]; i++) {
        void *address = dlsym(library, FUNCTIONS[i].symbol);
        if (!address) return FUNCTIONS[i].symbol;
        memcpy((char *)table + FUNCTIONS[i].offset, &address, sizeof address);
    }
    return NULL;
}

int lab_cublaslt_load(const char *const *paths, int n_paths) {
    if (lab_cublaslt.library) return 0;
    char tried[2048] = "";
    size_t used = 0;
    for (int i = 0; i < n_paths; i++) {
        void *library = dlopen(paths[i], RTLD_NOW | RTLD_LOCAL);
        const char *why = library ? NULL : dlerror();
        lab_cublaslt_api table;
        memset(&table, 0, sizeof table);
        const char *missing = library ? fill_table(library, &table) : NULL;
        if (library && !missing) {
            table.library = library;
            snprintf(table.path, sizeof table.path, "%s", paths[i]);
            table.version = table.get_version();
            lab_cublaslt = table;
            return 0;
        }
        if (library) dlclose(library);
        int n = snprintf(tried + used, sizeof tried - used, "\n  %s: %s%s", paths[i],
                         missing ? "has no " : "", missing ? missing : (why ? why : "cannot be opened"));
        if (n > 0) used += (size_t)n < sizeof tried - used ? (size_t)n : sizeof tried - used - 1;
    }
    lab_fail(LAB_FAILURE_IMPORT,
             "lab.matmul needs NVIDIA's cuBLASLt, and none was found: pip install nvidia-cublas (or "
             "nvidia-cublas-cu12; lab[blas] brings it), or set LAB_CUBLASLT to the path of "
             "libcublasLt.so. Tried:%s",
             n_paths ? tried : " nothing (no candidate paths)");
    return -1;
}

const char *lab_cublaslt_status_name(lab_blas_status status) {
    const char *name = lab_cublaslt.status_name ? lab_cublaslt.status_name(status) : NULL;
    return name ? name : "CUBLAS_STATUS_UNKNOWN";
}

static lab_blas_handle handles[LAB_MAX_DEVICES];

lab_blas_status lab_cublaslt_handle(int device, lab_blas_handle *handle) {
    if (device < 0 || device >= LAB_MAX_DEVICES) return 7; /* CUBLAS_STATUS_INVALID_VALUE */
    if (!handles[device]) {
        lab_blas_status status = lab_cublaslt.create(&handles[device]);
        if (status != LAB_BLAS_SUCCESS) {
            handles[device] = NULL;
            return status;
        }
    }
    *handle = handles[device];
    return LAB_BLAS_SUCCESS;
}

/* (device, stream) -> its workspace. A stream's handle may be reused by CUDA after the stream is
 * destroyed; the new stream then inherits the workspace, which is safe (the old one is gone). */
#define WORKSPACE_SLOTS 64
static struct {
    int device;
    cudaStream_t stream;
    void *memory;
} workspaces[WORKSPACE_SLOTS];
static int n_workspaces;

cudaError_t lab_cublaslt_workspace(int device, cudaStream_t stream, void **workspace, size_t *bytes) {
    for (int i = 0; i < n_workspaces; i++) {
        if (workspaces[i].device == device && workspaces[i].stream == stream) {
            *workspace = workspaces[i].memory;
            *bytes = LAB_CUBLASLT_WORKSPACE;
            return cudaSuccess;
        }
    }
    *workspace = NULL;
    *bytes = 0;
    enum cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    cudaError_t err = cudaStreamIsCapturing(stream, &capture);
    if (err != cudaSuccess || capture != cudaStreamCaptureStatusNone || n_workspaces == WORKSPACE_SLOTS) {
        return err; /* capturing (no allocation allowed) or every slot taken: no workspace */
    }
    void *memory = NULL;
    err = cudaMalloc(&memory, LAB_CUBLASLT_WORKSPACE);
    if (err != cudaSuccess) return err;
    workspaces[n_workspaces].device = device;
    workspaces[n_workspaces].stream = stream;
    workspaces[n_workspaces].memory = memory;
    n_workspaces++;
    *workspace = memory;
    *bytes = LAB_CUBLASLT_WORKSPACE;
    return cudaSuccess;
}
