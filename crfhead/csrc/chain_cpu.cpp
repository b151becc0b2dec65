// Fused CPU kernels of the linear-chain dynamic programs (the "cpu" backend of crfhead.backends).
//
// Plain C++17 with a C ABI (no torch headers: it compiles in about a second and is loaded with
// ctypes). One call runs the whole forward-backward (log Z, node marginals, edge marginals, the
// marginals of the first and last tag) or the whole Viterbi with back-trace, for every sequence of the
// batch, the batch split over threads. The contract is crfhead.potentials.ChainPotentials:
//   emissions   (B, T, K)
//   transitions (K, K) shared, or (B, T-1, K, K) per edge (entry t-1 enters position t), [from, to]
//   start, end  (K,)
//   mask        (B, T) bool (one byte each); holes allowed: the chain links consecutive unmasked
//               positions. A row with no unmasked position has log Z = 0 and an all -1 path.
// Every array is contiguous, row-major.
//
// Numerics. Sum-product runs in scaled probability space: the forward state is a probability vector,
// renormalised every step with its log-normaliser accumulated in double, and a step is a K x K
// matrix-vector product with exp(transitions - max): K^2 multiply-adds and K exps per step instead of
// K^2 exps in log space. Scaling is exact unless a normaliser leaves the floating-point range; every
// such event (a step's normaliser, a node's alpha.beta overlap or an edge's normaliser below TINY) is
// detected, and that sequence is recomputed in log space in double, so the results are correct for
// scores of any magnitude. Max-product (Viterbi) runs in log space (adds and compares only). Ties in
// Viterbi go to the lowest previous tag and the lowest final tag, as torch.max does in the portable
// backend.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <thread>
#include <vector>

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

template <typename S>
struct Tiny;
template <>
struct Tiny<float> {
  static constexpr double value = 1e-20;
};
template <>
struct Tiny<double> {
  static constexpr double value = 1e-200;
};

template <typename S>
struct Chain {
  const S* em;
  const S* trans;
  const S* start;
  const S* end;
  const uint8_t* mask;
  int64_t B, T, K;
  bool per_position;

  const S* emission(int64_t b, int64_t t) const { return em + (b * T + t) * K; }
  const S* edge(int64_t b, int64_t t) const {  // the edge entering position t >= 1
    return per_position ? trans + (b * (T - 1) + (t - 1)) * K * K : trans;
  }
  void positions(int64_t b, std::vector<int64_t>& pos) const {
    pos.clear();
    for (int64_t t = 0; t < T; ++t)
      if (mask[b * T + t]) pos.push_back(t);
  }
};

// exp for float that the compiler vectorises (Cephes-style: Cody-Waite range reduction and a degree-6
// polynomial, relative error below 2e-7); arguments are clamped to [-87, 88], and exp(-87) ~ 1.6e-38 is
// the same floor as crfhead.numerics.EXP_FLOOR, below which the portable engine also flushes to 0.
inline float fast_exp(float x) {
  x = std::min(88.0f, std::max(-87.0f, x));
  const float n = std::nearbyint(x * 1.44269504088896341f);
  float r = x - n * 0.693359375f;
  r = r + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t e = static_cast<int32_t>(n) + 127;
  float scale;
  const int32_t bits = e << 23;
  std::memcpy(&scale, &bits, sizeof(scale));
  return p * scale;
}
inline double fast_exp(double x) { return std::exp(x); }

template <typename S>
S max_of(const S* x, int64_t n) {
  S m = -std::numeric_limits<S>::infinity();
#pragma omp simd reduction(max : m)
  for (int64_t i = 0; i < n; ++i) m = std::max(m, x[i]);
  return m;
}

// out = exp(x - max x) (n values); returns max x.
template <typename S>
double exp_shifted(const S* x, int64_t n, S* out) {
  const S m = max_of(x, n);
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) out[i] = fast_exp(x[i] - m);
  return static_cast<double>(m);
}

