// The fused CPU kernel as dispatcher ops (namespace crfhead): the one op of an eager call, of a
// torch.compile graph and of a torch.export program alike.
//
// The kernel itself is chain_cpu.cpp, a plain C library loaded through ctypes; this file holds no
// dynamic program. It registers the ops, allocates their outputs with at::empty, calls the kernel's
// entry points through pointers that Python binds once (crfhead_ops_bind), chooses each call's
// threads (the policy of crfhead/engine/backends/cpu/threads.py, which the tests hold equal), and
// registers the gradient rule of the loss and log Z once, as a torch::autograd::Function: the "fused"
// rule of crfhead/engine/backends/autograd.py (the forward computes the gradient's parts, the backward
// scales them by the upstream gradient in one more kernel call).
//
// Differentiable, with the rule (Autograd and CPU kernels):
//   crfhead::fused_nll(em, tr, start, end, mask, tags) -> (loss (B,), gold (B,))
//   crfhead::fused_log_partition(em, tr, start, end, mask) -> log Z (B,)
// The rule's steps, and the other ops (CPU kernels; Python registers their fake implementations, so
// a traced graph holds them with symbolic B and T):
//   crfhead::nll(em, tr, start, end, mask, tags, grads, edges) -> (loss, gold, node, edge, first, last)
//   crfhead::forward_backward(em, tr, start, end, mask, marginals, edges) -> (log Z, node, edge, first, last)
//   crfhead::scale_grads(grad, node, edge, first, last) -> (d_em, d_tr, d_start, d_end)
//   crfhead::marginals(em, tr, start, end, mask) -> node marginals (B, T, K)
//   crfhead::viterbi(em, tr, start, end, mask) -> (scores (B,), paths (B, T) int64), no gradient
//   crfhead::fused_check(em, tr, start, end, mask) -> the boundary's finiteness code (eager only)
// A part not asked for (grads / marginals / edges false) is an empty (0,) tensor.
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
#include <ATen/Parallel.h>
#include <ATen/TensorSubclassLikeUtils.h>
#include <c10/core/impl/TorchDispatchModeTLS.h>

#include <cerrno>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <tuple>
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
void (*pool_adaptive)(int) = nullptr;
int64_t parallel_work = 1'000'000;  // crfhead.engine.backends.cpu.threads.PARALLEL_WORK, set by bind

template <typename S>
const Entries<S>& entries();
template <>
const Entries<float>& entries<float>() { return f32; }
template <>
const Entries<double>& entries<double>() { return f64; }

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

// The threads of one call: crfhead.engine.backends.cpu.threads.threads_for, for blocks of sequences
// (8 float32 / 4 float64 lanes). $CRFHEAD_CPU_THREADS, if set, is the count (at most one per block,
// and the pool never backs off); else one thread below parallel_work, else torch's intra-op count.
int threads_for(int64_t B, int64_t T, int64_t K, bool float64) {
  const int64_t lanes = float64 ? 4 : 8;
  const int64_t tasks = (B + lanes - 1) / lanes;
  const char* env = std::getenv("CRFHEAD_CPU_THREADS");
  const bool explicit_count = env != nullptr && *env != '\0';
  int64_t wanted;
  if (explicit_count) {
    char* stop = nullptr;
    errno = 0;
    wanted = std::strtoll(env, &stop, 10);
    while (stop != nullptr && (*stop == ' ' || *stop == '\t' || *stop == '\n')) ++stop;
    TORCH_CHECK_VALUE(errno == 0 && stop != env && *stop == '\0',
                      "CRFHEAD_CPU_THREADS must be an integer, got '", env, "'");
  } else if (B * T * K * K < parallel_work) {
    return 1;
  } else {
    wanted = at::get_num_threads();
  }
  const int64_t n = std::max<int64_t>(1, std::min(wanted, tasks));
  if (n > 1 && pool_adaptive != nullptr) pool_adaptive(explicit_count ? 0 : 1);
  return static_cast<int>(n);
}

int threads_for(const Chain& c) {
  return threads_for(c.B, c.T, c.K, c.em.scalar_type() == at::kDouble);
}

