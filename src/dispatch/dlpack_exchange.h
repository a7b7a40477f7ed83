/* dlpack_exchange.h - the parts of DLPack 1.3 (dmlc/dlpack include/dlpack/dlpack.h) that lab uses:
 * DLTensor, the C exchange API that producers publish as `type.__dlpack_c_exchange_api__` (lab
 * reads it), and the managed tensors that `__dlpack__` capsules carry (lab.Array exports them).
 * Declared here with the same layout, so lab needs no DLPack checkout to build. */
#ifndef LAB_DLPACK_EXCHANGE_H
#define LAB_DLPACK_EXCHANGE_H

#include <stdint.h>

enum { kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3, kDLCUDAManaged = 13 };
enum {
    kDLInt = 0,
    kDLUInt = 1,
    kDLFloat = 2,
    kDLOpaqueHandle = 3,
    kDLBfloat = 4,
    kDLComplex = 5,
    kDLBool = 6,
    kDLFloat8_e4m3fn = 10, /* the two float8 types cuBLASLt multiplies (DLPack 1.1) */
    kDLFloat8_e5m2 = 12
};

typedef struct {
    int32_t device_type;
    int32_t device_id;
} DLDevice;
typedef struct {
    uint8_t code;
    uint8_t bits;
    uint16_t lanes;
} DLDataType;
typedef struct {
    uint32_t major;
    uint32_t minor;
} DLPackVersion;

typedef struct {
    void *data;
    DLDevice device;
    int32_t ndim;
    DLDataType dtype;
    int64_t *shape;
    int64_t *strides; /* in elements; NULL means compact row-major */
    uint64_t byte_offset;
} DLTensor;

/* What a "dltensor" capsule holds (DLPack < 1.0); the consumer calls deleter when done. */
typedef struct DLManagedTensor {
    DLTensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;

/* What a "dltensor_versioned" capsule holds (DLPack >= 1.0). */
#define DLPACK_FLAG_BITMASK_READ_ONLY (1ULL << 0)
typedef struct DLManagedTensorVersioned {
    DLPackVersion version;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensorVersioned *self);
    uint64_t flags;
    DLTensor dl_tensor;
} DLManagedTensorVersioned;

/* The name of the capsule a type publishes as __dlpack_c_exchange_api__. */
#define LAB_EXCHANGE_CAPSULE_NAME "dlpack_exchange_api"

typedef struct DLPackExchangeAPIHeader {
    DLPackVersion version;
    struct DLPackExchangeAPIHeader *prev_api;
} DLPackExchangeAPIHeader;

/* Fills a borrowed DLTensor for a live Python object; valid while the object is. 0 or -1 (error set). */
typedef int (*DLPackDLTensorFromPyObjectNoSync)(void *py_object, DLTensor *out);
/* The producer's current stream for a device (torch.cuda.current_stream, also during capture). */
typedef int (*DLPackCurrentWorkStream)(int32_t device_type, int32_t device_id, void **out_current_stream);

typedef struct {
    DLPackExchangeAPIHeader header;
    void *managed_tensor_allocator;              /* not used by lab */
    void *managed_tensor_from_py_object_no_sync; /* not used by lab */
    void *managed_tensor_to_py_object_no_sync;   /* not used by lab */
    DLPackDLTensorFromPyObjectNoSync dltensor_from_py_object_no_sync;
    DLPackCurrentWorkStream current_work_stream;
} DLPackExchangeAPI;

#endif
