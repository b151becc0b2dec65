// The fused CPU kernel's eager ops, registered with torch's dispatcher (namespace crfhead).
//
// The kernel itself is chain_cpu.cpp, a plain C library loaded through ctypes; this file holds no
// dynamic program. It is the eager call's glue in C++: one dispatch from Python, outputs allocated
// with at::empty, the kernel's entry points called through pointers that Python binds once
// (crfhead_ops_bind), and the loss's gradient rule registered once, as a torch::autograd::Function
// (the "fused" rule of crfhead/engine/backends/autograd.py: the forward computes the gradient's parts,
// the backward scales them by the upstream gradient in one more kernel call).
//
//   crfhead::fused_nll(em, tr, start, end, mask, tags, threads) -> (loss (B,), gold (B,))
//   crfhead::fused_log_partition(em, tr, start, end, mask, threads) -> log Z (B,)
//   crfhead::fused_viterbi(em, tr, start, end, mask, threads) -> (scores (B,), paths (B, T) int64)
//   crfhead::fused_check(em, tr, start, end, mask) -> the boundary's finiteness code
//
// Inputs are the validated chain potentials (crfhead.engine.potentials): emissions (B, T, K),
// transitions (K, K) or (B, T-1, K, K) [from, to], start and end (K,), mask (B, T) bool, float32 or
// float64; the ops convert dtypes and layouts themselves (differentiably). Double backward (a backward
// with create_graph) calls crfhead::fused_recompute, which Python registers: the portable scan's
// differentiable forward-backward, as the Python rule does.
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/empty.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include <cstdint>
#include <vector>