// v /= sum(v); returns log sum(v), or NaN when the sum is below Tiny (the step left the range).
template <typename S>
double normalise(S* v, int64_t K) {
  S s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t k = 0; k < K; ++k) s += v[k];
  if (!(static_cast<double>(s) > Tiny<S>::value)) return std::numeric_limits<double>::quiet_NaN();
  const S inv = S(1) / s;
#pragma omp simd
  for (int64_t k = 0; k < K; ++k) v[k] *= inv;
  return std::log(static_cast<double>(s));
}

double logsumexp(const double* x, int64_t n) {
  double m = kNegInf;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, x[i]);
  if (m == kNegInf) return kNegInf;
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) s += std::exp(x[i] - m);
  return m + std::log(s);
}

// Per-thread scratch space.
template <typename S>
struct Work {
  std::vector<int64_t> pos;
  std::vector<S> A, E, beta, prev_beta, w, P;
  std::vector<double> prod, la, lb, tmp;
};

// Outputs of one call (nullptr where not wanted).
template <typename S>
struct Out {
  S* logz;   // (B,)
  S* node;   // (B, T, K)
  S* edge;   // (B, K, K) shared or (B, T-1, K, K) per edge
  S* first;  // (B, K)
  S* last;   // (B, K)
};

// Exact log-space forward-backward of one sequence in double (the fallback).
template <typename S>
void log_space_one(const Chain<S>& c, int64_t b, Work<S>& w, const Out<S>& out) {
  const int64_t K = c.K, n = static_cast<int64_t>(w.pos.size());
  const auto& pos = w.pos;
  w.la.assign(n * K, kNegInf);
  w.lb.assign(n * K, 0.0);
  w.tmp.resize(K * K);
  const S* e0 = c.emission(b, pos[0]);
  for (int64_t k = 0; k < K; ++k) w.la[k] = static_cast<double>(c.start[k]) + e0[k];
  for (int64_t i = 1; i < n; ++i) {
    const S* tr = c.edge(b, pos[i]);
    const S* e = c.emission(b, pos[i]);
    for (int64_t k = 0; k < K; ++k) {
      for (int64_t j = 0; j < K; ++j) w.tmp[j] = w.la[(i - 1) * K + j] + tr[j * K + k];
      w.la[i * K + k] = logsumexp(w.tmp.data(), K) + e[k];
    }
  }
  for (int64_t k = 0; k < K; ++k) w.lb[(n - 1) * K + k] = c.end[k];
  for (int64_t i = n - 1; i > 0; --i) {
    const S* tr = c.edge(b, pos[i]);
    const S* e = c.emission(b, pos[i]);
    for (int64_t j = 0; j < K; ++j) {
      for (int64_t k = 0; k < K; ++k) w.tmp[k] = tr[j * K + k] + e[k] + w.lb[i * K + k];
      w.lb[(i - 1) * K + j] = logsumexp(w.tmp.data(), K);
    }
  }
  for (int64_t k = 0; k < K; ++k) w.tmp[k] = w.la[(n - 1) * K + k] + c.end[k];
  const double logz = logsumexp(w.tmp.data(), K);
  if (out.logz) out.logz[b] = static_cast<S>(logz);
  if (!out.node) return;
  for (int64_t i = 0; i < n; ++i) {
    S* g = out.node + (b * c.T + pos[i]) * K;
    for (int64_t k = 0; k < K; ++k) w.tmp[k] = w.la[i * K + k] + w.lb[i * K + k];
    const double z = logsumexp(w.tmp.data(), K);  // = log Z up to rounding; renormalise exactly
    for (int64_t k = 0; k < K; ++k) g[k] = static_cast<S>(std::exp(w.tmp[k] - z));
    if (i == 0 && out.first)
      for (int64_t k = 0; k < K; ++k) out.first[b * K + k] = g[k];
    if (i == n - 1 && out.last)
      for (int64_t k = 0; k < K; ++k) out.last[b * K + k] = g[k];
  }
  if (!out.edge) return;
  for (int64_t i = 1; i < n; ++i) {
    const S* tr = c.edge(b, pos[i]);
    const S* e = c.emission(b, pos[i]);
    for (int64_t j = 0; j < K; ++j)
      for (int64_t k = 0; k < K; ++k)
        w.tmp[j * K + k] = w.la[(i - 1) * K + j] + tr[j * K + k] + e[k] + w.lb[i * K + k];
    const double z = logsumexp(w.tmp.data(), K * K);
    S* x = c.per_position ? out.edge + (b * (c.T - 1) + (pos[i] - 1)) * K * K : out.edge + b * K * K;
    for (int64_t q = 0; q < K * K; ++q) x[q] += static_cast<S>(std::exp(w.tmp[q] - z));
  }
}