// The gradient's parts (node, edge, first, last) for grads / edges; an empty (0,) tensor where not
// asked for.
std::array<Tensor, 4> parts(const Chain& c, bool grads, bool edges) {
  const auto o = like(c);
  std::array<Tensor, 4> out;
  if (!grads) {
    for (auto& x : out) x = at::empty({0}, o);
    return out;
  }
  out[0] = at::empty({c.B, c.T, c.K}, o);
  if (!edges)
    out[1] = at::empty({0}, o);
  else
    out[1] = c.per_position ? at::empty({c.B, std::max<int64_t>(c.T - 1, 0), c.K, c.K}, o)
                            : at::empty({c.B, c.K, c.K}, o);
  out[2] = at::empty({c.B, c.K}, o);
  out[3] = at::empty({c.B, c.K}, o);
  return out;
}

template <typename S>
S* part(const Tensor& x) {  // NULL for a part not asked for (undefined, or the (0,) placeholder)
  return x.defined() && x.dim() > 1 ? x.data_ptr<S>() : nullptr;
}

// log Z (tags undefined) or the loss and gold score, with the gradient's parts where p holds them.
template <typename S>
std::pair<Tensor, Tensor> run_forward(const Chain& c, const Tensor& tags,
                                      const std::array<Tensor, 4>* p) {
  const Entries<S>& e = entries<S>();
  const int threads = threads_for(c);
  Tensor value = at::empty({c.B}, like(c));
  const S *em = c.em.data_ptr<S>(), *tr = c.tr.data_ptr<S>();
  const S *st = c.st.data_ptr<S>(), *en = c.en.data_ptr<S>();
  const auto* mask = reinterpret_cast<const uint8_t*>(c.mask.data_ptr<bool>());
  S* out[4] = {nullptr, nullptr, nullptr, nullptr};
  if (p != nullptr)
    for (int i = 0; i < 4; ++i) out[i] = part<S>((*p)[i]);
  if (!tags.defined()) {
    TORCH_CHECK(e.forward_backward, "crfhead ops: the kernel's entry points are not bound");
    e.forward_backward(em, tr, st, en, mask, c.B, c.T, c.K, c.per_position, value.data_ptr<S>(),
                       out[0], out[1], out[2], out[3], threads);
    return {value, Tensor()};
  }
  TORCH_CHECK(e.nll, "crfhead ops: the kernel's entry points are not bound");
  TORCH_CHECK_VALUE(tags.dim() == 2 && tags.size(0) == c.B && tags.size(1) == c.T && tags.device().is_cpu(),
                    "tags must be (B, T) = (", c.B, ", ", c.T, "), got ", tags.sizes());
  const Tensor ids = (tags.scalar_type() == at::kLong ? tags : tags.to(at::kLong)).contiguous();
  Tensor gold = at::empty({c.B}, like(c));
  const int64_t bad = e.nll(em, tr, st, en, mask, c.B, c.T, c.K, c.per_position,
                            ids.data_ptr<int64_t>(), value.data_ptr<S>(), gold.data_ptr<S>(), out[0],
                            out[1], out[2], out[3], threads);
  if (bad >= 0) {
    const int64_t b = bad / c.T, t = bad % c.T;
    TORCH_CHECK_VALUE(false, "tag ", ids.data_ptr<int64_t>()[bad], " at unmasked position (batch ",
                      b, ", time ", t, ") is out of range [0, ", c.K, ")");
  }
  return {value, gold};
}

std::pair<Tensor, Tensor> chain_forward(const Chain& c, const Tensor& tags,
                                        const std::array<Tensor, 4>* p) {
  return c.em.scalar_type() == at::kFloat ? run_forward<float>(c, tags, p)
                                          : run_forward<double>(c, tags, p);
}

// ----------------------------------------------------------------------------- the CPU kernels
std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor, Tensor> nll(const Tensor& em, const Tensor& tr,
                                                               const Tensor& st, const Tensor& en,
                                                               const Tensor& mask, const Tensor& tags,
                                                               bool grads, bool edges) {
  Chain c = prepare(em, tr, st, en, mask);
  auto p = parts(c, grads, grads && edges);
  auto [value, gold] = chain_forward(c, tags, &p);
  return {value, gold, p[0], p[1], p[2], p[3]};
}

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> forward_backward(const Tensor& em, const Tensor& tr,
                                                                    const Tensor& st, const Tensor& en,
                                                                    const Tensor& mask, bool marginals,
                                                                    bool edges) {
  Chain c = prepare(em, tr, st, en, mask);
  auto p = parts(c, marginals || edges, edges);
  Tensor value = chain_forward(c, Tensor(), &p).first;
  return {value, p[0], p[1], p[2], p[3]};
}

