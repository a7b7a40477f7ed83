/* raw_kind.c - the runtime-compiled kernel op kind's plan and launch (see raw_kind.h). */
#include "dispatch/raw_kind.h"

/* The binding checked the configuration's form and marshalled every argument: nothing to plan.
 * A configuration CUDA refuses (a block of 2048 threads, too much shared memory) comes back from
 * the launch as lab.CudaError naming the kernel. */
static int plan(lab_op_call *call) {
    (void)call;
    return 1;
}

static void launch(lab_op_call *call, lab_launch_scope *scope) {
    lab_raw_call *c = call->description;
    const dim3 grid = {c->grid[0], c->grid[1], c->grid[2]}, block = {c->block[0], c->block[1], c->block[2]};
    lab_launch_scope_step(
        scope, c->step,
        cudaLaunchKernel(c->kernel, grid, block, c->argv, c->shared_mem, scope->streams.launch));
}

const lab_op_kind lab_raw_kind = {"raw kernel", plan, launch};