// Scaled forward-backward of one sequence; returns false (outputs partly written) when a normaliser
// left the range, in which case the caller reruns log_space_one.
template <typename S>
bool scaled_one(const Chain<S>& c, int64_t b, const S* P_shared, double pmax_shared, Work<S>& w,
                const Out<S>& out) {
  const int64_t K = c.K, n = static_cast<int64_t>(w.pos.size());
  const auto& pos = w.pos;
  w.A.assign(n * K, S(0));
  w.E.resize(n * K);
  w.w.resize(K);
  w.P.resize(c.per_position ? K * K : 0);
  // ---- forward
  for (int64_t k = 0; k < K; ++k) w.w[k] = c.start[k] + c.emission(b, pos[0])[k];
  double log_scale = exp_shifted(w.w.data(), K, w.A.data());
  log_scale += normalise(w.A.data(), K);  // the max term is 1: never out of range
  for (int64_t i = 1; i < n; ++i) {
    const S* Pm = P_shared;
    double pmax = pmax_shared;
    if (c.per_position) {
      pmax = exp_shifted(c.edge(b, pos[i]), K * K, w.P.data());
      Pm = w.P.data();
    }
    const S* prev = w.A.data() + (i - 1) * K;
    S* cur = w.A.data() + i * K;
    for (int64_t j = 0; j < K; ++j) {
      const S a = prev[j];
      if (a == S(0)) continue;
      const S* row = Pm + j * K;
#pragma omp simd
      for (int64_t k = 0; k < K; ++k) cur[k] += a * row[k];
    }
    S* Ei = w.E.data() + i * K;  // exp(em - max), kept for the backward pass
    const double emax = exp_shifted(c.emission(b, pos[i]), K, Ei);
#pragma omp simd
    for (int64_t k = 0; k < K; ++k) cur[k] *= Ei[k];
    const double ls = normalise(cur, K);
    if (std::isnan(ls)) return false;
    log_scale += ls + pmax + emax;
  }
  {
    const S* lastA = w.A.data() + (n - 1) * K;
    w.tmp.resize(K);
    for (int64_t k = 0; k < K; ++k)
      w.tmp[k] = lastA[k] > 0 ? std::log(static_cast<double>(lastA[k])) + c.end[k] : kNegInf;
    const double lz = log_scale + logsumexp(w.tmp.data(), K);
    if (!std::isfinite(lz)) return false;
    if (out.logz) out.logz[b] = static_cast<S>(lz);
  }
  if (!out.node) return true;
  // ---- backward, with the marginals read off as we go
  w.beta.resize(K);
  w.prev_beta.resize(K);
  w.prod.resize(K);
  exp_shifted(c.end, K, w.beta.data());
  normalise(w.beta.data(), K);
  for (int64_t i = n - 1; i >= 0; --i) {
    const S* a = w.A.data() + i * K;
    double s = 0.0;
    for (int64_t k = 0; k < K; ++k) {
      w.prod[k] = static_cast<double>(a[k]) * static_cast<double>(w.beta[k]);
      s += w.prod[k];
    }
    if (!(s > Tiny<S>::value)) return false;  // alpha and beta (nearly) disjoint: use log space
    S* g = out.node + (b * c.T + pos[i]) * K;
    for (int64_t k = 0; k < K; ++k) g[k] = static_cast<S>(w.prod[k] / s);
    if (i == n - 1 && out.last)
      for (int64_t k = 0; k < K; ++k) out.last[b * K + k] = g[k];
    if (i == 0) {
      if (out.first)
        for (int64_t k = 0; k < K; ++k) out.first[b * K + k] = g[k];
      break;
    }
    const S* Pm = P_shared;
    if (c.per_position) {
      exp_shifted(c.edge(b, pos[i]), K * K, w.P.data());
      Pm = w.P.data();
    }
    const S* Ei = w.E.data() + i * K;
#pragma omp simd
    for (int64_t k = 0; k < K; ++k) w.w[k] = Ei[k] * w.beta[k];
    for (int64_t j = 0; j < K; ++j) {
      const S* row = Pm + j * K;
      S acc = 0;
#pragma omp simd reduction(+ : acc)
      for (int64_t k = 0; k < K; ++k) acc += row[k] * w.w[k];
      w.prev_beta[j] = acc;
    }
    if (out.edge) {
      const S* ap = w.A.data() + (i - 1) * K;
      double tot = 0.0;
      for (int64_t j = 0; j < K; ++j) tot += static_cast<double>(ap[j]) * w.prev_beta[j];
      if (!(tot > Tiny<S>::value)) return false;
      S* x = c.per_position ? out.edge + (b * (c.T - 1) + (pos[i] - 1)) * K * K : out.edge + b * K * K;
      const S inv = static_cast<S>(1.0 / tot);
      for (int64_t j = 0; j < K; ++j) {
        const S aj = ap[j] * inv;
        if (aj == S(0)) continue;
        const S* row = Pm + j * K;
        S* xr = x + j * K;
#pragma omp simd
        for (int64_t k = 0; k < K; ++k) xr[k] += aj * row[k] * w.w[k];
      }
    }
    if (std::isnan(normalise(w.prev_beta.data(), K))) return false;
    std::swap(w.beta, w.prev_beta);
  }
  return true;
}