Tensor marginals(const Tensor& em, const Tensor& tr, const Tensor& st, const Tensor& en,
                 const Tensor& mask) {
  return std::get<1>(forward_backward(em, tr, st, en, mask, true, false));
}

std::tuple<Tensor, Tensor> fused_nll_value(const Tensor& em, const Tensor& tr, const Tensor& st,
                                           const Tensor& en, const Tensor& mask, const Tensor& tags) {
  Chain c = prepare(em, tr, st, en, mask);
  auto [value, gold] = chain_forward(c, tags, nullptr);
  return {value, gold};
}

Tensor fused_log_partition_value(const Tensor& em, const Tensor& tr, const Tensor& st,
                                 const Tensor& en, const Tensor& mask) {
  return chain_forward(prepare(em, tr, st, en, mask), Tensor(), nullptr).first;
}

std::tuple<Tensor, Tensor> viterbi(const Tensor& em, const Tensor& tr, const Tensor& st,
                                   const Tensor& en, const Tensor& mask) {
  Chain c = prepare(em, tr, st, en, mask);
  const int threads = threads_for(c);
  Tensor scores = at::empty({c.B}, like(c));
  Tensor paths = at::empty({c.B, c.T}, c.em.options().dtype(at::kLong));
  const auto* m = reinterpret_cast<const uint8_t*>(c.mask.data_ptr<bool>());
  if (c.em.scalar_type() == at::kFloat) {
    TORCH_CHECK(f32.viterbi, "crfhead ops: the kernel's entry points are not bound");
    f32.viterbi(c.em.data_ptr<float>(), c.tr.data_ptr<float>(), c.st.data_ptr<float>(),
                c.en.data_ptr<float>(), m, c.B, c.T, c.K, c.per_position, scores.data_ptr<float>(),
                paths.data_ptr<int64_t>(), threads);
  } else {
    TORCH_CHECK(f64.viterbi, "crfhead ops: the kernel's entry points are not bound");
    f64.viterbi(c.em.data_ptr<double>(), c.tr.data_ptr<double>(), c.st.data_ptr<double>(),
                c.en.data_ptr<double>(), m, c.B, c.T, c.K, c.per_position,
                scores.data_ptr<double>(), paths.data_ptr<int64_t>(), threads);
  }
  return {scores, paths};
}

// Gradients of sum_b grad[b] * value[b] to (emissions, transitions, start, end) from the parts, by
// the kernel's scale_grads; d_tr an empty (0,) tensor where edge is. With alias (the eager backward
// alone: a traced op never returns its input), a summed loss's gradient that is a part itself (the
// emissions', the per-edge transitions') is returned as that part: no allocation and no pass (the
// engine releases the saved parts before the gradients accumulate, so the accumulation takes the
// tensor over; with retain_graph it copies it).
template <typename S>
std::array<Tensor, 4> run_scale(const Tensor& grad, const Tensor& node, const Tensor& edge,
                                const Tensor& first, const Tensor& last, bool alias) {
  const int64_t B = node.size(0), T = node.size(1), K = node.size(2);
  const bool has_edge = edge.dim() > 1;
  const bool per_position = edge.dim() == 4;
  const auto o = node.options();
  // A reduced loss's gradient arrives expanded (stride 0): its one value is spread here, not copied
  // by a torch operation.
  const bool spread_grad = grad.dim() == 1 && grad.size(0) == B && grad.stride(0) == 0 &&
                           grad.scalar_type() == node.scalar_type();
  const bool ones = alias && spread_grad && B > 0 && grad.data_ptr<S>()[0] == S(1);
  Tensor d_em = ones ? node : at::empty({B, T, K}, o);
  Tensor d_tr;
  if (!has_edge)
    d_tr = at::empty({0}, o);
  else if (!per_position)
    d_tr = at::empty({K, K}, o);
  else
    d_tr = ones ? edge : at::empty(edge.sizes(), o);
  Tensor d_st = at::empty({K}, o), d_en = at::empty({K}, o);
  std::vector<S> spread;
  Tensor g;
  const S* gp;
  if (spread_grad) {
    spread.assign(B, B > 0 ? grad.data_ptr<S>()[0] : S(0));
    gp = spread.data();
  } else {
    TORCH_CHECK_VALUE(grad.dim() == 1 && grad.size(0) == B, "the loss's gradient must be (B,) = (",
                      B, "), got ", grad.sizes());
    g = (grad.scalar_type() == node.scalar_type() ? grad : grad.to(node.scalar_type())).contiguous();
    gp = g.data_ptr<S>();
  }
  TORCH_CHECK(entries<S>().scale, "crfhead ops: the kernel's entry points are not bound");
  entries<S>().scale(gp, node.data_ptr<S>(), part<S>(edge), first.data_ptr<S>(), last.data_ptr<S>(),
                     B, T, K, per_position, ones ? nullptr : d_em.data_ptr<S>(),
                     ones && per_position ? nullptr : part<S>(d_tr), d_st.data_ptr<S>(),
                     d_en.data_ptr<S>());
  return {d_em, d_tr, d_st, d_en};
}

