"""The row-wise kernels once each on bench_rowwise.py's headline input (bfloat16 16384 x 4096), for
Nsight Compute (`make profile-rowwise`): softmax, layer_norm, rms_norm forward, rms_norm backward,
layer_norm backward (with the bias gradient), and torch's softmax and rms_norm beside them; rms_norm
on rows of 1024 (bench_rowwise.py's 16384 x 1024), lab's and torch's; rms_norm's backward on rows the
registers do not hold (4096 x 16384: cut across a cluster on Hopper, else streamed), lab's and torch's
forward + backward; cross_entropy with its gradient
on 4096 x 131072 logits (bench_losses.py's), torch's cross_entropy forward and backward kernels beside
it, and the SwiGLU backward. With --forwards: the three staged forwards alone (softmax, layer_norm,
rms_norm), for `make profile-rowwise-sass`; with --cross-entropy: lab's cross_entropy alone (its streamed
rows, `make profile-rowwise-sass SASS_KERNELS=rows_streamed SASS_CASES=--cross-entropy`); with
--cross-entropy-walks: its window rows (as launched, lab.lab._rowwise_window_depth(-1)) and streamed
rows (_rowwise_window_depth(0)) on bfloat16 4096 x 128256, 4096 x 65536, 4096 x 50257 (GPT-2's vocabulary:
rows misaligned, walked with a head) and 4096 x 50256 (the same, aligned) and float32 4096 x 32000, each
case named on stderr (`make profile-cross-entropy`); with --long-norm-backwards: layer_norm's (with the
bias gradient) and rms_norm's backwards on bfloat16 rows of 8192 as launched and cut across clusters of
two blocks (lab.lab._rowwise_cluster_blocks(2)), and of 16384 as launched, each named on stderr."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import lab  # noqa: E402


def cross_entropy(torch):
    """lab's cross_entropy on bench_losses.py's logits (bfloat16 4096 x 131072), the gradient into them."""
    logits = torch.randn(4096, 131072, device="cuda", dtype=torch.bfloat16)
    target, loss = torch.randint(0, 131072, (4096,), device="cuda"), torch.empty((), device="cuda")
    print("lab cross_entropy (grad=logits)", file=sys.stderr)
    lab.cross_entropy(logits, target, loss, grad=logits)
    return logits, target, loss


def cross_entropy_walks(torch):
    """cross_entropy with its gradient through each of its long-row walks: a window of copies in flight
    (as launched) and the streamed walk."""
    for dtype, rows, n in ((torch.bfloat16, 4096, 128256), (torch.bfloat16, 4096, 65536), (torch.bfloat16, 4096, 50257),
                           (torch.bfloat16, 4096, 50256), (torch.float32, 4096, 32000)):
        logits = torch.randn(rows, n, device="cuda", dtype=dtype)
        target, loss = torch.randint(0, n, (rows,), device="cuda"), torch.empty((), device="cuda")
        grad = torch.empty_like(logits)
        for label, depth in (("window (as launched)", -1), ("streamed", 0)):
            default = lab.lab._rowwise_window_depth(depth)
            try:
                print(f"cross_entropy {dtype} {rows} x {n}, {label}", file=sys.stderr)
                lab.cross_entropy(logits, target, loss, grad=grad)
            finally:
                lab.lab._rowwise_window_depth(default)
        torch.cuda.synchronize()


def long_norm_backwards(torch):
    """The norms' backwards on long bf16 rows (2^26 elements): rows of 8192 as launched and cut across
    clusters of two blocks, rows of 16384 as launched (clusters of four). The statistics are made up -
    the kernels' work does not depend on them - so that only backward kernels launch."""
    for n, cluster_choices in ((8192, (("as launched", -1), ("clusters of two blocks", 2))),
                               (16384, (("as launched", -1),))):
        x = torch.randn((1 << 26) // n, n, device="cuda", dtype=torch.bfloat16)
        w, dy = torch.randn(n, device="cuda", dtype=torch.bfloat16), torch.randn_like(x)
        gx, gw, gb = torch.empty_like(x), torch.empty_like(w), torch.empty_like(w)
        mean, rstd = torch.randn(x.shape[0], device="cuda"), torch.rand(x.shape[0], device="cuda") + 0.5
        for label, blocks in cluster_choices:
            default = lab.lab._rowwise_cluster_blocks(blocks)
            try:
                print(f"layer_norm_backward+bias bfloat16 {x.shape[0]} x {n}, {label}", file=sys.stderr)
                lab.layer_norm_backward(dy, x, w, mean, rstd, gx, gw, gb)
                print(f"rms_norm_backward bfloat16 {x.shape[0]} x {n}, {label}", file=sys.stderr)
                lab.rms_norm_backward(dy, x, w, rstd, gx, gw)
            finally:
                lab.lab._rowwise_cluster_blocks(default)
        torch.cuda.synchronize()


def main(forwards_only=False, cross_entropy_only=False, cross_entropy_walks_only=False):
    import torch
    F = torch.nn.functional
    if "--long-norm-backwards" in sys.argv:
        long_norm_backwards(torch)
        return
    if cross_entropy_walks_only:
        cross_entropy_walks(torch)
        return
    if cross_entropy_only:
        cross_entropy(torch)
        torch.cuda.synchronize()
        return
    x = torch.randn(16384, 4096, device="cuda", dtype=torch.bfloat16)
    w, dy = torch.randn(4096, device="cuda", dtype=torch.bfloat16), torch.randn_like(x)
    out, gx, gw, gb = torch.empty_like(x), torch.empty_like(x), torch.empty_like(w), torch.empty_like(w)
    mean, rstd = torch.empty(16384, device="cuda"), torch.empty(16384, device="cuda")
    if forwards_only:
        lab.softmax(x, out)
        lab.layer_norm(x, w, w, out, mean=mean, rstd=rstd)
        lab.rms_norm(x, w, out, rstd=rstd)
        torch.cuda.synchronize()
        return
    for name, fn in [("lab softmax", lambda: lab.softmax(x, out)), ("torch softmax", lambda: F.softmax(x, -1)),
                     ("lab layer_norm", lambda: lab.layer_norm(x, w, w, out, mean=mean, rstd=rstd)),
                     ("lab rms_norm", lambda: lab.rms_norm(x, w, out, rstd=rstd)),
                     ("torch rms_norm", lambda: F.rms_norm(x, (4096,), w)),
                     ("lab rms_norm_backward", lambda: lab.rms_norm_backward(dy, x, w, rstd, gx, gw)),
                     ("lab layer_norm_backward", lambda: lab.layer_norm_backward(dy, x, w, mean, rstd, gx, gw, gb)),
                     ("lab swiglu_backward", lambda: lab.swiglu_backward(dy, x, out, gx, out))]:
        print(name, file=sys.stderr)
        fn()
    short = x[:, :1024].contiguous()
    short_out = torch.empty_like(short)
    for name, fn in [("lab rms_norm 16384x1024", lambda: lab.rms_norm(short, w[:1024], short_out, rstd=rstd)),
                     ("torch rms_norm 16384x1024", lambda: F.rms_norm(short, (1024,), w[:1024]))]:
        print(name, file=sys.stderr)
        fn()
    long_x = x.view(4096, 16384)  # cut across a cluster of four blocks (streamed without clusters)
    long_w, long_dy, long_rstd = torch.randn(16384, device="cuda", dtype=torch.bfloat16), dy.view(4096, 16384), \
        rstd[:4096]
    long_leaf, long_wleaf = long_x.clone().requires_grad_(), long_w.clone().requires_grad_()
    lab.rms_norm(long_x, long_w, out.view(4096, 16384), rstd=long_rstd)
    for name, fn in [("lab rms_norm_backward 4096x16384",
                      lambda: lab.rms_norm_backward(long_dy, long_x, long_w, long_rstd, gx.view(4096, 16384),
                                                    torch.empty_like(long_w))),
                     ("torch rms_norm forward + backward 4096x16384",
                      lambda: torch.autograd.grad(F.rms_norm(long_leaf, (16384,), long_wleaf), (long_leaf, long_wleaf),
                                                  long_dy))]:
        print(name, file=sys.stderr)
        fn()
    del x, dy, out, gx, short, short_out, long_x, long_dy, long_leaf
    logits, target, loss = cross_entropy(torch)
    leaf = logits.clone().requires_grad_()
    print("torch cross_entropy forward + backward", file=sys.stderr)
    torch.autograd.grad(F.cross_entropy(leaf, target), (leaf,))
    torch.cuda.synchronize()


if __name__ == "__main__":
    main(forwards_only="--forwards" in sys.argv, cross_entropy_only="--cross-entropy" in sys.argv,
         cross_entropy_walks_only="--cross-entropy-walks" in sys.argv)
