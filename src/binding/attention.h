/* attention.h - lab.attention and lab.attention_backward's binding (see attention.c). */
#ifndef LAB_BINDING_ATTENTION_H
#define LAB_BINDING_ATTENTION_H

#include "binding/args.h"

extern PyMethodDef lab_attention_methods[];
extern const lab_signed_function lab_attention_signatures[]; /* ends with {NULL, NULL} */

#endif