std::array<Tensor, 4> scale_parts(const Tensor& grad, const Tensor& node, const Tensor& edge,
                                  const Tensor& first, const Tensor& last, bool alias) {
  TORCH_CHECK_VALUE(node.dim() == 3 && node.is_contiguous() && first.is_contiguous() &&
                        last.is_contiguous() && edge.is_contiguous() &&
                        (node.scalar_type() == at::kFloat || node.scalar_type() == at::kDouble) &&
                        first.sizes() == at::IntArrayRef({node.size(0), node.size(2)}) &&
                        last.sizes() == first.sizes() &&
                        (edge.numel() == 0 || edge.dim() == 3 || edge.dim() == 4),
                    "scale_grads takes the parts of crfhead::nll or crfhead::forward_backward, got "
                    "node ", node.sizes(), ", edge ", edge.sizes(), ", first ", first.sizes());
  return node.scalar_type() == at::kFloat ? run_scale<float>(grad, node, edge, first, last, alias)
                                          : run_scale<double>(grad, node, edge, first, last, alias);
}

std::tuple<Tensor, Tensor, Tensor, Tensor> scale_grads(const Tensor& grad, const Tensor& node,
                                                       const Tensor& edge, const Tensor& first,
                                                       const Tensor& last) {
  auto g = scale_parts(grad, node, edge, first, last, false);
  return {g[0], g[1], g[2], g[3]};
}

// ----------------------------------------------------------------------------- the gradient rule
const c10::TypedOperatorHandle<std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor, Tensor>(
    const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, bool, bool)>&
nll_op() {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("crfhead::nll", "")
                             .typed<std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor, Tensor>(
                                 const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                 const Tensor&, const Tensor&, bool, bool)>();
  return op;
}

const c10::TypedOperatorHandle<std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor>(
    const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, bool, bool)>&
forward_backward_op() {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("crfhead::forward_backward", "")
                             .typed<std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor>(
                                 const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                 const Tensor&, bool, bool)>();
  return op;
}

// A real CPU tensor outside any tracing (no fake, functional or proxy tensor, no dispatch mode).
bool plain(const Tensor& x) {
  return !at::isTensorSubclassLike(x) && !c10::impl::dispatch_mode_enabled() && x.device().is_cpu();
}

