// list_steps.cuh - what the multi-tensor kernel does to one element of a list op (a row of
// list_ops.def): the adapter that runs a functor of functors.cuh on lists, and the steps that are
// not such a functor - the optimizer steps (several outputs per element) and the norm's sum of
// squares (a reduction). Each sees the element's values r[k] of every list k, in float32.
#pragma once

#include <type_traits>

#include "functors.cuh"
#include "launch.h"

namespace lab {

// A step marks itself kListStep (it reads and writes r[] itself) or kReduction (it maps one value
// to what the block reduction sums).
struct SumOfSquares {
    static constexpr bool kReduction = true;
    __device__ float operator()(float v) const { return v * v; }
};

// torch.optim.SGD, single-tensor form: d = g + wd * p; p -= lr * d.
struct SgdStep {
    static constexpr bool kListStep = true;
    __device__ void operator()(float (&r)[4], const lab_mt_params &p) const {
        const float d = p.weight_decay != 0.f ? r[1] + p.weight_decay * r[0] : r[1];
        r[0] -= p.lr * d;
    }
};

// With momentum: buf = d on the first step, else momentum * buf + (1 - dampening) * d; nesterov
// steps along d + momentum * buf, else along buf.
struct SgdMomentumStep {
    static constexpr bool kListStep = true;
    __device__ void operator()(float (&r)[4], const lab_mt_params &p) const {
        float d = p.weight_decay != 0.f ? r[1] + p.weight_decay * r[0] : r[1];
        const float buf = p.first_step ? d : p.momentum * r[2] + (1.f - p.dampening) * d;
        r[2] = buf;
        d = p.nesterov ? d + p.momentum * buf : buf;
        r[0] -= p.lr * d;
    }
};

// torch.optim.Adam / AdamW (single-tensor form): exp_avg.lerp_(g, 1 - beta1) - with lerp's formula -
// exp_avg_sq = beta2 * exp_avg_sq + (1 - beta2) * g * g, then
// p -= step_size * exp_avg / (sqrt(exp_avg_sq) / sqrt(bias_correction2) + eps).
struct AdamStep {
    static constexpr bool kListStep = true;
    __device__ void operator()(float (&r)[4], const lab_mt_params &p) const {
        float param = r[0], grad = r[1];
        if (p.weight_decay != 0.f) {
            if (p.decoupled_weight_decay) {
                param *= 1.f - p.lr * p.weight_decay;
            } else {
                grad += p.weight_decay * param;
            }
        }
        const float weight = 1.f - p.beta1;
        const float exp_avg =
            weight < 0.5f ? r[2] + weight * (grad - r[2]) : grad - (grad - r[2]) * (1.f - weight);
        const float exp_avg_sq = p.beta2 * r[3] + (1.f - p.beta2) * grad * grad;
        const float denom = sqrtf(exp_avg_sq) / p.bias_correction2_sqrt + p.eps;
        r[0] = param - p.step_size * exp_avg / denom;
        r[2] = exp_avg;
        r[3] = exp_avg_sq;
    }
};

// A row of list_ops.def as the kernel sees it: the lists' roles, and what one element does. An
// elementwise functor of functors.cuh reads the first lists and writes the last (the same functor
// the elementwise kernels run, so foreach_add and add cannot disagree); a list step of
// list_steps.cuh reads and writes the element's values itself.
template <typename Step, typename = void> struct IsListStep : std::false_type {};
template <typename Step> struct IsListStep<Step, std::void_t<decltype(Step::kListStep)>> : std::true_type {};
template <typename Step, typename = void> struct IsReduction : std::false_type {};
template <typename Step>
struct IsReduction<Step, std::void_t<decltype(Step::kReduction)>> : std::true_type {};

template <typename Step, int kListsV, int kReadsV, int kWritesV, int kStateV> struct ListOp {
    using StepType = Step;
    static constexpr int kLists = kListsV, kReads = kReadsV, kWrites = kWritesV, kState = kStateV;
    __device__ __forceinline__ void operator()(float (&r)[4], const lab_mt_params &p) const {
        if constexpr (IsListStep<Step>::value) {
            Step()(r, p);
        } else {
            const OpParams<float> params{p.alpha, p.beta};
            r[kLists - 1] = Step()(r[0], kLists > 2 ? r[1] : 0.f, 0.f, params);
        }
    }
};

} // namespace lab
