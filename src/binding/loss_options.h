/* loss_options.h - the options cross-entropy's faces share (lab.cross_entropy and
 * lab.linear_cross_entropy): ignore_index, label_smoothing, reduction, softcap, z_loss. Each reader
 * leaves the value as it is when the argument was not given (obj NULL), and raises TypeError or
 * ValueError naming the argument otherwise. */
#ifndef LAB_LOSS_OPTIONS_H
#define LAB_LOSS_OPTIONS_H

#include "binding/args.h"

/* an int (not bool) in int64's range */
int lab_read_ignore_index(PyObject *obj, const char *func, int64_t *index);
/* a real number in [0, 1] */
int lab_read_label_smoothing(PyObject *obj, const char *func, double *smoothing);
/* 'mean', 'sum' or 'none' */
int lab_read_loss_reduction(lab_state *state, PyObject *obj, const char *func, lab_loss_reduction *reduction);
/* a finite real number > 0 (None, or left out: no softcap) */
int lab_read_softcap(PyObject *obj, const char *func, double *softcap);
/* a finite real number >= 0 */
int lab_read_z_loss(PyObject *obj, const char *func, double *z_loss);

#endif
