/* kernel_arguments.h - a RawKernel call's arguments as kernel parameters (see kernel_arguments.c). */
#ifndef LAB_KERNEL_ARGUMENTS_H
#define LAB_KERNEL_ARGUMENTS_H

#include "binding/module_state.h"
#include "dispatch/operand.h"

#define LAB_MAX_KERNEL_ARGS 256
#define LAB_KERNEL_ARGS_INLINE 16 /* arguments marshalled without an allocation */

/* The bytes of one scalar parameter: every C scalar type fits, aligned for its own loads. */
typedef union {
    unsigned char bytes[8];
    double align;
} lab_parameter_bytes;

/* argv[i] points to parameter i's bytes: a scalar's in scalars[i], an array's device pointer in its
 * lab_array. The arrays (n_arrays of them) go to the op driver for devices and streams. `items` is
 * a tuple of the call's arguments, held until release: the arrays stay alive through the launch
 * whatever Python code reading them runs (a list given as args may be emptied meanwhile). */
typedef struct {
    int n, n_arrays;
    PyObject *items;
    lab_array *arrays;
    lab_parameter_bytes *scalars;
    void **argv;
    lab_array arrays_inline[LAB_KERNEL_ARGS_INLINE];
    lab_parameter_bytes scalars_inline[LAB_KERNEL_ARGS_INLINE];
    void *argv_inline[LAB_KERNEL_ARGS_INLINE];
} lab_kernel_args;

/* Marshals `args` (a tuple or list) for kernel `name`. sizes: the runtime's parameter sizes (one
 * byte each) or NULL; n_params: how many parameters the kernel has (-1: unknown); signature: two
 * letters a parameter (lab/_jit.py's parse_signature) or NULL. placeholders (NULL: none): arrays
 * known before their memory is - an argument None takes the next of them, checked like an array
 * argument, its pointer parameter pointing at the copy's `data`, which the caller sets before launch
 * (lab.jax fills it from XLA's buffers). Returns 0, or -1 with TypeError, ValueError or OverflowError
 * naming the argument; call lab_kernel_args_release either way. */
int lab_marshal_kernel_args(lab_state *state, const char *name, PyObject *args, const unsigned char *sizes,
                            Py_ssize_t n_params, const char *signature, const lab_array *placeholders,
                            int n_placeholders, lab_kernel_args *out);
void lab_kernel_args_release(lab_kernel_args *args);

/* A Python number as the C scalar type `letter` (struct module letters, 'E' for bfloat16): checked
 * (an int that does not fit is OverflowError, a float for an integer TypeError) into *out. Messages
 * name the argument "argname[index]" (index < 0: "argname"). Returns 0 or -1. */
int lab_convert_number(PyObject *obj, char letter, const char *func, const char *argname, int index,
                       lab_parameter_bytes *out);

/* The exact C type letter of a NumPy scalar (or 0-d array) - 'f' for numpy.float32 - learned once
 * a type through the buffer protocol; 0 when obj is not one (no exception set). */
char lab_numpy_scalar_letter(lab_state *state, PyObject *obj);

/* grid / block: an int or a tuple or list of 1 to 3 ints, each in 1 .. 2^31 - 1. */
int lab_read_launch_dimensions(PyObject *obj, const char *kernel_name, const char *what,
                               unsigned int dims[3]);

#endif