namespace crfhead {

using at::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

template <typename S>
using FbFn = void (*)(const S*, const S*, const S*, const S*, const uint8_t*, int64_t, int64_t,
                      int64_t, int, S*, S*, S*, S*, S*, int);
template <typename S>
using NllFn = int64_t (*)(const S*, const S*, const S*, const S*, const uint8_t*, int64_t, int64_t,
                          int64_t, int, const int64_t*, S*, S*, S*, S*, S*, S*, int);
template <typename S>
using ScaleFn = void (*)(const S*, const S*, const S*, const S*, const S*, int64_t, int64_t, int64_t,
                         int, S*, S*, S*, S*);
template <typename S>
using ViterbiFn = void (*)(const S*, const S*, const S*, const S*, const uint8_t*, int64_t, int64_t,
                           int64_t, int, S*, int64_t*, int);

template <typename S>
using CheckFn = int64_t (*)(const S*, const S*, const S*, const S*, const uint8_t*, int64_t, int64_t,
                            int64_t, int);

template <typename S>
struct Entries {
  FbFn<S> forward_backward = nullptr;
  NllFn<S> nll = nullptr;
  ScaleFn<S> scale = nullptr;
  ViterbiFn<S> viterbi = nullptr;
  CheckFn<S> first_non_finite = nullptr;
};

Entries<float> f32;
Entries<double> f64;

template <typename S>
const Entries<S>& entries();
template <>
const Entries<float>& entries<float>() { return f32; }
template <>
const Entries<double>& entries<double>() { return f64; }

template <typename S>
S* ptr(const Tensor& x) {  // NULL for an undefined tensor: a part not asked for
  return x.defined() ? x.data_ptr<S>() : nullptr;
}

// The chain as the kernel reads it: one dtype (float32/float64, the emissions'), contiguous, bool mask.
struct Chain {
  Tensor em, tr, st, en, mask;
  int64_t B, T, K;
  bool per_position;
};

Chain prepare(const Tensor& em, const Tensor& tr, const Tensor& st, const Tensor& en,
              const Tensor& mask) {
  // The op table passes validated potentials; these checks keep a direct call from reading out of
  // bounds (a few integer comparisons).
  TORCH_CHECK_VALUE(em.dim() == 3, "emissions must be (B, T, K), got ", em.sizes());
  const int64_t B = em.size(0), T = em.size(1), K = em.size(2);
  const bool shared = tr.dim() == 2 && tr.size(0) == K && tr.size(1) == K;
  const bool per_edge = tr.dim() == 4 && tr.size(0) == B && tr.size(1) == std::max<int64_t>(T - 1, 0) &&
                        tr.size(2) == K && tr.size(3) == K;
  TORCH_CHECK_VALUE(shared || per_edge, "transitions must be (K, K) or (B, T-1, K, K) for emissions ",
                    em.sizes(), ", got ", tr.sizes());
  TORCH_CHECK_VALUE(st.dim() == 1 && st.size(0) == K && en.dim() == 1 && en.size(0) == K,
                    "start and end must be (K,) = (", K, "), got ", st.sizes(), " and ", en.sizes());
  TORCH_CHECK_VALUE(mask.dim() == 2 && mask.size(0) == B && mask.size(1) == T,
                    "mask must be (B, T) = (", B, ", ", T, "), got ", mask.sizes());
  TORCH_CHECK_VALUE(em.device().is_cpu() && tr.device().is_cpu() && st.device().is_cpu() &&
                        en.device().is_cpu() && mask.device().is_cpu(),
                    "the cpu backend's ops take CPU tensors");
  const auto dtype = em.scalar_type();
  TORCH_CHECK_VALUE(dtype == at::kFloat || dtype == at::kDouble,
                    "the cpu backend computes in float32 or float64, got ", dtype);
  auto same = [&](const Tensor& x) {
    return (x.scalar_type() == dtype ? x : x.to(dtype)).contiguous();
  };
  return Chain{em.contiguous(),
               same(tr),
               same(st),
               same(en),
               (mask.scalar_type() == at::kBool ? mask : mask.to(at::kBool)).contiguous(),
               B,
               T,
               K,
               per_edge};
}

at::TensorOptions like(const Chain& c) { return c.em.options(); }

// The gradient's parts (node, edge, first, last) for grads / edges; undefined when not asked for.
std::array<Tensor, 4> parts(const Chain& c, bool grads, bool edges) {
  std::array<Tensor, 4> out;
  if (!grads) return out;
  const auto o = like(c);
  out[0] = at::empty({c.B, c.T, c.K}, o);
  if (edges)
    out[1] = c.per_position ? at::empty({c.B, std::max<int64_t>(c.T - 1, 0), c.K, c.K}, o)
                            : at::empty({c.B, c.K, c.K}, o);
  out[2] = at::empty({c.B, c.K}, o);
  out[3] = at::empty({c.B, c.K}, o);
  return out;
}

// log Z (tags undefined) or the loss and gold score, with the gradient's parts if asked.
template <typename S>
std::pair<Tensor, Tensor> run_forward(const Chain& c, const Tensor& tags, int64_t threads,
                                      std::array<Tensor, 4>& p) {
  const Entries<S>& e = entries<S>();
  Tensor value = at::empty({c.B}, like(c));
  const S *em = c.em.data_ptr<S>(), *tr = c.tr.data_ptr<S>();
  const S *st = c.st.data_ptr<S>(), *en = c.en.data_ptr<S>();
  const auto* mask = reinterpret_cast<const uint8_t*>(c.mask.data_ptr<bool>());
  if (!tags.defined()) {
    TORCH_CHECK(e.forward_backward, "crfhead ops: the kernel's entry points are not bound");
    e.forward_backward(em, tr, st, en, mask, c.B, c.T, c.K, c.per_position, value.data_ptr<S>(),
                       ptr<S>(p[0]), ptr<S>(p[1]), ptr<S>(p[2]), ptr<S>(p[3]),
                       static_cast<int>(threads));
    return {value, Tensor()};
  }
  TORCH_CHECK(e.nll, "crfhead ops: the kernel's entry points are not bound");
  TORCH_CHECK_VALUE(tags.dim() == 2 && tags.size(0) == c.B && tags.size(1) == c.T && tags.device().is_cpu(),
                    "tags must be (B, T) = (", c.B, ", ", c.T, "), got ", tags.sizes());
  const Tensor ids = (tags.scalar_type() == at::kLong ? tags : tags.to(at::kLong)).contiguous();
  Tensor gold = at::empty({c.B}, like(c));
  const int64_t bad = e.nll(em, tr, st, en, mask, c.B, c.T, c.K, c.per_position,
                            ids.data_ptr<int64_t>(), value.data_ptr<S>(), gold.data_ptr<S>(),
                            ptr<S>(p[0]), ptr<S>(p[1]), ptr<S>(p[2]), ptr<S>(p[3]),
                            static_cast<int>(threads));
  if (bad >= 0) {
    const int64_t b = bad / c.T, t = bad % c.T;
    TORCH_CHECK_VALUE(false, "tag ", ids.data_ptr<int64_t>()[bad], " at unmasked position (batch ",
                      b, ", time ", t, ") is out of range [0, ", c.K, ")");
  }
  return {value, gold};
}

std::pair<Tensor, Tensor> chain_forward(const Chain& c, const Tensor& tags, int64_t threads,
                                  std::array<Tensor, 4>& p) {
  return c.em.scalar_type() == at::kFloat ? run_forward<float>(c, tags, threads, p)
                                          : run_forward<double>(c, tags, threads, p);
}

// Gradients of sum_b grad[b] * value[b] from the saved parts, by the kernel's scale_grads.
template <typename S>
variable_list run_scale(const Tensor& grad, const std::array<Tensor, 4>& p, int64_t B, int64_t T,
                        int64_t K, bool per_position, const std::array<bool, 4>& need) {
  const auto o = p[0].options();
  // A reduced loss's gradient arrives expanded (stride 0): its one value is spread here, not copied
  // by a torch operation. When that value is 1 (a summed loss), the gradients that are a part
  // itself (the emissions', per-edge transitions') are the saved part: returned as it is, no
  // allocation and no pass (the engine releases the saved parts before the gradients accumulate,
  // so the accumulation takes the tensor over; with retain_graph it copies it).
  const bool spread_grad =
      grad.dim() == 1 && grad.stride(0) == 0 && grad.scalar_type() == p[0].scalar_type();
  const bool ones = spread_grad && grad.data_ptr<S>()[0] == S(1);
  Tensor d_em, d_tr;
  if (need[0]) d_em = ones ? p[0] : at::empty({B, T, K}, o);
  if (need[1] && p[1].defined()) {
    if (!per_position)
      d_tr = at::empty({K, K}, o);
    else
      d_tr = ones ? p[1] : at::empty({B, std::max<int64_t>(T - 1, 0), K, K}, o);
  }
  Tensor d_st = need[2] ? at::empty({K}, o) : Tensor();
  Tensor d_en = need[3] ? at::empty({K}, o) : Tensor();
  std::vector<S> spread;
  Tensor g;
  const S* gp;
  if (spread_grad) {
    spread.assign(B, grad.data_ptr<S>()[0]);
    gp = spread.data();
  } else {
    g = (grad.scalar_type() == p[0].scalar_type() ? grad : grad.to(p[0].scalar_type())).contiguous();
    gp = g.data_ptr<S>();
  }
  S* em_out = ones ? nullptr : ptr<S>(d_em);
  S* tr_out = ones && per_position ? nullptr : ptr<S>(d_tr);
  entries<S>().scale(gp, ptr<S>(p[0]), ptr<S>(p[1]), ptr<S>(p[2]), ptr<S>(p[3]), B, T, K,
                     per_position, em_out, tr_out, ptr<S>(d_st), ptr<S>(d_en));
  return {d_em, d_tr, d_st, d_en};
}

// The fused rule: value (and the non-differentiable gold score), gradient from the saved parts.
struct FusedChain : public torch::autograd::Function<FusedChain> {
  static variable_list forward(AutogradContext* ctx, const Tensor& em, const Tensor& tr,
                               const Tensor& st, const Tensor& en, const Tensor& mask,
                               const std::optional<Tensor>& gold_tags, int64_t threads) {
    const Tensor tags = gold_tags.has_value() ? *gold_tags : Tensor();
    const std::array<bool, 4> need = {em.requires_grad(), tr.requires_grad(), st.requires_grad(),
                                      en.requires_grad()};
    Chain c = prepare(em, tr, st, en, mask);
    auto p = parts(c, true, need[1]);
    auto [value, gold] = chain_forward(c, tags, threads, p);
    ctx->save_for_backward({em, tr, st, en, mask, tags, p[0], p[1], p[2], p[3]});
    ctx->saved_data["per_position"] = c.per_position;
    if (!gold.defined()) return {value};
    ctx->mark_non_differentiable({gold});
    return {value, gold};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const Tensor& grad = grads[0];
    const Tensor &em = saved[0], &tr = saved[1], &st = saved[2], &en = saved[3];
    const std::array<bool, 4> need = {ctx->needs_input_grad(0), ctx->needs_input_grad(1),
                                      ctx->needs_input_grad(2), ctx->needs_input_grad(3)};
    variable_list g;
    if (torch::autograd::GradMode::is_enabled()) {  // create_graph: a differentiable recomputation
      static auto recompute =
          c10::Dispatcher::singleton()
              .findSchemaOrThrow("crfhead::fused_recompute", "")
              .typed<std::tuple<Tensor, Tensor, Tensor, Tensor>(
                  const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                  const std::optional<Tensor>&, const Tensor&, bool)>();
      const std::optional<Tensor> tags =
          saved[5].defined() ? std::optional<Tensor>(saved[5]) : std::nullopt;
      auto [a, b, c, d] = recompute.call(em, tr, st, en, saved[4], tags, grad, need[1]);
      g = {a, b, c, d};
    } else {
      const std::array<Tensor, 4> p = {saved[6], saved[7], saved[8], saved[9]};
      const int64_t B = p[0].size(0), T = p[0].size(1), K = p[0].size(2);
      const bool per_position = ctx->saved_data["per_position"].toBool();
      g = p[0].scalar_type() == at::kFloat
              ? run_scale<float>(grad, p, B, T, K, per_position, need)
              : run_scale<double>(grad, p, B, T, K, per_position, need);
      // The gradient in each input's own dtype (prepare computed in the emissions' dtype).
      const Tensor* inputs[4] = {&em, &tr, &st, &en};
      for (int i = 0; i < 4; ++i)
        if (g[i].defined() && g[i].scalar_type() != inputs[i]->scalar_type())
          g[i] = g[i].to(inputs[i]->scalar_type());
    }
    for (int i = 0; i < 4; ++i)
      if (!need[i]) g[i] = Tensor();
    return {g[0], g[1], g[2], g[3], Tensor(), Tensor(), Tensor()};
  }
};

bool any_grad(const Tensor& em, const Tensor& tr, const Tensor& st, const Tensor& en) {
  return torch::autograd::GradMode::is_enabled() &&
         (em.requires_grad() || tr.requires_grad() || st.requires_grad() || en.requires_grad());
}

std::tuple<Tensor, Tensor> fused_nll(const Tensor& em, const Tensor& tr, const Tensor& st,
                                     const Tensor& en, const Tensor& mask, const Tensor& tags,
                                     int64_t threads) {
  if (any_grad(em, tr, st, en)) {
    auto out = FusedChain::apply(em, tr, st, en, mask, std::optional<Tensor>(tags), threads);
    return {out[0], out[1]};
  }
  at::AutoDispatchBelowADInplaceOrView guard;
  Chain c = prepare(em, tr, st, en, mask);
  std::array<Tensor, 4> none;
  auto [value, gold] = chain_forward(c, tags, threads, none);
  return {value, gold};
}

Tensor fused_log_partition(const Tensor& em, const Tensor& tr, const Tensor& st, const Tensor& en,
                           const Tensor& mask, int64_t threads) {
  if (any_grad(em, tr, st, en))
    return FusedChain::apply(em, tr, st, en, mask, std::optional<Tensor>(), threads)[0];
  at::AutoDispatchBelowADInplaceOrView guard;
  Chain c = prepare(em, tr, st, en, mask);
  std::array<Tensor, 4> none;
  return chain_forward(c, Tensor(), threads, none).first;
}

std::tuple<Tensor, Tensor> fused_viterbi(const Tensor& em, const Tensor& tr, const Tensor& st,
                                         const Tensor& en, const Tensor& mask, int64_t threads) {
  at::AutoDispatchBelowADInplaceOrView guard;
  at::NoGradGuard no_grad;  // the paths carry no gradient; the caller re-scores them if needed
  Chain c = prepare(em.detach(), tr.detach(), st.detach(), en.detach(), mask);
  Tensor scores = at::empty({c.B}, like(c));
  Tensor paths = at::empty({c.B, c.T}, c.em.options().dtype(at::kLong));
  const auto* m = reinterpret_cast<const uint8_t*>(c.mask.data_ptr<bool>());
  if (c.em.scalar_type() == at::kFloat) {
    TORCH_CHECK(f32.viterbi, "crfhead ops: the kernel's entry points are not bound");
    f32.viterbi(c.em.data_ptr<float>(), c.tr.data_ptr<float>(), c.st.data_ptr<float>(),
                c.en.data_ptr<float>(), m, c.B, c.T, c.K, c.per_position, scores.data_ptr<float>(),
                paths.data_ptr<int64_t>(), static_cast<int>(threads));
  } else {
    TORCH_CHECK(f64.viterbi, "crfhead ops: the kernel's entry points are not bound");
    f64.viterbi(c.em.data_ptr<double>(), c.tr.data_ptr<double>(), c.st.data_ptr<double>(),
                c.en.data_ptr<double>(), m, c.B, c.T, c.K, c.per_position,
                scores.data_ptr<double>(), paths.data_ptr<int64_t>(), static_cast<int>(threads));
  }
  return {scores, paths};
}

// The boundary's finiteness pass (crfhead.checks.ChainCheck): -1 all finite, -2 only masked emissions
// not finite, 4 * flat index + tensor for the first NaN or +inf refused; -3 where the tensors are not
// one float dtype, contiguous, on the CPU, with a bool mask (torch's reductions check those).
int64_t fused_check(const Tensor& em, const Tensor& tr, const Tensor& st, const Tensor& en,
                    const Tensor& mask) {
  const auto dtype = em.scalar_type();
  if ((dtype != at::kFloat && dtype != at::kDouble) || em.dim() != 3 || !em.device().is_cpu() ||
      tr.scalar_type() != dtype || st.scalar_type() != dtype || en.scalar_type() != dtype ||
      mask.scalar_type() != at::kBool || !em.is_contiguous() || !tr.is_contiguous() ||
      !st.is_contiguous() || !en.is_contiguous() || !mask.is_contiguous())
    return -3;
  const int64_t B = em.size(0), T = em.size(1), K = em.size(2);
  const bool shared = tr.dim() == 2 && tr.size(0) == K && tr.size(1) == K;
  const bool per_edge = tr.dim() == 4 && tr.size(0) == B && tr.size(1) == std::max<int64_t>(T - 1, 0) &&
                        tr.size(2) == K && tr.size(3) == K;
  if (!(shared || per_edge) || st.numel() != K || en.numel() != K || mask.dim() != 2 ||
      mask.size(0) != B || mask.size(1) != T || !tr.device().is_cpu() || !st.device().is_cpu() ||
      !en.device().is_cpu() || !mask.device().is_cpu())
    return -3;
  const auto* m = reinterpret_cast<const uint8_t*>(mask.data_ptr<bool>());
  const int per_position = tr.dim() == 4;
  if (dtype == at::kFloat) {
    TORCH_CHECK(f32.first_non_finite, "crfhead ops: the kernel's entry points are not bound");
    return f32.first_non_finite(em.data_ptr<float>(), tr.data_ptr<float>(), st.data_ptr<float>(),
                                en.data_ptr<float>(), m, em.size(0), em.size(1), em.size(2),
                                per_position);
  }
  TORCH_CHECK(f64.first_non_finite, "crfhead ops: the kernel's entry points are not bound");
  return f64.first_non_finite(em.data_ptr<double>(), tr.data_ptr<double>(), st.data_ptr<double>(),
                              en.data_ptr<double>(), m, em.size(0), em.size(1), em.size(2),
                              per_position);
}

}  // namespace crfhead