// Zero what scaled_one may have written for sequence b before the log-space rerun.
template <typename S>
void clear_one(const Chain<S>& c, int64_t b, const Out<S>& out) {
  const int64_t T = c.T, K = c.K;
  if (out.node) std::fill(out.node + b * T * K, out.node + (b + 1) * T * K, S(0));
  if (out.edge) {
    const int64_t per = c.per_position ? std::max<int64_t>(T - 1, 0) * K * K : K * K;
    std::fill(out.edge + b * per, out.edge + (b + 1) * per, S(0));
  }
}

template <typename F>
void parallel_rows(int64_t B, int num_threads, F&& body) {
  const int64_t threads = std::max<int64_t>(1, std::min<int64_t>(num_threads, B));
  if (threads == 1) {
    body(0, B);
    return;
  }
  std::vector<std::thread> pool;
  const int64_t chunk = (B + threads - 1) / threads;
  for (int64_t t = 1; t < threads; ++t) {
    const int64_t lo = t * chunk, hi = std::min(B, lo + chunk);
    if (lo < hi) pool.emplace_back([&body, lo, hi] { body(lo, hi); });
  }
  body(0, std::min(B, chunk));
  for (auto& th : pool) th.join();
}

// The loss gradient: subtract the gold path's indicators from the marginals (node, edge, first, last)
// and write the gold path's score. tags (B, T) int64, read at unmasked positions only.
template <typename S>
void subtract_gold(const Chain<S>& c, int64_t b, const std::vector<int64_t>& pos, const int64_t* tags,
                   S* gold, const Out<S>& out) {
  const int64_t K = c.K, T = c.T, n = static_cast<int64_t>(pos.size());
  double total = 0.0;
  int64_t prev = -1;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t t = pos[i];
    const int64_t z = tags[b * T + t];
    total += c.emission(b, t)[z];
    if (out.node) out.node[(b * T + t) * K + z] -= S(1);
    if (i == 0) {
      total += c.start[z];
      if (out.first) out.first[b * K + z] -= S(1);
    } else {
      total += c.edge(b, t)[prev * K + z];
      if (out.edge) {
        S* x = c.per_position ? out.edge + (b * (T - 1) + (t - 1)) * K * K : out.edge + b * K * K;
        x[prev * K + z] -= S(1);
      }
    }
    if (i == n - 1) {
      total += c.end[z];
      if (out.last) out.last[b * K + z] -= S(1);
    }
    prev = z;
  }
  if (gold) gold[b] = static_cast<S>(total);
}

