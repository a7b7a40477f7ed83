/* random.h - lab's random numbers: the fills (uniform, normal, bernoulli) and the generator's state
 * (manual_seed, get_rng_state, set_rng_state). */
#ifndef LAB_RANDOM_H
#define LAB_RANDOM_H

#include "binding/args.h"

extern PyMethodDef lab_random_methods[];
extern const lab_signed_function lab_random_signatures[]; /* ends with {NULL, NULL} */

#endif
