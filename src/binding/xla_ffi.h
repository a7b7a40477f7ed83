/* xla_ffi.h - lab's XLA FFI face: xla_ffi.c reads XLA's call frames and answers XLA, xla_ffi_ops.c
 * holds the built-in ops' targets and the method table module.c adds. Declared here: what a binding
 * needs to answer an FFI call of its own - the call being answered, its buffers as lab arrays, its
 * attributes, the op driver's call on XLA's stream - and the registry of user kernels compiled for jit
 * (lab.jax.RawKernel, lab.jax.ElementwiseKernel: raw_kernel.c and elementwise_kernel.c register them). */
#ifndef LAB_BINDING_XLA_FFI_H
#define LAB_BINDING_XLA_FFI_H

#include <Python.h>

#include "binding/module_state.h"
#include "binding/xla_ffi_abi.h"
#include "dispatch/driver.h"

extern PyMethodDef lab_xla_ffi_methods[];

/* One FFI call being answered (the frame XLA gave, the stream it runs on, the arrays read from it). */
typedef struct lab_ffi_call lab_ffi_call;

/* The target's name, for messages ("lab_softmax"). */
const char *lab_ffi_name(const lab_ffi_call *f);

/* How many arguments (results = 0) or results (results = 1) the call has. */
int64_t lab_ffi_count(const lab_ffi_call *f, int results);

/* Argument or result i as a lab_array (row-major, on the device XLA chose), named `name` in messages;
 * NULL with a TypeError/ValueError failure when XLA gave no such buffer or lab cannot take it. Buffers read
 * one after another lie one after another in memory (an array of them for lab_op_call_add). */
lab_array *lab_ffi_buffer(lab_ffi_call *f, int results, int64_t i, const char *name);

/* A number attribute by name, as a double: `fallback` where it was not given. 0, or -1 (TypeError). */
int lab_ffi_attr(lab_ffi_call *f, const char *name, double fallback, double *value);

/* A number attribute by name as an op's scalar argument (an int kept exact, a float), scalar->name NULL
 * where it was not given - what the binding reads from a Python number. 0, or -1 (TypeError). */
int lab_ffi_scalar(lab_ffi_call *f, const char *name, lab_scalar_arg *scalar);

/* The op driver's call for `description`, on XLA's stream; the module state the driver runs with. */
lab_op_call lab_ffi_op_call(lab_ffi_call *f, void *description);
lab_state *lab_ffi_state(const lab_ffi_call *f);

/* A user's kernel prepared for jit: run() launches it with the call's buffers (the arguments, then the
 * results, as the kernel's parameters or operands) with the GIL held, and records its failures as the
 * built-in ops do (lab_fail_from_python for a Python exception); release() frees what it holds. */
typedef struct lab_ffi_kernel lab_ffi_kernel;
struct lab_ffi_kernel {
    int (*run)(lab_ffi_kernel *self, lab_ffi_call *f);
    void (*release)(lab_ffi_kernel *self);
    const char *name; /* for messages: the kernel's own name */
};

/* Adds a prepared kernel to the registry, which owns it from then on (released at once on failure);
 * returns its number - what lab.jax passes as the FFI call's `kernel` attribute - or -1. Kernels stay
 * for the life of the process: XLA may run any executable compiled with one at any time. */
Py_ssize_t lab_ffi_kernel_register(lab_ffi_kernel *kernel);

/* How a target's op runs. LAB_FFI_NEEDS_GIL: it calls into Python (the users' kernels, whose compiled
 * modules are Python objects), so the handler takes the GIL around it. LAB_FFI_TRACEABLE: it launches
 * the same kernels for the same shapes, attributes and buffer addresses, with no allocation and no
 * host sync, so XLA may record it into a command buffer (a CUDA graph) and replay it; the ops that
 * take scratch memory for partial results do not say so (a graph with memory nodes cannot be a
 * child graph of XLA's). */
enum { LAB_FFI_NEEDS_GIL = 1u << 0, LAB_FFI_TRACEABLE = 1u << 1 };

/* The handler every target shares: answers XLA's metadata query (the version, and the traits `flags`
 * gives), checks the API version, and at the execution stage runs `op` on the call, turning the failure
 * it records (dispatch/failure.h) into XLA's error. */
lab_xla_ffi_error *lab_ffi_handle(lab_xla_ffi_call_frame *frame, const char *func, int (*op)(lab_ffi_call *),
                                  unsigned flags);

/* lab_kernel's handlers: on CUDA, the registered user kernel the `kernel` attribute names; elsewhere,
 * an error saying a user's CUDA kernel runs only on CUDA devices. */
lab_xla_ffi_error *lab_ffi_user_kernel_target(lab_xla_ffi_call_frame *frame);
lab_xla_ffi_error *lab_ffi_user_kernel_elsewhere(lab_xla_ffi_call_frame *frame);

/* The module whose state the handlers use, set when lab.jax first asks for the targets and held for the
 * life of the process (XLA may call a registered target at any time). */
void lab_ffi_bind_module(PyObject *module);

#endif