extern "C" {

// Version of this file's ops and of crfhead_ops_bind's table; Python checks it after loading.
int crfhead_ops_version() { return 1; }

// Bind the kernel library's entry points, in this order: forward_backward, nll_grad, scale_grads,
// viterbi, first_non_finite, each float32 then float64 (10 pointers).
void crfhead_ops_bind(void* const* fns) {
  using namespace crfhead;
  f32.forward_backward = reinterpret_cast<FbFn<float>>(fns[0]);
  f64.forward_backward = reinterpret_cast<FbFn<double>>(fns[1]);
  f32.nll = reinterpret_cast<NllFn<float>>(fns[2]);
  f64.nll = reinterpret_cast<NllFn<double>>(fns[3]);
  f32.scale = reinterpret_cast<ScaleFn<float>>(fns[4]);
  f64.scale = reinterpret_cast<ScaleFn<double>>(fns[5]);
  f32.viterbi = reinterpret_cast<ViterbiFn<float>>(fns[6]);
  f64.viterbi = reinterpret_cast<ViterbiFn<double>>(fns[7]);
  f32.first_non_finite = reinterpret_cast<CheckFn<float>>(fns[8]);
  f64.first_non_finite = reinterpret_cast<CheckFn<double>>(fns[9]);
}

}  // extern "C"