template <typename S>
void forward_backward(const Chain<S>& c, const Out<S>& out, int num_threads, const int64_t* tags = nullptr,
                      S* gold = nullptr) {
  const int64_t K = c.K;
  std::vector<S> P_shared;
  double pmax = 0.0;
  if (!c.per_position && K > 0) {
    P_shared.resize(K * K);
    pmax = exp_shifted(c.trans, K * K, P_shared.data());
  }
  parallel_rows(c.B, num_threads, [&](int64_t lo, int64_t hi) {
    Work<S> w;
    for (int64_t b = lo; b < hi; ++b) {
      // Outputs arrive uninitialised: zero this sequence's part (masked rows stay 0).
      clear_one(c, b, out);
      if (out.logz) out.logz[b] = S(0);
      if (gold) gold[b] = S(0);
      if (out.first) std::fill(out.first + b * c.K, out.first + (b + 1) * c.K, S(0));
      if (out.last) std::fill(out.last + b * c.K, out.last + (b + 1) * c.K, S(0));
      c.positions(b, w.pos);
      if (w.pos.empty()) continue;
      if (!scaled_one(c, b, P_shared.data(), pmax, w, out)) {
        clear_one(c, b, out);
        log_space_one(c, b, w, out);
      }
      if (tags != nullptr) subtract_gold(c, b, w.pos, tags, gold, out);
    }
  });
}

