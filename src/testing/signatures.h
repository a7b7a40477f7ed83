/* signatures.h - private module functions for the generated fuzz (tests/fuzz_calls.py): every
 * signature table the binding parses with, and how many calls reached a launch scope. */
#ifndef LAB_SIGNATURES_H
#define LAB_SIGNATURES_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

extern PyMethodDef lab_signatures_methods[];

#endif