// The fused rule: value (and the non-differentiable gold score), gradient from the saved parts. The
// forward calls crfhead::nll / crfhead::forward_backward and the backward crfhead::scale_grads, each
// through the dispatcher: a traced graph records them, an eager call runs their CPU kernels.
struct FusedChain : public torch::autograd::Function<FusedChain> {
  static variable_list forward(AutogradContext* ctx, const Tensor& em, const Tensor& tr,
                               const Tensor& st, const Tensor& en, const Tensor& mask,
                               const std::optional<Tensor>& gold_tags) {
    const bool edges = tr.requires_grad();
    // Only the value carries a gradient (gold is non-differentiable): no zeros are made for gold's.
    ctx->set_materialize_grads(false);
    Tensor value, gold;
    std::array<Tensor, 4> p;
    if (gold_tags.has_value()) {
      std::tie(value, gold, p[0], p[1], p[2], p[3]) =
          nll_op().call(em, tr, st, en, mask, *gold_tags, true, edges);
    } else {
      std::tie(value, p[0], p[1], p[2], p[3]) =
          forward_backward_op().call(em, tr, st, en, mask, true, edges);
    }
    const Tensor tags = gold_tags.has_value() ? *gold_tags : Tensor();
    ctx->save_for_backward({em, tr, st, en, mask, tags, p[0], p[1], p[2], p[3]});
    if (!gold.defined()) return {value};
    ctx->mark_non_differentiable({gold});
    return {value, gold};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const Tensor& grad = grads[0];
    if (!grad.defined()) return variable_list(6);  // no gradient reached the value
    const auto saved = ctx->get_saved_variables();
    const Tensor &em = saved[0], &tr = saved[1], &st = saved[2], &en = saved[3];
    const std::array<bool, 4> need = {ctx->needs_input_grad(0), ctx->needs_input_grad(1),
                                      ctx->needs_input_grad(2), ctx->needs_input_grad(3)};
    variable_list g(4);
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
      std::array<Tensor, 4> d;
      if (plain(grad) && plain(saved[6])) {
        d = scale_parts(grad, saved[6], saved[7], saved[8], saved[9], true);
      } else {
        static auto scale = c10::Dispatcher::singleton()
                                .findSchemaOrThrow("crfhead::scale_grads", "")
                                .typed<std::tuple<Tensor, Tensor, Tensor, Tensor>(
                                    const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                    const Tensor&)>();
        std::tie(d[0], d[1], d[2], d[3]) = scale.call(grad, saved[6], saved[7], saved[8], saved[9]);
      }
      // The gradient in each input's own dtype (the ops computed in the emissions' dtype).
      const Tensor* inputs[4] = {&em, &tr, &st, &en};
      for (int i = 0; i < 4; ++i)
        g[i] = d[i].scalar_type() == inputs[i]->scalar_type() ? d[i] : d[i].to(inputs[i]->scalar_type());
    }
    for (int i = 0; i < 4; ++i)
      if (!need[i]) g[i] = Tensor();
    return {g[0], g[1], g[2], g[3], Tensor(), Tensor()};
  }
};

bool any_grad(const Tensor& em, const Tensor& tr, const Tensor& st, const Tensor& en) {
  return torch::autograd::GradMode::is_enabled() &&
         (em.requires_grad() || tr.requires_grad() || st.requires_grad() || en.requires_grad());
}

// ----------------------------------------------------------------------------- the Autograd kernels
std::tuple<Tensor, Tensor> fused_nll(const Tensor& em, const Tensor& tr, const Tensor& st,
                                     const Tensor& en, const Tensor& mask, const Tensor& tags) {
  if (any_grad(em, tr, st, en)) {
    auto out = FusedChain::apply(em, tr, st, en, mask, std::optional<Tensor>(tags));
    return {out[0], out[1]};
  }
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("crfhead::fused_nll", "")
                       .typed<std::tuple<Tensor, Tensor>(const Tensor&, const Tensor&, const Tensor&,
                                                         const Tensor&, const Tensor&, const Tensor&)>();
  at::AutoDispatchBelowADInplaceOrView guard;
  return op.call(em, tr, st, en, mask, tags);
}

Tensor fused_log_partition(const Tensor& em, const Tensor& tr, const Tensor& st, const Tensor& en,
                           const Tensor& mask) {
  if (any_grad(em, tr, st, en))
    return FusedChain::apply(em, tr, st, en, mask, std::optional<Tensor>())[0];
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("crfhead::fused_log_partition", "")
                       .typed<Tensor(const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                     const Tensor&)>();
  at::AutoDispatchBelowADInplaceOrView guard;
  return op.call(em, tr, st, en, mask);
}