TORCH_LIBRARY_FRAGMENT(crfhead, m) {
  m.def("fused_nll(Tensor em, Tensor tr, Tensor start, Tensor end, Tensor mask, Tensor tags, "
        "int threads) -> (Tensor, Tensor)");
  m.def("fused_log_partition(Tensor em, Tensor tr, Tensor start, Tensor end, Tensor mask, "
        "int threads) -> Tensor");
  m.def("fused_viterbi(Tensor em, Tensor tr, Tensor start, Tensor end, Tensor mask, int threads) "
        "-> (Tensor, Tensor)");
  m.def("fused_check(Tensor em, Tensor tr, Tensor start, Tensor end, Tensor mask) -> int");
  // Implemented in Python (crfhead.engine.backends.cpu.eager): the gradient by the portable scan.
  m.def("fused_recompute(Tensor em, Tensor tr, Tensor start, Tensor end, Tensor mask, Tensor? tags, "
        "Tensor grad, bool edges) -> (Tensor, Tensor, Tensor, Tensor)");
}

// One kernel for the CPU and autograd keys alike: the functions above choose the autograd rule
// themselves (the loss and log Z) or carry none (Viterbi).
TORCH_LIBRARY_IMPL(crfhead, CompositeImplicitAutograd, m) {
  m.impl("fused_nll", crfhead::fused_nll);
  m.impl("fused_log_partition", crfhead::fused_log_partition);
  m.impl("fused_viterbi", crfhead::fused_viterbi);
  m.impl("fused_check", crfhead::fused_check);
}