template <typename S>
void viterbi(const Chain<S>& c, S* scores, int64_t* paths, int num_threads) {
  const int64_t K = c.K, T = c.T;
  const bool transpose = !c.per_position && K >= 32;
  std::vector<S> trT(transpose ? K * K : 0);  // [to][from]
  if (transpose)
    for (int64_t j = 0; j < K; ++j)
      for (int64_t k = 0; k < K; ++k) trT[k * K + j] = c.trans[j * K + k];
  parallel_rows(c.B, num_threads, [&](int64_t lo, int64_t hi) {
    std::vector<int64_t> pos;
    std::vector<S> delta(K), next(K);
    std::vector<int32_t> back;
    for (int64_t b = lo; b < hi; ++b) {
      std::fill(paths + b * T, paths + (b + 1) * T, int64_t(-1));
      c.positions(b, pos);
      const int64_t n = static_cast<int64_t>(pos.size());
      if (n == 0) {
        scores[b] = S(0);
        continue;
      }
      back.assign(n * K, 0);
      const S* e0 = c.emission(b, pos[0]);
      for (int64_t k = 0; k < K; ++k) delta[k] = c.start[k] + e0[k];
      for (int64_t i = 1; i < n; ++i) {
        const S* tr = c.edge(b, pos[i]);
        int32_t* bp = back.data() + i * K;
        // Branch-free (vectorised with blends); the strict '>' over ascending j keeps the lowest
        // previous tag on ties, as torch.max does.
        if (!trT.empty()) {
          // Shared transitions, K >= 32, transposed once: for each k a max-reduction over contiguous
          // j in registers, then the lowest j attaining it (a min-reduction), both vectorised. (For
          // small K the horizontal reductions cost more than the blend loop below.)
          for (int64_t k = 0; k < K; ++k) {
            const S* col = trT.data() + k * K;
            S m = -std::numeric_limits<S>::infinity();
#pragma omp simd reduction(max : m)
            for (int64_t j = 0; j < K; ++j) m = std::max(m, delta[j] + col[j]);
            int32_t arg = static_cast<int32_t>(K);
#pragma omp simd reduction(min : arg)
            for (int64_t j = 0; j < K; ++j)
              arg = std::min(arg, delta[j] + col[j] == m ? static_cast<int32_t>(j) : arg);
            next[k] = m;
            bp[k] = arg < K ? arg : 0;
          }
          const S* e = c.emission(b, pos[i]);
          for (int64_t k = 0; k < K; ++k) delta[k] = next[k] + e[k];
          continue;
        }
        for (int64_t k = 0; k < K; ++k) next[k] = -std::numeric_limits<S>::infinity();
        for (int64_t k = 0; k < K; ++k) bp[k] = 0;
        for (int64_t j = 0; j < K; ++j) {
          const S d = delta[j];
          const S* row = tr + j * K;
          const int32_t jj = static_cast<int32_t>(j);
#pragma omp simd
          for (int64_t k = 0; k < K; ++k) {
            const S cand = d + row[k];
            const bool gt = cand > next[k];
            next[k] = gt ? cand : next[k];
            bp[k] = gt ? jj : bp[k];
          }
        }
        const S* e = c.emission(b, pos[i]);
        for (int64_t k = 0; k < K; ++k) delta[k] = next[k] + e[k];
      }
      int64_t best = 0;
      S best_score = delta[0] + c.end[0];
      for (int64_t k = 1; k < K; ++k)
        if (delta[k] + c.end[k] > best_score) {
          best_score = delta[k] + c.end[k];
          best = k;
        }
      scores[b] = best_score;
      for (int64_t i = n - 1; i >= 0; --i) {
        paths[b * T + pos[i]] = best;
        if (i > 0) best = back[i * K + best];
      }
    }
  });
}

template <typename S>
Chain<S> chain(const S* em, const S* trans, const S* start, const S* end, const uint8_t* mask, int64_t B,
               int64_t T, int64_t K, int per_position) {
  return Chain<S>{em, trans, start, end, mask, B, T, K, per_position != 0};
}

}  // namespace

extern "C" {

int crfhead_abi_version() { return 3; }

#define CRFHEAD_DEFINE(SUFFIX, S)                                                                          \
  void crfhead_forward_backward_##SUFFIX(const S* em, const S* trans, const S* start, const S* end,       \
                                         const uint8_t* mask, int64_t B, int64_t T, int64_t K,              \
                                         int per_position, S* logz, S* node, S* edge, S* first, S* last, \
                                         int num_threads) {                                                 \
    forward_backward(chain(em, trans, start, end, mask, B, T, K, per_position),                            \
                     Out<S>{logz, node, edge, first, last}, num_threads);                                   \
  }                                                                                                         \
  void crfhead_nll_grad_##SUFFIX(const S* em, const S* trans, const S* start, const S* end,                \
                                 const uint8_t* mask, int64_t B, int64_t T, int64_t K, int per_position,   \
                                 const int64_t* tags, S* logz, S* gold, S* node, S* edge, S* first,       \
                                 S* last, int num_threads) {                                               \
    forward_backward(chain(em, trans, start, end, mask, B, T, K, per_position),                            \
                     Out<S>{logz, node, edge, first, last}, num_threads, tags, gold);                       \
  }                                                                                                         \
  void crfhead_viterbi_##SUFFIX(const S* em, const S* trans, const S* start, const S* end,                 \
                                const uint8_t* mask, int64_t B, int64_t T, int64_t K, int per_position,     \
                                S* scores, int64_t* paths, int num_threads) {                               \
    viterbi(chain(em, trans, start, end, mask, B, T, K, per_position), scores, paths, num_threads);        \
  }

CRFHEAD_DEFINE(f32, float)
CRFHEAD_DEFINE(f64, double)

}  // extern "C"