// Viterbi carries no gradient: the paths are discrete; a caller that needs their scores' gradient
// re-scores them (the op table's "rescore" rule).
std::tuple<Tensor, Tensor> viterbi_no_grad(const Tensor& em, const Tensor& tr, const Tensor& st,
                                           const Tensor& en, const Tensor& mask) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("crfhead::viterbi", "")
                       .typed<std::tuple<Tensor, Tensor>(const Tensor&, const Tensor&, const Tensor&,
                                                         const Tensor&, const Tensor&)>();
  at::AutoDispatchBelowADInplaceOrView guard;
  return op.call(em, tr, st, en, mask);
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
  // Every shape make_potentials accepts, exactly: -1 then stands for its whole validation.
  if (!(shared || per_edge) || st.dim() != 1 || st.size(0) != K || en.dim() != 1 ||
      en.size(0) != K || mask.dim() != 2 || mask.size(0) != B || mask.size(1) != T ||
      !tr.device().is_cpu() || !st.device().is_cpu() || !en.device().is_cpu() ||
      !mask.device().is_cpu())
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
int crfhead_ops_version() { return 2; }

// Bind the kernel library's entry points, in this order: forward_backward, nll_grad, scale_grads,
// viterbi, first_non_finite, each float32 then float64, then pool_adaptive (11 pointers); and the
// work from which a call uses more than one thread.
void crfhead_ops_bind(void* const* fns, int64_t parallel_work) {
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
  crfhead::pool_adaptive = reinterpret_cast<void (*)(int)>(fns[10]);
  crfhead::parallel_work = parallel_work;
}

// The threads a call on (B, T, K) potentials uses (float64: 4 lanes a block, else 8); for the tests.
int crfhead_ops_threads(int64_t B, int64_t T, int64_t K, int float64) {
  return crfhead::threads_for(B, T, K, float64 != 0);
}

}  // extern "C"

// The schemas of nll, forward_backward, marginals and viterbi are those of the earlier Python custom
// ops of the same names, so a torch.export program saved with them still loads.
TORCH_LIBRARY_FRAGMENT(crfhead, m) {
  m.def("fused_nll(Tensor em, Tensor tr, Tensor start, Tensor end, Tensor mask, Tensor tags) "
        "-> (Tensor, Tensor)");
  m.def("fused_log_partition(Tensor em, Tensor tr, Tensor start, Tensor end, Tensor mask) -> Tensor");
  m.def("nll(Tensor emissions, Tensor transitions, Tensor start, Tensor end, Tensor mask, "
        "Tensor tags, bool grads, bool edges) -> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)");
  m.def("forward_backward(Tensor emissions, Tensor transitions, Tensor start, Tensor end, "
        "Tensor mask, bool marginals, bool edges) -> (Tensor, Tensor, Tensor, Tensor, Tensor)");
  m.def("scale_grads(Tensor grad, Tensor node, Tensor edge, Tensor first, Tensor last) "
        "-> (Tensor, Tensor, Tensor, Tensor)");
  m.def("marginals(Tensor emissions, Tensor transitions, Tensor start, Tensor end, Tensor mask) "
        "-> Tensor");
  m.def("viterbi(Tensor emissions, Tensor transitions, Tensor start, Tensor end, Tensor mask) "
        "-> (Tensor, Tensor)");
  m.def("fused_check(Tensor em, Tensor tr, Tensor start, Tensor end, Tensor mask) -> int");
  // Implemented in Python (crfhead.engine.backends.cpu.dispatcher): the gradient by the portable scan.
  m.def("fused_recompute(Tensor em, Tensor tr, Tensor start, Tensor end, Tensor mask, Tensor? tags, "
        "Tensor grad, bool edges) -> (Tensor, Tensor, Tensor, Tensor)");
}

TORCH_LIBRARY_IMPL(crfhead, CPU, m) {
  m.impl("fused_nll", crfhead::fused_nll_value);
  m.impl("fused_log_partition", crfhead::fused_log_partition_value);
  m.impl("nll", crfhead::nll);
  m.impl("forward_backward", crfhead::forward_backward);
  m.impl("scale_grads", crfhead::scale_grads);
  m.impl("marginals", crfhead::marginals);
  m.impl("viterbi", crfhead::viterbi);
}

TORCH_LIBRARY_IMPL(crfhead, Autograd, m) {
  m.impl("fused_nll", crfhead::fused_nll);
  m.impl("fused_log_partition", crfhead::fused_log_partition);
  m.impl("viterbi", crfhead::viterbi_no_grad);
}

// Never traced (the op table skips the boundary's check while tracing): one kernel for every key.
TORCH_LIBRARY_IMPL(crfhead, CompositeImplicitAutograd, m) { m.impl("fused_check", crfhead::fused_check); }
