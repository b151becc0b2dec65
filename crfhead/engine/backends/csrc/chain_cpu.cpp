// Fused CPU kernels of the linear-chain dynamic programs (the "cpu" backend of crfhead.engine.backends).
//
// Plain C++17 with a C ABI (no torch headers: it compiles in seconds and is loaded with ctypes). One
// call runs the whole forward-backward (log Z, node marginals, edge marginals summed or per edge, the
// marginals of the first and last tag, and for the loss the gold score and marginals - gold counts),
// the whole Viterbi with back-trace, the max-sums (max-marginals up to log Z), the k best paths, or
// the draws of samples from a forward-backward's marginals, for every sequence of the batch. The
// contract is crfhead.engine.potentials.ChainPotentials:
//   emissions   (B, T, K)
//   transitions (K, K) shared, or (B, T-1, K, K) per edge (entry t-1 enters position t), [from, to]
//   start, end  (K,)
//   mask        (B, T) bool (one byte each); holes allowed: the chain links consecutive unmasked
//               positions. A row with no unmasked position has log Z = 0 and an all -1 path.
// Every array is contiguous, row-major.
//
// Forbidden is structural: any score (unmasked emissions, transitions, start, end) may be -inf, which
// means forbidden; no score is clamped, whatever its magnitude (masked emissions are never read). A
// -inf term contributes exactly 0 probability and is never chosen by a max. No -inf - (-inf) is ever
// formed: a shift by a maximum that is -inf shifts by 0 instead, and no sum that is 0 is divided by. A
// row whose every path is forbidden ("no valid path") has log Z = -inf, node/edge/first/last marginals
// exactly 0, and Viterbi score -inf with an all -1 path; the loss of a gold path with a -inf score is
// +inf (also when log Z is -inf), its gradient the marginals minus the gold counts as usual.
//
// Layout. With shared transitions (the common case) sequences are processed in blocks of W (8 float or
// 4 double lanes of a 256-bit vector), one sequence per SIMD lane ("structure of arrays"): each step is
// K^2 vector multiply-adds with the transition broadcast, every reduction over tags is vertical, and no
// lane is wasted when K is not a multiple of the vector width (K = 9 or 17 waste up to half the lanes
// when vectorising over tags). Sequences are sorted by length before they are grouped, so a block's
// lanes finish together; blocks are spread over the caller's thread and a pool of passive workers
// whose join never waits for a worker that has not started (see Pool; the caller chooses how many
// threads from the work). Per-edge transitions run in the same blocks, each lane with its own K x K
// factors (a matrix of vectors per step, recomputed for the backward pass); max-product with K > 32
// one sequence at a time, vectorised over tags (see lanes_per_edge).
//
// Numerics. Sum-product runs in scaled probability space: the forward state is a probability vector,
// renormalised every step with its log-normaliser accumulated in double, and a step is a K x K
// matrix-vector product with exp(transitions - max): K^2 multiply-adds and K exps per step instead of
// K^2 exps in log space. Scaling is exact unless a normaliser leaves the floating-point range (a step's
// normaliser, a node's alpha.beta overlap or an edge's normaliser below TINY) or the mass it drops
// could matter: exp flushes arguments below FLOOR (float -87, where exp stops being a normal float;
// double -700) to exactly 0, and denormal products are flushed, and a term negligible where it is
// dropped may carry most of Z further on (a flushed transition into a tag the next scores favour). The
// backward pass bounds the relative error of Z this can cause (see scaled_block); every such event is
// detected per sequence, and that sequence is recomputed in log space in double, so log Z and the
// marginals are exact for scores of any magnitude. Max-product (Viterbi) runs in log space (adds and
// compares only); back-pointers are not stored but recomputed along the best path (the same
// additions, so bit-identical). Ties go to the lowest previous tag and the lowest final tag, as
// torch.max does in the portable backend. The max-sums (max-marginals) run in the same blocks, the k
// best paths too (merging the K sorted lists of the previous states' k best prefixes, see
// merge_lanes), or for K, k >= 16 by lazy enumeration (see topk_lazy).

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#if defined(__AVX2__)
#include <immintrin.h>
#endif
#include <memory>
#include <string>
#include <mutex>
#include <numeric>
#include <system_error>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>
#if defined(__SSE__)
#include <xmmintrin.h>
#endif
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include <unistd.h>
#if defined(_OPENMP)
#include <omp.h>
#endif

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();
constexpr int64_t kLanesPerEdgeMaxPlusMaxK = 32;  // see lanes_per_edge
constexpr int64_t kLazyTopkMinK = 16;      // see topk_path
constexpr int kMergeTargets = 3;            // see merge_lanes

// The scaled recursions' constants per compute type:
//   tiny   a normaliser below it leaves the range (the sequence falls back to log space);
//   floor  exp flushes arguments below it to exactly 0 (float: crfhead.numerics.EXP_FLOOR, where
//          exp's result stops being a normal float; double: where a double does);
//   min    the least normal number (smaller products are flushed to 0: see FlushDenormals);
//   tol    the bound on the relative error of Z, from mass the scaled arithmetic lost, above which a
//          sequence falls back to log space (see loss_bound and scaled_block).
template <typename S>
struct Num;
template <>
struct Num<float> {
  static constexpr double tiny = 1e-20, floor = -87.0, tol = 1e-9;
  static constexpr double min = std::numeric_limits<float>::min();
};
template <>
struct Num<double> {
  static constexpr double tiny = 1e-200, floor = -700.0, tol = 1e-18;
  static constexpr double min = std::numeric_limits<double>::min();
};

// The mass one scaled step can lose, relative to its (normalised, sum 1) input state: the flushed
// factors (one exp per emission and per transition, each below exp(floor) times the factor's max,
// 2K terms) and the flushed denormal products and sums (at most K^2 + 3K, each below min).
template <typename S>
S loss_bound(int64_t K) {
  const double k = static_cast<double>(K);
  return static_cast<S>(2.0 * k * std::exp(Num<S>::floor) + (k * k + 3.0 * k) * Num<S>::min);
}

// 256-bit vectors (GCC/Clang vector extensions: SSE/AVX on x86, NEON pairs on ARM).
template <typename S>
struct Simd;
template <>
struct Simd<float> {
  typedef float V __attribute__((vector_size(32)));
  typedef int32_t I __attribute__((vector_size(32)));
  static constexpr int W = 8;
};
template <>
struct Simd<double> {
  typedef double V __attribute__((vector_size(32)));
  typedef int64_t I __attribute__((vector_size(32)));
  static constexpr int W = 4;
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
};

// The unmasked positions of every row (CSR), and the non-empty rows longest first.
struct Rows {
  std::vector<int64_t> offset;  // (B + 1,)
  std::vector<int64_t> pos;     // positions of row b: pos[offset[b] .. offset[b + 1])
  std::vector<int64_t> order;   // non-empty rows, by decreasing length (stable)

  Rows(const uint8_t* mask, int64_t B, int64_t T) : offset(B + 1, 0) {
    for (int64_t b = 0; b < B; ++b) {
      const uint8_t* m = mask + b * T;
      for (int64_t t = 0; t < T; ++t)
        if (m[t]) pos.push_back(t);
      offset[b + 1] = static_cast<int64_t>(pos.size());
      if (offset[b + 1] > offset[b]) order.push_back(b);
    }
    std::stable_sort(order.begin(), order.end(),
                     [this](int64_t a, int64_t b) { return length(a) > length(b); });
  }
  int64_t length(int64_t b) const { return offset[b + 1] - offset[b]; }
  const int64_t* of(int64_t b) const { return pos.data() + offset[b]; }
};

// Denormal operands are 10-100x slower on x86; nothing here needs them (every normaliser below TINY
// is already a fallback, and the flushed products are within the lost-mass bound, loss_bound), so
// flush them for the duration of a worker's loop.
struct FlushDenormals {
#if defined(__SSE__)
  unsigned saved = _mm_getcsr();
  FlushDenormals() { _mm_setcsr(saved | 0x8040); }  // FTZ | DAZ
  ~FlushDenormals() { _mm_setcsr(saved); }
#endif
};

// ------------------------------------------------------------------------------------------ exp

// exp for float that the compiler vectorises (Cephes-style: Cody-Waite range reduction and a degree-6
// polynomial, relative error below 2e-7); 0 below EXP_FLOOR and for -inf, arguments above 88 clamped.
// Arguments are never NaN here (every shift by a max that is -inf uses 0).
inline float fast_exp(float x) {
  if (x < static_cast<float>(Num<float>::floor)) return 0.0f;
  x = std::min(88.0f, x);
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
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return p * scale;
}
inline double fast_exp(double x) { return x < Num<double>::floor ? 0.0 : std::exp(x); }

// The same on a vector of 8 floats.
inline Simd<float>::V vexp(Simd<float>::V x) {
  using V = Simd<float>::V;
  using I = Simd<float>::I;
  const V zero = V{};
  const I under = x < static_cast<float>(Num<float>::floor);
  x = x > 88.0f ? zero + 88.0f : x;
  x = under ? zero : x;
  const V n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  // round to nearest
  V r = x - n * 0.693359375f;
  r = r + n * 2.12194440e-4f;
  V p = zero + 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const I bits = (__builtin_convertvector(n, I) + 127) << 23;
  const V y = p * (V)bits;  // a same-size vector cast reinterprets the bits
  return under ? zero : y;
}
inline Simd<double>::V vexp(Simd<double>::V x) {
  for (int l = 0; l < Simd<double>::W; ++l) x[l] = fast_exp(x[l]);
  return x;
}

template <typename S>
S max_of(const S* x, int64_t n) {
  S m = -std::numeric_limits<S>::infinity();
#pragma omp simd reduction(max : m)
  for (int64_t i = 0; i < n; ++i) m = std::max(m, x[i]);
  return m;
}

// What exp did to a factor in scaled space, for a forward pass without the backward (log Z only):
// whether it flushed a finite score to 0 (the true value is below exp(floor) times the max), and the
// least nonzero value.
template <typename S>
struct Flush {
  bool floored = false;
  S minnz = S(1);
};

// out = exp(x - max x) (n values); returns max x. When every x is -inf the shift is 0: out is all 0 and
// the returned max -inf (the caller's normaliser then fails and the sequence falls back to log space,
// which finds whether any path is left). With `flush`, also records what exp flushed.
template <typename S>
double exp_shifted(const S* x, int64_t n, S* out, Flush<S>* flush = nullptr) {
  constexpr S inf = std::numeric_limits<S>::infinity();
  if (!flush) {
    const S m = max_of(x, n);
    const S shift = m == -inf ? S(0) : m;
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) out[i] = fast_exp(x[i] - shift);
    return static_cast<double>(m);
  }
  S m = -inf, low = inf;  // the max, and the least finite score
#pragma omp simd reduction(max : m) reduction(min : low)
  for (int64_t i = 0; i < n; ++i) {
    m = std::max(m, x[i]);
    low = std::min(low, x[i] > -inf ? x[i] : inf);
  }
  const S shift = m == -inf ? S(0) : m;
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) out[i] = fast_exp(x[i] - shift);
  if (low < inf) {  // some finite score: the least one was flushed, or gives the least nonzero exp
    const S arg = low - shift;
    if (arg < static_cast<S>(Num<S>::floor))
      flush->floored = true;
    else
      flush->minnz = std::min(flush->minnz, fast_exp(arg));
  }
  return static_cast<double>(m);
}

// v /= sum(v); returns sum(v), or 0 (v untouched) when the sum is below tiny (the step left the range).
template <typename S>
double normalise(S* v, int64_t K) {
  S s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t k = 0; k < K; ++k) s += v[k];
  if (!(static_cast<double>(s) > Num<S>::tiny)) return 0.0;
  const S inv = S(1) / s;
#pragma omp simd
  for (int64_t k = 0; k < K; ++k) v[k] *= inv;
  return static_cast<double>(s);
}

double logsumexp(const double* x, int64_t n) {
  double m = kNegInf;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, x[i]);
  if (m == kNegInf) return kNegInf;
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) s += std::exp(x[i] - m);
  return m + std::log(s);
}

// ------------------------------------------------------------------------------------------ shared

// Outputs of one call (nullptr where not wanted).
template <typename S>
struct Out {
  S* logz;   // (B,)
  S* node;   // (B, T, K)
  S* edge;   // (B, K, K) shared or (B, T-1, K, K) per edge
  S* first;  // (B, K)
  S* last;   // (B, K)
  bool per_edge = false;  // edge is (B, T-1, K, K) per edge also with shared transitions
  // (B,) log Z in double as computed, for the loss: log Z - gold is a difference of two numbers of
  // the size of log Z, and log Z rounded to float first would leave it no digit at large scores.
  double* logz64 = nullptr;

  void set_logz(int64_t b, double lz) const {
    if (logz) logz[b] = static_cast<S>(lz);
    if (logz64) logz64[b] = lz;
  }

  // Where the edge marginals of the edge entering position t >= 1 of sequence b go: the sequence's
  // (K, K) sum, or entry t-1 of its per-edge ones.
  S* edge_at(const Chain<S>& c, int64_t b, int64_t t) const {
    return per_edge ? edge + (b * (c.T - 1) + (t - 1)) * c.K * c.K : edge + b * c.K * c.K;
  }
};

// The shared (K, K) transitions and the start/end vectors in scaled probability space.
template <typename S>
struct Shared {
  std::vector<S> P, PT;  // exp(transitions - pmax), [from][to] and [to][from]
  std::vector<S> start, end_norm;  // exp(start - smax); exp(end - emax) / its sum
  std::vector<double> end;         // exp(end - emax), double
  double pmax = 0, smax = 0, emax = 0;
  bool floored = false;            // exp flushed a finite transition, start or end score to 0
  S minP = S(1), minStart = S(1);  // the least nonzero entries of P and start

  Shared(const Chain<S>& c, bool transitions) {
    const int64_t K = c.K;
    Flush<S> fp, fs, fe;
    if (transitions && K > 0) {
      P.resize(K * K);
      PT.resize(K * K);
      pmax = exp_shifted(c.trans, K * K, P.data(), &fp);
      for (int64_t j = 0; j < K; ++j)
        for (int64_t k = 0; k < K; ++k) PT[k * K + j] = P[j * K + k];
    }
    std::vector<S> e(K);
    start.resize(K);
    smax = K ? exp_shifted(c.start, K, start.data(), &fs) : 0.0;
    emax = K ? exp_shifted(c.end, K, e.data(), &fe) : 0.0;
    floored = fp.floored || fs.floored || fe.floored;
    minP = fp.minnz;
    minStart = fs.minnz;
    end.assign(e.begin(), e.end());
    double sum = 0;
    for (int64_t k = 0; k < K; ++k) sum += end[k];
    end_norm.assign(K, S(0));  // all 0 when every end is -inf (no path: every sequence falls back)
    if (sum > 0)
      for (int64_t k = 0; k < K; ++k) end_norm[k] = static_cast<S>(end[k] / sum);
  }
};

// Per-thread scratch space.
template <typename S>
struct Work {
  using V = typename Simd<S>::V;
  using I = typename Simd<S>::I;
  std::vector<V> E, A, F, beta, nb, wv, acc, M;  // blocks of W sequences
  std::vector<V> kv, kc, kh;                     // k-best: states, candidate lists, list heads
  std::vector<I> kq, kb;                         // k-best: the heads' indices, back-pointers
  std::vector<S> sA, sE, sbeta, sprev, sw, sP;  // one sequence
  std::vector<double> sF, prod, la, lb, tmp;
};

// Zero the outputs of sequence b.
template <typename S>
void clear_one(const Chain<S>& c, int64_t b, const Out<S>& out) {
  const int64_t T = c.T, K = c.K;
  out.set_logz(b, 0.0);
  if (out.node) std::fill(out.node + b * T * K, out.node + (b + 1) * T * K, S(0));
  if (out.edge) {
    const int64_t per = out.per_edge ? std::max<int64_t>(T - 1, 0) * K * K : K * K;
    std::fill(out.edge + b * per, out.edge + (b + 1) * per, S(0));
  }
  if (out.first) std::fill(out.first + b * K, out.first + (b + 1) * K, S(0));
  if (out.last) std::fill(out.last + b * K, out.last + (b + 1) * K, S(0));
}

// The loss and its gradient: subtract the gold path's indicators from the marginals (node, edge, first,
// last) and its score from log Z, and write the score. tags (B, T) int64, read at unmasked positions
// only, checked to be in range beforehand (first_bad_tag). A forbidden gold path scores -inf and its
// loss is +inf, also when log Z is -inf (never -inf - (-inf)).
template <typename S>
void subtract_gold(const Chain<S>& c, int64_t b, const int64_t* pos, int64_t n, const int64_t* tags,
                   S* gold, const Out<S>& out) {
  const int64_t K = c.K, T = c.T;
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
      if (out.edge) out.edge_at(c, b, t)[prev * K + z] -= S(1);
    }
    if (i == n - 1) {
      total += c.end[z];
      if (out.last) out.last[b * K + z] -= S(1);
    }
    prev = z;
  }
  if (gold) gold[b] = static_cast<S>(total);
  if (out.logz) {  // the loss, >= 0 exactly: what rounding leaves below 0 is 0 (NaN stays NaN)
    const double lz = out.logz64 ? out.logz64[b] : static_cast<double>(out.logz[b]);
    const double loss = lz - total;
    out.logz[b] = total == kNegInf ? std::numeric_limits<S>::infinity()
                                   : static_cast<S>(loss < 0.0 ? 0.0 : loss);
  }
}

// --------------------------------------------------------------------- one sequence (per-edge, fallback)

// Exact log-space forward-backward of one sequence in double (the fallback). Outputs must be zeroed; a
// sequence with no valid path gets log Z = -inf and keeps its zero marginals.
template <typename S>
void log_space_one(const Chain<S>& c, int64_t b, const int64_t* pos, int64_t n, Work<S>& w,
                   const Out<S>& out) {
  const int64_t K = c.K;
  w.la.assign(n * K, kNegInf);
  w.tmp.resize(K * K);
  auto tr_at = [&](int64_t i, int64_t j, int64_t k) -> double { return c.edge(b, pos[i])[j * K + k]; };
  auto em_at = [&](int64_t i, int64_t k) -> double { return c.emission(b, pos[i])[k]; };
  // A tag whose emission is -inf stays -inf (its K-term sum is skipped); a position where every tag
  // is -inf ends the pass: no valid path, log Z = -inf exactly (clamped and constrained chains
  // without a path reach here, and die where the constraint bites).
  bool alive = false;
  for (int64_t k = 0; k < K; ++k) {
    w.la[k] = static_cast<double>(c.start[k]) + em_at(0, k);
    alive |= w.la[k] != kNegInf;
  }
  for (int64_t i = 1; i < n && alive; ++i) {
    alive = false;
    for (int64_t k = 0; k < K; ++k) {
      const double e = em_at(i, k);
      if (e == kNegInf) continue;  // w.la is -inf there already
      for (int64_t j = 0; j < K; ++j) w.tmp[j] = w.la[(i - 1) * K + j] + tr_at(i, j, k);
      w.la[i * K + k] = logsumexp(w.tmp.data(), K) + e;
      alive |= w.la[i * K + k] != kNegInf;
    }
  }
  if (!alive) {
    out.set_logz(b, kNegInf);
    return;  // the marginals stay 0
  }
  for (int64_t k = 0; k < K; ++k) w.tmp[k] = w.la[(n - 1) * K + k] + c.end[k];
  const double logz = logsumexp(w.tmp.data(), K);
  out.set_logz(b, logz);
  if (!out.node || logz == kNegInf) return;  // no valid path: the marginals stay 0
  w.lb.assign(n * K, 0.0);
  for (int64_t k = 0; k < K; ++k) w.lb[(n - 1) * K + k] = c.end[k];
  for (int64_t i = n - 1; i > 0; --i)
    for (int64_t j = 0; j < K; ++j) {
      for (int64_t k = 0; k < K; ++k) w.tmp[k] = tr_at(i, j, k) + em_at(i, k) + w.lb[i * K + k];
      w.lb[(i - 1) * K + j] = logsumexp(w.tmp.data(), K);
    }
  for (int64_t i = 0; i < n; ++i) {
    S* g = out.node + (b * c.T + pos[i]) * K;
    for (int64_t k = 0; k < K; ++k) w.tmp[k] = w.la[i * K + k] + w.lb[i * K + k];
    const double z = logsumexp(w.tmp.data(), K);  // = log Z up to rounding; renormalise exactly
    if (z == kNegInf) continue;                   // (not when log Z is finite; never exp(-inf + inf))
    for (int64_t k = 0; k < K; ++k) g[k] = static_cast<S>(std::exp(w.tmp[k] - z));
    if (i == 0 && out.first)
      for (int64_t k = 0; k < K; ++k) out.first[b * K + k] = g[k];
    if (i == n - 1 && out.last)
      for (int64_t k = 0; k < K; ++k) out.last[b * K + k] = g[k];
  }
  if (!out.edge) return;
  for (int64_t i = 1; i < n; ++i) {
    for (int64_t j = 0; j < K; ++j)
      for (int64_t k = 0; k < K; ++k)
        w.tmp[j * K + k] = w.la[(i - 1) * K + j] + tr_at(i, j, k) + em_at(i, k) + w.lb[i * K + k];
    const double z = logsumexp(w.tmp.data(), K * K);
    if (z == kNegInf) continue;
    S* x = out.edge_at(c, b, pos[i]);
    for (int64_t q = 0; q < K * K; ++q) x[q] += static_cast<S>(std::exp(w.tmp[q] - z));
  }
}

// Scaled forward-backward of one sequence with per-edge transitions, vectorised over tags; returns
// false (outputs partly written) when a normaliser left the range or the mass the scaled arithmetic
// may have lost is above tol (see scaled_block), and the caller reruns it in log space. Outputs must
// be zeroed.
template <typename S>
bool scaled_one(const Chain<S>& c, int64_t b, const Shared<S>& sh, const int64_t* pos, int64_t n,
                Work<S>& w, const Out<S>& out) {
  const int64_t K = c.K;
  const bool marg = out.node != nullptr;
  const S lo = static_cast<S>(2.0 * Num<S>::min);
  w.sA.assign(n * K, S(0));
  w.sE.resize(n * K);
  w.sw.resize(K);
  w.sP.resize(K * K);
  w.sF.resize(n);
  // Log Z only: whether the forward may have lost mass (then the backward pass bounds it).
  bool risky = sh.floored;
  S minA = S(1);  // the least nonzero entry of the normalised state
  Flush<S> fe, fp;
  Flush<S>* const pe = marg ? nullptr : &fe;
  Flush<S>* const pp = marg ? nullptr : &fp;
  auto normalise_step = [&](S* v, int64_t i) -> double {  // log of the normaliser, NaN: out of range
    S s = 0;
#pragma omp simd reduction(+ : s)
    for (int64_t k = 0; k < K; ++k) s += v[k];
    if (!(static_cast<double>(s) > Num<S>::tiny)) return std::numeric_limits<double>::quiet_NaN();
    const S inv = S(1) / s;
    if (!marg) {
      S mn = S(1);
#pragma omp simd reduction(min : mn)
      for (int64_t k = 0; k < K; ++k) mn = std::min(mn, v[k] > S(0) ? v[k] : S(1));
      minA = mn * inv;
      risky |= minA < lo;
    }
#pragma omp simd
    for (int64_t k = 0; k < K; ++k) v[k] *= inv;
    w.sF[i] = static_cast<double>(inv);
    return std::log(static_cast<double>(s));
  };
  // ---- forward
  double log_scale = exp_shifted(c.emission(b, pos[0]), K, w.sE.data(), pe) + sh.smax;
#pragma omp simd
  for (int64_t k = 0; k < K; ++k) w.sA[k] = w.sE[k] * sh.start[k];
  if (!marg) risky |= fe.floored || fe.minnz * sh.minStart < lo;
  double ls = normalise_step(w.sA.data(), 0);
  if (std::isnan(ls)) return false;
  log_scale += ls;
  for (int64_t i = 1; i < n; ++i) {
    if (!marg) fe = fp = Flush<S>{};
    const double pmax = exp_shifted(c.edge(b, pos[i]), K * K, w.sP.data(), pp);
    const S* prev = w.sA.data() + (i - 1) * K;
    S* cur = w.sA.data() + i * K;
    for (int64_t j = 0; j < K; ++j) {
      const S a = prev[j];
      const S* row = w.sP.data() + j * K;
#pragma omp simd
      for (int64_t k = 0; k < K; ++k) cur[k] += a * row[k];
    }
    S* Ei = w.sE.data() + i * K;  // exp(em - max), kept for the backward pass
    const double emax = exp_shifted(c.emission(b, pos[i]), K, Ei, pe);
#pragma omp simd
    for (int64_t k = 0; k < K; ++k) cur[k] *= Ei[k];
    if (!marg) risky |= fe.floored || fp.floored || (minA * fp.minnz) * fe.minnz < lo;
    ls = normalise_step(cur, i);
    if (std::isnan(ls)) return false;
    log_scale += ls + pmax + emax;
  }
  {
    const S* lastA = w.sA.data() + (n - 1) * K;
    double t = 0;
    for (int64_t k = 0; k < K; ++k) t += static_cast<double>(lastA[k]) * sh.end[k];
    if (!(t > 0)) return false;
    const double lz = log_scale + std::log(t) + sh.emax;
    if (!std::isfinite(lz)) return false;
    out.set_logz(b, lz);
  }
  if (!marg && !risky) return true;  // nothing was lost: log Z is exact
  // ---- backward, with the marginals read off as we go, and the bound on the lost mass
  const double C = static_cast<double>(loss_bound<S>(K));
  double err = 0.0, binv = 1.0;
  w.sbeta.assign(sh.end_norm.begin(), sh.end_norm.end());
  w.sprev.resize(K);
  w.prod.resize(K);
  for (int64_t i = n - 1; i >= 0; --i) {
    const S* a = w.sA.data() + i * K;
    double s = 0.0;
    for (int64_t k = 0; k < K; ++k) {
      w.prod[k] = static_cast<double>(a[k]) * static_cast<double>(w.sbeta[k]);
      s += w.prod[k];
    }
    if (!(s > Num<S>::tiny)) return false;  // alpha and beta (nearly) disjoint: use log space
    err += C * (w.sF[i] + binv) / s;
    if (marg) {
      S* g = out.node + (b * c.T + pos[i]) * K;
      for (int64_t k = 0; k < K; ++k) g[k] = static_cast<S>(w.prod[k] / s);
      if (i == n - 1 && out.last)
        for (int64_t k = 0; k < K; ++k) out.last[b * K + k] = g[k];
      if (i == 0 && out.first)
        for (int64_t k = 0; k < K; ++k) out.first[b * K + k] = g[k];
    }
    if (i == 0) break;
    exp_shifted(c.edge(b, pos[i]), K * K, w.sP.data());
    const S* Pm = w.sP.data();
    const S* Ei = w.sE.data() + i * K;
#pragma omp simd
    for (int64_t k = 0; k < K; ++k) w.sw[k] = Ei[k] * w.sbeta[k];
    for (int64_t j = 0; j < K; ++j) {
      const S* row = Pm + j * K;
      S acc = 0;
#pragma omp simd reduction(+ : acc)
      for (int64_t k = 0; k < K; ++k) acc += row[k] * w.sw[k];
      w.sprev[j] = acc;
    }
    if (out.edge) {
      const S* ap = w.sA.data() + (i - 1) * K;
      double tot = 0.0;
      for (int64_t j = 0; j < K; ++j) tot += static_cast<double>(ap[j]) * w.sprev[j];
      if (!(tot > Num<S>::tiny)) return false;
      S* x = out.edge_at(c, b, pos[i]);
      const S inv = static_cast<S>(1.0 / tot);
      for (int64_t j = 0; j < K; ++j) {
        const S aj = ap[j] * inv;
        const S* row = Pm + j * K;
        S* xr = x + j * K;
#pragma omp simd
        for (int64_t k = 0; k < K; ++k) xr[k] += aj * row[k] * w.sw[k];
      }
    }
    const double s2 = normalise(w.sprev.data(), K);
    if (!(s2 > 0)) return false;
    binv = static_cast<double>(S(1) / static_cast<S>(s2));
    std::swap(w.sbeta, w.sprev);
  }
  return err <= Num<S>::tol;
}

// ----------------------------------------------------------------- the K x K step of a block

// out[k] = sum_j x[j] * M[j * K + k] (sum-product) or max_j x[j] + M[j * K + k] (max-product), for
// K vectors x. With K known at compile time (KC > 0; instantiated for K <= kMaxFixedK) the K
// accumulators live in registers; otherwise they are updated in memory.
constexpr int kMaxFixedK = 20;

struct SumProduct {
  template <typename V>
  static V identity() { return V{}; }
  template <typename V, typename S>
  static V first(V x, S m) { return x * m; }
  template <typename V, typename S>
  static V step(V acc, V x, S m) { return acc + x * m; }
};
struct MaxPlus {
  template <typename V>
  static V identity() { return V{} - std::numeric_limits<decltype(V{}[0] + 0)>::infinity(); }
  template <typename V, typename S>
  static V first(V x, S m) { return x + m; }
  template <typename V, typename S>
  static V step(V acc, V x, S m) {
    const V cand = x + m;
    return cand > acc ? cand : acc;  // strict: the first (lowest) j wins ties
  }
};

template <typename Op, int KC, typename V, typename S>
inline void step_fixed(const V* x, const S* M, V* out) {
  V acc[KC];
  for (int k = 0; k < KC; ++k) acc[k] = Op::first(x[0], M[k]);
  for (int j = 1; j < KC; ++j) {
    const V a = x[j];
    const S* row = M + j * KC;
    for (int k = 0; k < KC; ++k) acc[k] = Op::step(acc[k], a, row[k]);
  }
  for (int k = 0; k < KC; ++k) out[k] = acc[k];
}

template <typename Op, typename V, typename S>
inline void step_any(const V* __restrict x, const S* __restrict M, V* __restrict out, int64_t K) {
  for (int64_t k = 0; k < K; ++k) out[k] = Op::template identity<V>();
  for (int64_t j = 0; j < K; ++j) {
    const V a = x[j];
    const S* row = M + j * K;
    for (int64_t k = 0; k < K; ++k) out[k] = Op::step(out[k], a, row[k]);
  }
}

template <typename Op, typename V, typename S, int... Ks>
inline void step_dispatch(const V* x, const S* M, V* out, int64_t K,
                          std::integer_sequence<int, Ks...>) {
  bool done = false;
  ((K == Ks + 1 ? (step_fixed<Op, Ks + 1>(x, M, out), done = true) : false), ...);
  if (!done) step_any<Op>(x, M, out, K);
}

// `out` must not alias `x`.
template <typename Op, typename V, typename S>
inline void chain_step(const V* x, const S* M, V* out, int64_t K) {
  step_dispatch<Op>(x, M, out, K, std::make_integer_sequence<int, kMaxFixedK>{});
}

// The same steps with a matrix of vectors (per-edge transitions: each lane its own K x K factors).
// out[k] = sum_j x[j] * M[j * K + k]
template <typename V>
inline void lane_step(const V* __restrict x, const V* __restrict M, V* __restrict out, int64_t K) {
  for (int64_t k = 0; k < K; ++k) out[k] = x[0] * M[k];
  for (int64_t j = 1; j < K; ++j) {
    const V a = x[j];
    const V* row = M + j * K;
    for (int64_t k = 0; k < K; ++k) out[k] += a * row[k];
  }
}

// out[j] = sum_k M[j * K + k] * x[k]
template <typename V>
inline void lane_step_back(const V* __restrict x, const V* __restrict M, V* __restrict out, int64_t K) {
  for (int64_t j = 0; j < K; ++j) {
    const V* row = M + j * K;
    V acc = row[0] * x[0];
    for (int64_t k = 1; k < K; ++k) acc += row[k] * x[k];
    out[j] = acc;
  }
}

// out[k] = max_j x[j] + M[j * K + k]; strict: the lowest j wins ties.
template <typename V>
inline void lane_max_step(const V* __restrict x, const V* __restrict M, V* __restrict out, int64_t K) {
  for (int64_t k = 0; k < K; ++k) out[k] = x[0] + M[k];
  for (int64_t j = 1; j < K; ++j) {
    const V a = x[j];
    const V* row = M + j * K;
    for (int64_t k = 0; k < K; ++k) {
      const V cand = a + row[k];
      out[k] = cand > out[k] ? cand : out[k];
    }
  }
}

// out[j] = max_k M[j * K + k] + x[k]; strict: the lowest k wins ties.
template <typename V>
inline void lane_max_step_back(const V* __restrict x, const V* __restrict M, V* __restrict out, int64_t K) {
  for (int64_t j = 0; j < K; ++j) {
    const V* row = M + j * K;
    V m = row[0] + x[0];
    for (int64_t k = 1; k < K; ++k) {
      const V cand = row[k] + x[k];
      m = cand > m ? cand : m;
    }
    out[j] = m;
  }
}

// ------------------------------------------------------------------------ blocks of W sequences

// W sequences side by side, one per lane; lanes past the batch are empty (n = 0).
template <typename S>
struct Lanes {
  static constexpr int W = Simd<S>::W;
  int64_t b[W];
  const int64_t* pos[W];
  int64_t n[W];
  int64_t nmax;
  typename Simd<S>::I nv;  // n as a vector

  Lanes(const Rows& rows, int64_t block) : nmax(0), nv{} {
    for (int l = 0; l < W; ++l) {
      const int64_t r = block * W + l;
      const bool real = r < static_cast<int64_t>(rows.order.size());
      b[l] = real ? rows.order[r] : -1;
      pos[l] = real ? rows.of(b[l]) : nullptr;
      n[l] = real ? rows.length(b[l]) : 0;
      nv[l] = static_cast<typename std::remove_reference<decltype(nv[0])>::type>(n[l]);
      nmax = std::max(nmax, n[l]);
    }
  }
  typename Simd<S>::I active(int64_t i) const { return nv > static_cast<decltype(nv[0] + 0)>(i); }
};

// E[i * K + k][l] = emission of lane l's i-th unmasked position, tag k; 0 past its end.
template <typename S>
void gather(const Chain<S>& c, const Lanes<S>& L, std::vector<typename Simd<S>::V>& E) {
  using V = typename Simd<S>::V;
  const int64_t K = c.K;
  E.assign(L.nmax * K, V{});
  for (int l = 0; l < Simd<S>::W; ++l)
    for (int64_t i = 0; i < L.n[l]; ++i) {
      const S* src = c.emission(L.b[l], L.pos[l][i]);
      V* dst = E.data() + i * K;
      for (int64_t k = 0; k < K; ++k) dst[k][l] = src[k];
    }
}

// Per-edge transitions: M[q][l] = the q-th score of the edge entering lane l's i-th unmasked position
// (i >= 1), 0 for lanes that end before it.
template <typename S>
void gather_edges(const Chain<S>& c, const Lanes<S>& L, int64_t i, std::vector<typename Simd<S>::V>& M) {
  using V = typename Simd<S>::V;
  const int64_t KK = c.K * c.K;
  M.assign(KK, V{});
  for (int l = 0; l < Simd<S>::W; ++l) {
    if (L.n[l] <= i) continue;
    const S* src = c.edge(L.b[l], L.pos[l][i]);
    for (int64_t q = 0; q < KK; ++q) M[q][l] = src[q];
  }
}

// Scaled forward-backward of a block with shared or per-edge transitions. fail[l] is set for every lane whose
// normalisers left the range, or whose lost mass may be above tol (its outputs are then to be
// recomputed in log space).
//
// Lost mass. Scaled arithmetic drops what exp flushes (a factor below exp(floor) times its max) and
// the denormal products it flushes; such a term may be negligible where it is dropped and yet carry
// most of Z further on (a path through a flushed transition that the next emissions favour). Mass lost
// by forward step i, l_i <= loss_bound(K) = C in units of the normalised state alpha_i (sum 1) times
// the step's normaliser, changes Z by l_i . beta_i / (alpha_i . beta_i) <= C * F_i / s_i relative,
// where F_i = 1 / (step i's normaliser) and s_i = alpha_i . beta_i with beta_i normalised to sum 1
// (the node normaliser of the backward pass). The backward pass loses in the same way, C * G_i / s_i
// with G_i = 1 / (its normaliser into position i) (1 at the last position). A lane whose sum of these
// is above tol falls back, so every lane that stays has log Z, and marginals, exact to ~tol beyond the
// rounding. With log Z only the backward pass runs only for lanes whose forward may have lost
// anything (a finite score flushed by exp, or a product of the least nonzero factors below 2 min).
template <typename S>
void scaled_block(const Chain<S>& c, const Lanes<S>& L, const Shared<S>& sh, Work<S>& w,
                  const Out<S>& out, bool* fail) {
  using V = typename Simd<S>::V;
  using I = typename Simd<S>::I;
  constexpr int W = Simd<S>::W;
  const int64_t K = c.K, T = c.T, N = L.nmax;
  const bool marg = out.node != nullptr;
  const S tiny = static_cast<S>(Num<S>::tiny);
  const S lo = static_cast<S>(2.0 * Num<S>::min);
  const S floor = static_cast<S>(Num<S>::floor);
  const V one = V{} + S(1);
  const V neg_inf = V{} - std::numeric_limits<S>::infinity();
  const S* P = sh.P.data();
  const S* PT = sh.PT.data();
  gather(c, L, w.E);
  w.A.resize(N * K);
  w.F.resize(N);
  double lsc[W], prod[W];
  for (int l = 0; l < W; ++l) {
    lsc[l] = sh.smax;
    prod[l] = 1.0;
    fail[l] = false;
  }
  // Log Z only: the lanes whose forward may have lost mass, and the least nonzero entry of each lane's
  // normalised state.
  const bool pe = c.per_position;
  // Per-edge: the edge's factors exp(transitions - max) lane by lane in w.M; returns the max (0 for a
  // lane whose scores are all -inf, or that has ended). With log Z only every lane is checked by the
  // backward pass (no flush is tracked for per-edge factors).
  auto edge_factors = [&](int64_t i) {
    gather_edges(c, L, i, w.M);
    V m = w.M[0];
    for (int64_t q = 1; q < K * K; ++q) m = w.M[q] > m ? w.M[q] : m;
    m = m == neg_inf ? V{} : m;
    for (int64_t q = 0; q < K * K; ++q) w.M[q] = vexp(w.M[q] - m);
    return m;
  };
  I risky = (sh.floored || pe) ? ~I{} : I{};
  V minA = one;
  // Normalise v (K vectors) lane by lane; active lanes record the normaliser (plus `extra`, the log of
  // the factors taken out beforehand) and fail below TINY. F[i] takes the inverse normalisers.
  auto normalise_lanes = [&](V* v, I active, double extra, int64_t i) {
    V s = V{};
    for (int64_t k = 0; k < K; ++k) s += v[k];
    const I ok = s > tiny;
    const V safe = ok ? s : one;
    const V inv = one / safe;
    if (!marg) {
      V mn = one;
      for (int64_t k = 0; k < K; ++k) {
        const V x = v[k] > S(0) ? v[k] : one;
        mn = x < mn ? x : mn;
      }
      minA = mn * inv;
      risky |= active & (minA < lo);
    }
    for (int64_t k = 0; k < K; ++k) v[k] *= inv;
    w.F[i] = inv;
    for (int l = 0; l < W; ++l)
      if (active[l]) {
        fail[l] |= !ok[l];
        prod[l] *= static_cast<double>(safe[l]);
        lsc[l] += extra;
      }
  };
  // exp(E_i - max) in place, the max added to the log scale. A lane whose emissions are all -inf here
  // is shifted by 0 instead (its row is then all 0, its normaliser fails: it falls back to log space).
  // Log Z only: returns the least nonzero exp per lane, and marks the lanes where exp flushed a finite
  // score as risky.
  auto exp_row = [&](int64_t i, I active) {
    V* e = w.E.data() + i * K;
    V m = e[0];
    for (int64_t k = 1; k < K; ++k) m = e[k] > m ? e[k] : m;
    m = m == neg_inf ? V{} : m;
    V mn = one;
    if (marg) {
      for (int64_t k = 0; k < K; ++k) e[k] = vexp(e[k] - m);
    } else {
      I floored = I{};
      for (int64_t k = 0; k < K; ++k) {
        const V x = e[k] - m;
        floored |= (x < floor) & (x > neg_inf);
        e[k] = vexp(x);
        const V y = e[k] > S(0) ? e[k] : one;
        mn = y < mn ? y : mn;
      }
      risky |= active & floored;
    }
    for (int l = 0; l < W; ++l) lsc[l] += static_cast<double>(m[l]);  // 0 on padding
    return mn;
  };
  // ---- forward
  {
    const I active = L.active(0);
    const V mnE = exp_row(0, active);
    for (int64_t k = 0; k < K; ++k) w.A[k] = w.E[k] * sh.start[k];
    if (!marg) risky |= active & (mnE * sh.minStart < lo);
    normalise_lanes(w.A.data(), active, 0.0, 0);
  }
  for (int64_t i = 1; i < N; ++i) {
    const I active = L.active(i);
    const V mnE = exp_row(i, active);
    const V* prev = w.A.data() + (i - 1) * K;
    V* cur = w.A.data() + i * K;
    V pm = V{} + static_cast<S>(0);
    if (pe) {
      pm = edge_factors(i);
      lane_step(prev, w.M.data(), cur, K);
    } else {
      chain_step<SumProduct>(prev, P, cur, K);
    }
    const V* e = w.E.data() + i * K;
    for (int64_t k = 0; k < K; ++k) cur[k] *= e[k];
    if (!marg && !pe) risky |= active & ((minA * sh.minP) * mnE < lo);
    normalise_lanes(cur, active, pe ? 0.0 : sh.pmax, i);
    if (pe)
      for (int l = 0; l < W; ++l)
        if (active[l]) lsc[l] += static_cast<double>(pm[l]);
    if ((i & 7) == 0)  // keep the running products of normalisers (each in [TINY, K]) in range
      for (int l = 0; l < W; ++l) {
        lsc[l] += std::log(prod[l]);
        prod[l] = 1.0;
      }
  }
  bool check = marg;  // whether any lane needs the backward pass
  for (int l = 0; l < W; ++l) {
    if (L.n[l] == 0 || fail[l]) continue;
    const V* last = w.A.data() + (L.n[l] - 1) * K;
    double t = 0;
    for (int64_t k = 0; k < K; ++k) t += static_cast<double>(last[k][l]) * sh.end[k];
    const double lz = lsc[l] + std::log(prod[l]) + std::log(t) + sh.emax;
    if (!(t > 0) || !std::isfinite(lz)) {
      fail[l] = true;
      continue;
    }
    out.set_logz(L.b[l], lz);
    check |= risky[l] != 0;
  }
  if (!check) return;  // log Z only, and nothing was lost: exact
  // ---- backward, with the marginals read off as we go, and the bound on the lost mass
  const I watch = marg ? ~I{} : risky;  // the lanes checked
  if (marg)
    for (int l = 0; l < W; ++l) {  // masked positions get 0; first/last and edges are written below
      if (L.n[l] == 0) continue;
      const uint8_t* m = c.mask + L.b[l] * T;
      for (int64_t t = 0; t < T; ++t)
        if (!m[t]) std::fill(out.node + (L.b[l] * T + t) * K, out.node + (L.b[l] * T + t + 1) * K, S(0));
    }
  const V C = V{} + loss_bound<S>(K);
  V err = V{}, binv = one;
  w.beta.assign(K, one);
  w.nb.resize(K);
  w.wv.resize(K);
  if (out.edge && !out.per_edge) w.acc.assign(K * K, V{});
  for (int64_t i = N - 1; i >= 0; --i) {
    for (int l = 0; l < W; ++l)
      if (L.n[l] - 1 == i) {
        for (int64_t k = 0; k < K; ++k) w.beta[k][l] = sh.end_norm[k];
        binv[l] = S(1);
      }
    const I active = L.active(i) & watch;
    const V* a = w.A.data() + i * K;
    V s = V{};
    for (int64_t k = 0; k < K; ++k) {
      w.wv[k] = a[k] * w.beta[k];
      s += w.wv[k];
    }
    const I ok = s > tiny;
    const V inv = one / (ok ? s : one);
    if (marg) {
      // A[i] is not needed any more: it takes the node marginals, scattered to the output at the end
      // (reading lanes back right after the vector stores would stall store-to-load forwarding).
      V* g = w.A.data() + i * K;
      for (int64_t k = 0; k < K; ++k) g[k] = w.wv[k] * inv;
    }
    for (int l = 0; l < W; ++l)
      if (active[l]) fail[l] |= !ok[l];
    const V term = C * (w.F[i] + binv) * inv;
    err = active ? err + term : err;
    if (i == 0) break;
    const V* e = w.E.data() + i * K;
    for (int64_t k = 0; k < K; ++k) w.wv[k] = e[k] * w.beta[k];
    if (pe) {
      edge_factors(i);  // recomputed: storing every edge's factors would take T K^2 vectors
      lane_step_back(w.wv.data(), w.M.data(), w.nb.data(), K);
    } else {
      chain_step<SumProduct>(w.wv.data(), PT, w.nb.data(), K);
    }
    if (out.edge) {
      const V* ap = w.A.data() + (i - 1) * K;
      V tot = V{};
      for (int64_t j = 0; j < K; ++j) tot += ap[j] * w.nb[j];
      const I okt = tot > tiny;
      for (int l = 0; l < W; ++l)
        if (active[l]) fail[l] |= !okt[l];
      const V invt = (okt & active) ? one / (okt ? tot : one) : V{};
      if (out.per_edge) {
        // Each edge's a_{i-1}(j) P(j, k) w_i(k) / tot_i, lane by lane (a lane that fails later is
        // rewritten by the fallback).
        for (int l = 0; l < W; ++l) {
          if (!active[l]) continue;
          S* x = out.edge_at(c, L.b[l], L.pos[l][i]);
          for (int64_t j = 0; j < K; ++j) {
            const S aj = ap[j][l] * invt[l];
            S* xr = x + j * K;
            if (pe) {
              const V* row = w.M.data() + j * K;
              for (int64_t k = 0; k < K; ++k) xr[k] = aj * row[k][l] * w.wv[k][l];
            } else {
              const S* row = P + j * K;
              for (int64_t k = 0; k < K; ++k) xr[k] = aj * row[k] * w.wv[k][l];
            }
          }
        }
      } else {
        // sum_i a_{i-1}(j) P(j, k) w_i(k) / tot_i: P(j, k) is factored out, applied at the end.
        for (int64_t j = 0; j < K; ++j) {
          const V aj = ap[j] * invt;
          V* acc = w.acc.data() + j * K;
          for (int64_t k = 0; k < K; ++k) acc[k] += aj * w.wv[k];
        }
      }
    }
    V s2 = V{};
    for (int64_t j = 0; j < K; ++j) s2 += w.nb[j];
    const I ok2 = s2 > tiny;
    for (int l = 0; l < W; ++l)
      if (active[l]) fail[l] |= !ok2[l];
    const V inv2 = one / (ok2 ? s2 : one);
    for (int64_t j = 0; j < K; ++j) w.nb[j] *= inv2;
    binv = inv2;
    std::swap(w.beta, w.nb);
  }
  for (int l = 0; l < W; ++l)
    if (L.n[l] > 0 && watch[l] && !(err[l] <= static_cast<S>(Num<S>::tol))) fail[l] = true;
  if (!marg) return;
  for (int l = 0; l < W; ++l) {
    if (L.n[l] == 0 || fail[l]) continue;
    const int64_t b = L.b[l];
    for (int64_t i = 0; i < L.n[l]; ++i) {
      const V* g = w.A.data() + i * K;
      S* dst = out.node + (b * T + L.pos[l][i]) * K;
      for (int64_t k = 0; k < K; ++k) dst[k] = g[k][l];
    }
    if (out.first) std::copy(out.node + (b * T + L.pos[l][0]) * K, out.node + (b * T + L.pos[l][0] + 1) * K, out.first + b * K);
    if (out.last) {
      const S* g = out.node + (b * T + L.pos[l][L.n[l] - 1]) * K;
      std::copy(g, g + K, out.last + b * K);
    }
    if (out.edge && !out.per_edge) {
      S* x = out.edge + b * K * K;
      for (int64_t q = 0; q < K * K; ++q) x[q] = w.acc[q][l] * P[q];
    }
  }
}

// The max-plus forward pass of a block over all lanes (shared or per-edge transitions): w.A[i * K + k]
// is the best score of a prefix ending in tag k at each lane's i-th unmasked position.
template <typename S>
void max_forward_block(const Chain<S>& c, const Lanes<S>& L, Work<S>& w) {
  using V = typename Simd<S>::V;
  const int64_t K = c.K, N = L.nmax;
  gather(c, L, w.E);
  w.A.resize(N * K);
  for (int64_t k = 0; k < K; ++k) w.A[k] = w.E[k] + c.start[k];
  for (int64_t i = 1; i < N; ++i) {
    const V* prev = w.A.data() + (i - 1) * K;
    V* cur = w.A.data() + i * K;
    if (c.per_position) {
      gather_edges(c, L, i, w.M);
      lane_max_step(prev, w.M.data(), cur, K);
    } else {
      chain_step<MaxPlus>(prev, c.trans, cur, K);
    }
    const V* e = w.E.data() + i * K;
    for (int64_t k = 0; k < K; ++k) cur[k] += e[k];
  }
}

// Viterbi of a block: the max-plus forward pass, then each lane's back-trace, recomputing the arg-max
// along its best path. A lane whose best final score is -inf (no valid path) gets score -inf and keeps
// its all -1 path.
template <typename S>
void viterbi_block(const Chain<S>& c, const Lanes<S>& L, Work<S>& w, S* scores, int64_t* paths) {
  using V = typename Simd<S>::V;
  constexpr int W = Simd<S>::W;
  const int64_t K = c.K, T = c.T;
  max_forward_block(c, L, w);
  for (int l = 0; l < W; ++l) {
    const int64_t n = L.n[l], b = L.b[l];
    if (n == 0) continue;
    int64_t* path = paths + b * T;
    const V* d = w.A.data() + (n - 1) * K;
    int64_t best = 0;
    S best_score = d[0][l] + c.end[0];
    for (int64_t k = 1; k < K; ++k) {
      const S v = d[k][l] + c.end[k];
      if (v > best_score) {
        best_score = v;
        best = k;
      }
    }
    scores[b] = best_score;
    if (best_score == -std::numeric_limits<S>::infinity()) continue;  // no valid path
    path[L.pos[l][n - 1]] = best;
    for (int64_t i = n - 1; i > 0; --i) {
      const V* prev = w.A.data() + (i - 1) * K;
      const S* into = c.edge(b, L.pos[l][i]);  // the same additions as the forward pass
      int64_t arg = 0;
      S m = prev[0][l] + into[best];
      for (int64_t j = 1; j < K; ++j) {
        const S cand = prev[j][l] + into[j * K + best];
        if (cand > m) {
          m = cand;
          arg = j;
        }
      }
      best = arg;
      path[L.pos[l][i - 1]] = best;
    }
  }
}

// Viterbi of one sequence with per-edge transitions (vectorised over tags, back-pointers stored). No
// valid path: score -inf, the path left all -1.
template <typename S>
void viterbi_one(const Chain<S>& c, int64_t b, const int64_t* pos, int64_t n, Work<S>& w, S* scores,
                 int64_t* paths) {
  const int64_t K = c.K, T = c.T;
  std::vector<S>& delta = w.sbeta;
  std::vector<S>& next = w.sprev;
  delta.resize(K);
  next.resize(K);
  std::vector<int32_t> back(n * K, 0);
  const S* e0 = c.emission(b, pos[0]);
  for (int64_t k = 0; k < K; ++k) delta[k] = c.start[k] + e0[k];
  for (int64_t i = 1; i < n; ++i) {
    const S* tr = c.edge(b, pos[i]);
    int32_t* bp = back.data() + i * K;
    for (int64_t k = 0; k < K; ++k) next[k] = -std::numeric_limits<S>::infinity();
    // Branch-free (vectorised with blends); the strict '>' over ascending j keeps the lowest previous
    // tag on ties, as torch.max does.
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
  if (best_score == -std::numeric_limits<S>::infinity()) return;  // no valid path
  for (int64_t i = n - 1; i >= 0; --i) {
    paths[b * T + pos[i]] = best;
    if (i > 0) best = back[i * K + best];
  }
}

// ------------------------------------------------------------------------------------ drivers

// Whether per-edge transitions run in blocks of W lanes (each lane its own K x K factors, gathered
// into a matrix of vectors every step) rather than one sequence at a time vectorised over tags. The
// gather transposes K^2 scores per lane and step. By measurement (one thread, idle) the sum-product
// family gains from the lanes at every K tried (marginals at (32, 64, K): 5x at K = 17, 2.5-3.8x at
// K = 64 and 100), while max-product, whose step is only adds and compares, loses above K = 32
// (Viterbi at (32, 50, 64): 4.7-6.3 ms in lanes, 3.4 one at a time). $CRFHEAD_LANES_PER_EDGE_MAX_K
// sets one bound for both (tests: both paths).
inline bool lanes_per_edge(int64_t K, bool max_plus) {
  static const int64_t forced = [] {
    const char* env = std::getenv("CRFHEAD_LANES_PER_EDGE_MAX_K");
    return env ? std::atoll(env) : int64_t(-1);
  }();
  if (forced >= 0) return K <= forced;
  return !max_plus || K <= kLanesPerEdgeMaxPlusMaxK;
}

// Which k-best runs: 0 the lazy enumeration (topk_lazy), 1 blocks of W lanes (topk_block), 2 one
// sequence at a time (topk_one, the plainest: the tests' reference). The lanes' merges cost about
// K^2 R per step for W sequences, the lazy one a scalar Viterbi (K^2 per step) plus heaps at the
// nodes its paths reach; by measurement the lanes are faster below K = 16 or R = 16 and the lazy
// one above both (at (16, 200, 50), R = 20: 16 ms against 60 ms). $CRFHEAD_TOPK_PATH ("lazy",
// "lanes" or "one") forces one (tests: all three agree bit for bit).
inline int topk_path(int64_t K, int64_t R) {
  static const int forced = [] {
    const char* env = std::getenv("CRFHEAD_TOPK_PATH");
    if (!env) return -1;
    const std::string v(env);
    return v == "lazy" ? 0 : v == "lanes" ? 1 : v == "one" ? 2 : -1;
  }();
  if (forced >= 0) return forced;
  return K >= kLazyTopkMinK && R >= kLazyTopkMinK ? 0 : 1;
}

// A persistent pool of passive workers whose join never waits for a worker that has not started.
//
// Why not an OpenMP parallel region: its closing barrier waits for every thread of the team, so when
// another process holds the cores and a worker is descheduled, the caller waits a scheduler time slice
// (milliseconds) however small the call. Here a call is a Job of numbered tasks that the caller
// and any worker claim one at a time from a shared counter: the caller starts at once, a worker that
// wakes late finds nothing left and claims nothing, and the caller waits only for tasks that a worker
// has claimed and is running (a block of sequences each). Idle workers sleep on a condition variable
// (no spinning); the caller spins only briefly for a running task before it sleeps too. A helper can
// still be descheduled inside a task it claimed; a join that shows this turns helpers off for a while
// (see run).
//
// The Job lives in a shared_ptr, so a worker waking after the call returned still holds valid counters;
// it reaches the caller's body only through a task it claimed, and an unfinished task keeps the caller
// waiting, so the body (on the caller's stack) is alive whenever it runs. One call uses the pool at a
// time: a concurrent call (another Python thread; ctypes releases the GIL) runs on its own thread. The
// pool is made on first use and again in a forked child (its threads are not copied by fork); it is
// never destroyed (a joinable std::thread at exit would terminate the process). It has at most one
// worker per core besides the caller: more threads than cores only queue for them.
class Pool {
 public:
  struct Job {
    int64_t tasks = 0;
    std::atomic<int64_t> next{0}, done{0};
    void (*loop)(void*, Job&, int64_t) = nullptr;  // runs a claimed task, then claims more
    void* ctx = nullptr;
    std::mutex m;
    std::condition_variable finished;
  };

  static Pool* get() {
    static std::mutex made;
    static Pool* pool = nullptr;
    std::lock_guard<std::mutex> lk(made);
    if (pool == nullptr || pool->pid_ != getpid()) pool = new Pool();  // a forked child's is stale
    return pool;
  }

  // Every task in [0, tasks) done by loop(ctx, job, first), each participant (the caller and up to
  // `helpers` workers) starting from a task it claimed.
  void run(int64_t tasks, int helpers, void (*loop)(void*, Job&, int64_t), void* ctx) {
    std::unique_lock<std::mutex> busy(busy_, std::try_to_lock);
    auto job = std::make_shared<Job>();
    job->tasks = tasks;
    job->loop = loop;
    job->ctx = ctx;
    const int cores = static_cast<int>(std::thread::hardware_concurrency());  // 0: unknown
    if (cores > 0) helpers = std::min(helpers, cores - 1);
    const int64_t start = now_ns();
    if (adaptive.load() && (start < serial_until_.load() || cores_taken(start, helpers, cores)))
      helpers = 0;
    if (busy.owns_lock() && helpers > 0) {
      {
        std::lock_guard<std::mutex> lk(m_);
        try {
          while (static_cast<int>(workers_.size()) < helpers) workers_.emplace_back([this] { serve(); });
        } catch (const std::system_error&) {  // no more threads to be had: fewer helpers
          helpers = static_cast<int>(workers_.size());
        }
        current_ = job;
        ++generation_;
      }
      for (int i = 0; i < helpers; ++i) wake_.notify_one();
    }
    const int64_t first = job->next.fetch_add(1);
    if (first < tasks) loop(ctx, *job, first);
    const int64_t worked = now_ns();
    wait(*job);
    // A join longer than the caller's own share of the work (and than kSlowJoinNs) means a helper was
    // descheduled inside a task: the cores are busy elsewhere, so calls stay on the caller's thread
    // for kBackoffNs (kSlowJoins slow joins per kBackoffNs at worst under sustained load).
    // Two such joins in a row: one alone is as likely a virtual machine's passing steal of a core.
    const int64_t waited = now_ns() - worked;
    if (helpers > 0) {
      const bool slow = waited > kSlowJoinNs && waited > worked - start;
      if (slow && slow_joins_.fetch_add(1) + 1 >= kSlowJoins) {
        serial_until_.store(worked + waited + kBackoffNs);
        slow_joins_.store(0);
      } else if (!slow) {
        slow_joins_.store(0);
      }
    }
  }

  // Called by the loop after each task it finished.
  static void finished(Job& job) {
    if (job.done.fetch_add(1) + 1 == job.tasks) {
      std::lock_guard<std::mutex> lk(job.m);
      job.finished.notify_all();
    }
  }

  static std::atomic<bool> adaptive;  // back off after a slow join (off: always use the helpers)

 private:
  static constexpr int64_t kSlowJoinNs = 100'000, kBackoffNs = 1'000'000'000, kSpinNs = 200'000;
  static constexpr int64_t kLoadNs = 20'000'000;
  static constexpr int kSlowJoins = 2;

  Pool() : pid_(getpid()) {}

  // Whether other processes hold every core, before any join is slow: the runnable threads besides
  // this one and this pool's workers (one may be spinning) number at least the cores, in two reads
  // of the running count of /proc/loadavg ("running/total", the reader included; Linux) in a row, at
  // most one every kLoadNs. Two reads, and every core, because one read often catches a thread that is
  // about to sleep (torch's own OpenMP team spins after its parallel regions). Elsewhere, or where the
  // file cannot be read, the slow-join backoff alone decides.
  bool cores_taken(int64_t now, int helpers, int cores) {
    if (helpers <= 0 || cores <= 0) return false;
    if (now - load_read_ns_.load(std::memory_order_relaxed) > kLoadNs) {
      load_read_ns_.store(now, std::memory_order_relaxed);
      int running = -1, total = 0;
      double one = 0, five = 0, fifteen = 0;
      if (std::FILE* f = std::fopen("/proc/loadavg", "r")) {
        if (std::fscanf(f, "%lf %lf %lf %d/%d", &one, &five, &fifteen, &running, &total) != 5)
          running = -1;
        std::fclose(f);
      }
      int workers;
      {
        std::lock_guard<std::mutex> lk(m_);
        workers = static_cast<int>(workers_.size());
      }
      const bool over = running >= 0 && running - 1 - workers >= cores;
      full_reads_.store(over ? std::min(full_reads_.load() + 1, 2) : 0, std::memory_order_relaxed);
    }
    return full_reads_.load(std::memory_order_relaxed) >= 2;
  }

  static int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }

  void serve() {
    uint64_t seen = 0;
    for (;;) {
      // Awake for kSpinNs after a job before sleeping: the next call of a loop (the backward after
      // the forward, the next batch) then finds the worker running. Woken from sleep, a worker of a
      // virtual machine waits for its halted core, which can take longer than a block of sequences,
      // so that the caller ran every block itself and two threads were no faster than one.
      spin(seen);
      std::shared_ptr<Job> job;
      {
        std::unique_lock<std::mutex> lk(m_);
        wake_.wait(lk, [&] { return generation_.load() != seen; });
        seen = generation_.load();
        job = current_;
      }
      const int64_t first = job->next.fetch_add(1);
      if (first < job->tasks) job->loop(job->ctx, *job, first);
    }
  }

  // Until a new job is posted or kSpinNs have passed (the clock read every 64 pauses).
  void spin(uint64_t seen) const {
    const int64_t until = now_ns() + kSpinNs;
    for (int i = 1;; ++i) {
      if (generation_.load(std::memory_order_acquire) != seen) return;
#if defined(__SSE2__)
      _mm_pause();
#endif
      if (i % 64 == 0 && now_ns() > until) return;
    }
  }

  // Until every task is done: a short spin (a claimed task is often about to finish), then sleep.
  static void wait(Job& job) {
    for (int i = 0; i < 2000; ++i) {
      if (job.done.load() == job.tasks) return;
#if defined(__SSE2__)
      _mm_pause();
#endif
    }
    std::unique_lock<std::mutex> lk(job.m);
    job.finished.wait(lk, [&] { return job.done.load() == job.tasks; });
  }

  const pid_t pid_;
  std::mutex busy_, m_;
  std::condition_variable wake_;
  std::vector<std::thread> workers_;  // never joined: see the class comment
  std::shared_ptr<Job> current_;
  std::atomic<uint64_t> generation_{0};  // changed under m_; read without it while spinning
  std::atomic<int64_t> serial_until_{0};  // steady-clock ns before which calls use no helper
  std::atomic<int> slow_joins_{0};          // slow joins in a row since the last fast one
  std::atomic<int64_t> load_read_ns_{0};    // when /proc/loadavg was last read (cores_taken)
  std::atomic<int> full_reads_{0};          // reads in a row that found every core taken
};

std::atomic<bool> Pool::adaptive{true};

// body(task, work) for every task in [0, tasks), spread over up to `threads` threads (the caller and
// threads - 1 pool workers; with threads <= 1 or a single task, on the caller alone: no pool at all).
template <typename S, typename F>
void run_tasks(int64_t tasks, int threads, F&& body) {
  const int64_t nt = std::max<int64_t>(1, std::min<int64_t>(threads, tasks));
  if (nt == 1) {
    FlushDenormals ftz;
    Work<S> w;
    for (int64_t t = 0; t < tasks; ++t) body(t, w);
    return;
  }
  // What every participant runs, from a task it has claimed: its own scratch space, then tasks
  // until none is left to claim.
  auto loop = [](void* ctx, Pool::Job& job, int64_t task) {
    auto& fn = *static_cast<std::remove_reference_t<F>*>(ctx);
    FlushDenormals ftz;
    Work<S> w;
    for (; task < job.tasks; task = job.next.fetch_add(1)) {
      fn(task, w);
      Pool::finished(job);
    }
  };
  Pool::get()->run(tasks, static_cast<int>(nt - 1), loop, &body);
}

// The flat index b * T + t of the first unmasked tag outside [0, K), or -1.
int64_t first_bad_tag(const uint8_t* mask, const int64_t* tags, int64_t n, int64_t K) {
  for (int64_t q = 0; q < n; ++q)
    if (mask[q] && (tags[q] < 0 || tags[q] >= K)) return q;
  return -1;
}

// Gradients of sum_b grad[b] * f_b from the per-sequence ones (the backward of the fused loss):
// d_em = grad[b] * node (B, T, K); d_tr = sum_b grad[b] * edge[b] (K, K), or grad[b] * edge (B, T-1, K,
// K) per edge; d_start, d_end = sum_b grad[b] * first[b], last[b] (K,). Null inputs are skipped.
template <typename S>
void scale_grads(const S* grad, const S* node, const S* edge, const S* first, const S* last, int64_t B,
                 int64_t T, int64_t K, bool per_position, S* d_em, S* d_tr, S* d_start, S* d_end) {
  const int64_t TK = T * K, KK = K * K, per = per_position ? std::max<int64_t>(T - 1, 0) * KK : KK;
  if (d_tr && !per_position) std::fill(d_tr, d_tr + KK, S(0));
  if (d_start) std::fill(d_start, d_start + K, S(0));
  if (d_end) std::fill(d_end, d_end + K, S(0));
  for (int64_t b = 0; b < B; ++b) {
    const S g = grad[b];
    if (d_em) {
      const S* x = node + b * TK;
      S* y = d_em + b * TK;
#pragma omp simd
      for (int64_t q = 0; q < TK; ++q) y[q] = g * x[q];
    }
    if (d_tr) {
      const S* x = edge + b * per;
      S* y = per_position ? d_tr + b * per : d_tr;
      if (per_position) {
#pragma omp simd
        for (int64_t q = 0; q < per; ++q) y[q] = g * x[q];
      } else {
#pragma omp simd
        for (int64_t q = 0; q < KK; ++q) y[q] += g * x[q];
      }
    }
    if (d_start)
      for (int64_t k = 0; k < K; ++k) d_start[k] += g * first[b * K + k];
    if (d_end)
      for (int64_t k = 0; k < K; ++k) d_end[k] += g * last[b * K + k];
  }
}

template <typename S>
void forward_backward(const Chain<S>& c, Out<S> out, int threads, const int64_t* tags = nullptr,
                      S* gold = nullptr) {
  constexpr int W = Simd<S>::W;
  const Rows rows(c.mask, c.B, c.T);
  out.per_edge = out.edge && (out.per_edge || c.per_position);
  std::vector<double> logz64;
  if (tags && out.logz) {
    logz64.assign(c.B, 0.0);
    out.logz64 = logz64.data();
  }
  if (out.per_edge)  // only the edges into unmasked, linked positions are written
    std::fill(out.edge, out.edge + c.B * std::max<int64_t>(c.T - 1, 0) * c.K * c.K, S(0));
  for (int64_t b = 0; b < c.B; ++b)  // outputs arrive uninitialised; empty rows stay 0
    if (rows.length(b) == 0) {
      clear_one(c, b, out);
      if (gold) gold[b] = S(0);
    }
  const Shared<S> sh(c, !c.per_position);
  auto redo = [&](int64_t b, Work<S>& w) {  // the log-space fallback for sequence b
    clear_one(c, b, out);
    log_space_one(c, b, rows.of(b), rows.length(b), w, out);
  };
  if (c.per_position && !lanes_per_edge(c.K, false)) {
    const int64_t tasks = static_cast<int64_t>(rows.order.size());
    run_tasks<S>(tasks, threads, [&](int64_t task, Work<S>& w) {
      const int64_t b = rows.order[task];
      clear_one(c, b, out);
      if (!scaled_one(c, b, sh, rows.of(b), rows.length(b), w, out)) redo(b, w);
      if (tags) subtract_gold(c, b, rows.of(b), rows.length(b), tags, gold, out);
    });
    return;
  }
  const int64_t blocks = (static_cast<int64_t>(rows.order.size()) + W - 1) / W;
  run_tasks<S>(blocks, threads, [&](int64_t block, Work<S>& w) {
    const Lanes<S> L(rows, block);
    bool fail[W];
    scaled_block(c, L, sh, w, out, fail);
    for (int l = 0; l < W; ++l) {
      if (L.n[l] == 0) continue;
      if (fail[l]) redo(L.b[l], w);
      if (tags) subtract_gold(c, L.b[l], L.pos[l], L.n[l], tags, gold, out);
    }
  });
}

template <typename S>
void viterbi(const Chain<S>& c, S* scores, int64_t* paths, int threads) {
  constexpr int W = Simd<S>::W;
  const Rows rows(c.mask, c.B, c.T);
  std::fill(paths, paths + c.B * c.T, int64_t(-1));
  for (int64_t b = 0; b < c.B; ++b)
    if (rows.length(b) == 0) scores[b] = S(0);
  if (c.per_position && !lanes_per_edge(c.K, true)) {
    run_tasks<S>(static_cast<int64_t>(rows.order.size()), threads, [&](int64_t task, Work<S>& w) {
      const int64_t b = rows.order[task];
      viterbi_one(c, b, rows.of(b), rows.length(b), w, scores, paths);
    });
    return;
  }
  const int64_t blocks = (static_cast<int64_t>(rows.order.size()) + W - 1) / W;
  run_tasks<S>(blocks, threads, [&](int64_t block, Work<S>& w) {
    viterbi_block(c, Lanes<S>(rows, block), w, scores, paths);
  });
}

// ---------------------------------------------------------------- max-marginals, k-best, samples

// Max-sums of sequence b: sums[(b * T + t) * K + k] is the best score of a path through tag k at
// unmasked position t, the max-plus forward state plus the max-plus backward one (the chain
// distributive law in the max semiring), -inf where no valid path passes; best[b] is the best score. Log space, adds and
// compares only, vectorised over tags; shared or per-edge transitions alike.
template <typename S>
void max_sums_one(const Chain<S>& c, int64_t b, const int64_t* pos, int64_t n, Work<S>& w, S* sums,
                  S* best) {
  const int64_t K = c.K, T = c.T;
  const S ninf = -std::numeric_limits<S>::infinity();
  w.sA.resize(n * K);
  w.sw.resize(K);
  w.sprev.resize(K);
  const S* e0 = c.emission(b, pos[0]);
  for (int64_t k = 0; k < K; ++k) w.sA[k] = c.start[k] + e0[k];
  for (int64_t i = 1; i < n; ++i) {
    const S* tr = c.edge(b, pos[i]);
    const S* e = c.emission(b, pos[i]);
    const S* prev = w.sA.data() + (i - 1) * K;
    S* cur = w.sA.data() + i * K;
    for (int64_t k = 0; k < K; ++k) cur[k] = ninf;
    for (int64_t j = 0; j < K; ++j) {
      const S d = prev[j];
      const S* row = tr + j * K;
#pragma omp simd
      for (int64_t k = 0; k < K; ++k) cur[k] = std::max(cur[k], d + row[k]);
    }
    for (int64_t k = 0; k < K; ++k) cur[k] += e[k];
  }
  w.sbeta.assign(c.end, c.end + K);
  S top = ninf;
  for (int64_t k = 0; k < K; ++k) top = std::max(top, w.sA[(n - 1) * K + k] + c.end[k]);
  best[b] = top;
  for (int64_t i = n - 1; i >= 0; --i) {
    const S* a = w.sA.data() + i * K;
    S* o = sums + (b * T + pos[i]) * K;
    for (int64_t k = 0; k < K; ++k) o[k] = a[k] + w.sbeta[k];
    if (i == 0) break;
    const S* tr = c.edge(b, pos[i]);
    const S* e = c.emission(b, pos[i]);
    for (int64_t k = 0; k < K; ++k) w.sw[k] = e[k] + w.sbeta[k];
    for (int64_t j = 0; j < K; ++j) {
      const S* row = tr + j * K;
      S m = ninf;
#pragma omp simd reduction(max : m)
      for (int64_t k = 0; k < K; ++k) m = std::max(m, row[k] + w.sw[k]);
      w.sprev[j] = m;
    }
    std::swap(w.sbeta, w.sprev);
  }
}

// The same for a block of W sequences, one per lane (as viterbi_block; trT is the shared transitions
// transposed, [to][from], unused with per-edge ones).
template <typename S>
void max_sums_block(const Chain<S>& c, const Lanes<S>& L, const S* trT, Work<S>& w, S* sums, S* best) {
  using V = typename Simd<S>::V;
  constexpr int W = Simd<S>::W;
  const int64_t K = c.K, T = c.T, N = L.nmax;
  max_forward_block(c, L, w);
  for (int l = 0; l < W; ++l) {
    if (L.n[l] == 0) continue;
    const V* d = w.A.data() + (L.n[l] - 1) * K;
    S top = -std::numeric_limits<S>::infinity();
    for (int64_t k = 0; k < K; ++k) top = std::max(top, d[k][l] + c.end[k]);
    best[L.b[l]] = top;
  }
  w.beta.assign(K, V{});
  w.nb.resize(K);
  w.wv.resize(K);
  for (int64_t i = N - 1; i >= 0; --i) {
    for (int l = 0; l < W; ++l) {
      if (L.n[l] - 1 == i)
        for (int64_t k = 0; k < K; ++k) w.beta[k][l] = c.end[k];
      if (i >= L.n[l]) continue;
      const V* a = w.A.data() + i * K;
      S* o = sums + (L.b[l] * T + L.pos[l][i]) * K;
      for (int64_t k = 0; k < K; ++k) o[k] = a[k][l] + w.beta[k][l];
    }
    if (i == 0) break;
    const V* e = w.E.data() + i * K;
    for (int64_t k = 0; k < K; ++k) w.wv[k] = e[k] + w.beta[k];
    if (c.per_position) {
      gather_edges(c, L, i, w.M);
      lane_max_step_back(w.wv.data(), w.M.data(), w.nb.data(), K);
    } else {
      chain_step<MaxPlus>(w.wv.data(), trT, w.nb.data(), K);
    }
    std::swap(w.beta, w.nb);
  }
}

template <typename S>
void max_sums(const Chain<S>& c, S* sums, S* best, int threads) {
  constexpr int W = Simd<S>::W;
  const Rows rows(c.mask, c.B, c.T);
  std::fill(sums, sums + c.B * c.T * c.K, -std::numeric_limits<S>::infinity());
  for (int64_t b = 0; b < c.B; ++b)
    if (rows.length(b) == 0) best[b] = S(0);
  if (c.per_position && !lanes_per_edge(c.K, true)) {
    run_tasks<S>(static_cast<int64_t>(rows.order.size()), threads, [&](int64_t task, Work<S>& w) {
      const int64_t b = rows.order[task];
      max_sums_one(c, b, rows.of(b), rows.length(b), w, sums, best);
    });
    return;
  }
  std::vector<S> trT;
  if (!c.per_position) {
    trT.resize(c.K * c.K);
    for (int64_t j = 0; j < c.K; ++j)
      for (int64_t k = 0; k < c.K; ++k) trT[k * c.K + j] = c.trans[j * c.K + k];
  }
  const int64_t blocks = (static_cast<int64_t>(rows.order.size()) + W - 1) / W;
  run_tasks<S>(blocks, threads, [&](int64_t block, Work<S>& w) {
    max_sums_block(c, Lanes<S>(rows, block), trT.data(), w, sums, best);
  });
}

// The R best paths of sequence b, best first: the R-max semiring in log space with back-pointers.
// Each state keeps its R best prefixes in decreasing order, so a step merges K sorted lists (K R
// compares per tag); ties go to the lowest previous tag, then the lower rank, so the order is
// deterministic. Ranks that no path fills score -inf and keep their all -1 path (a path through a
// -inf score is not a path).
template <typename S>
void topk_one(const Chain<S>& c, int64_t b, const int64_t* pos, int64_t n, int64_t R, S* scores,
              int64_t* paths) {
  const int64_t K = c.K, T = c.T;
  const S ninf = -std::numeric_limits<S>::infinity();
  std::vector<S> val(n * K * R, ninf);
  std::vector<int64_t> back(n * K * R, 0), head(K);  // back: previous tag * R + previous rank
  const S* e0 = c.emission(b, pos[0]);
  for (int64_t k = 0; k < K; ++k) val[k * R] = c.start[k] + e0[k];
  // Merge the K lists src[j * R ..] + add(j) into R values (with their j * R + rank) at dst.
  auto merge = [&](const S* src, auto add, S* dst, int64_t* from) {
    std::fill(head.begin(), head.end(), int64_t(0));
    for (int64_t r = 0; r < R; ++r) {
      int64_t bj = -1;
      S bv = ninf;
      for (int64_t j = 0; j < K; ++j) {
        if (head[j] >= R) continue;
        const S v = src[j * R + head[j]] + add(j);
        if (bj < 0 || v > bv) {
          bv = v;
          bj = j;
        }
      }
      dst[r] = bv;
      from[r] = bj * R + head[bj];
      ++head[bj];
    }
  };
  for (int64_t i = 1; i < n; ++i) {
    const S* tr = c.edge(b, pos[i]);
    const S* e = c.emission(b, pos[i]);
    const S* prev = val.data() + (i - 1) * K * R;
    for (int64_t k = 0; k < K; ++k) {
      S* dst = val.data() + (i * K + k) * R;
      merge(prev, [&](int64_t j) { return tr[j * K + k]; }, dst, back.data() + (i * K + k) * R);
      for (int64_t r = 0; r < R; ++r) dst[r] += e[k];
    }
  }
  std::vector<S> fin(R);
  std::vector<int64_t> at(R);
  merge(val.data() + (n - 1) * K * R, [&](int64_t j) { return c.end[j]; }, fin.data(), at.data());
  for (int64_t q = 0; q < R; ++q) {
    scores[b * R + q] = fin[q];
    if (fin[q] == ninf) continue;  // fewer than q + 1 paths
    int64_t* path = paths + (b * R + q) * T;
    int64_t tag = at[q] / R, rank = at[q] % R;
    for (int64_t i = n - 1; i >= 0; --i) {
      path[pos[i]] = tag;
      if (i == 0) break;
      const int64_t f = back[(i * K + tag) * R + rank];
      tag = f / R;
      rank = f % R;
    }
  }
}

// The R best paths of sequence b by lazy enumeration (Huang and Chiang 2005, "Better k-best
// parsing", Algorithm 3, on the trellis): a Viterbi pass gives every node (position i, tag k) its
// best prefix; further prefixes of a node are made only when a path asks for them, from a heap of
// the node's candidates (previous tag j, rank r of j's list), the next rank of j pushed when rank r
// is popped. Only the nodes the R best paths reach past their first prefix build a heap, so the
// cost is the Viterbi pass plus about n R log K, not n K R compares. The candidates are ordered
// by key (the previous prefix plus the transition, before the emission is added, as topk_one
// compares) descending, then previous tag, then rank ascending: topk_one's merge order, so the
// scores and paths are bit for bit topk_one's. A virtual final node (index n K) takes the
// end scores as its transitions and adds no emission. The recursion into predecessors runs on an
// explicit stack (a path of any length).
template <typename S>
struct LazyKBest {
  struct Item {
    S key;
    int32_t j, r;
  };
  // a below b in the heap: b comes first (a larger key, then a lower tag, then a lower rank).
  static bool below(const Item& a, const Item& b) {
    if (a.key != b.key) return a.key < b.key;
    if (a.j != b.j) return a.j > b.j;
    return a.r > b.r;
  }
  std::vector<S> val;          // (n K + 1) R: the prefixes found, best first
  std::vector<int32_t> from;   // (n K + 1) R: previous tag * R + previous rank
  std::vector<int32_t> cnt;    // n K + 1: prefixes found (finite scores only)
  std::vector<uint8_t> state;  // n K + 1: 0 fresh, 1 heap built, 2 exhausted
  std::vector<uint8_t> owed;   // n K + 1: the last popped prefix's successor is not pushed yet
  std::vector<std::vector<Item>> heap;
  std::vector<std::pair<int64_t, int32_t>> stack;  // (node, prefixes wanted)
};

template <typename S>
void topk_lazy(const Chain<S>& c, int64_t b, const int64_t* pos, int64_t n, int64_t R, S* scores,
               int64_t* paths, LazyKBest<S>& z) {
  const int64_t K = c.K, T = c.T, N = n * K + 1, F = n * K;
  const S ninf = -std::numeric_limits<S>::infinity();
  z.val.assign(N * R, ninf);
  z.from.assign(N * R, 0);
  z.cnt.assign(N, 0);
  z.state.assign(N, 0);
  z.owed.assign(N, 0);
  if (static_cast<int64_t>(z.heap.size()) < N) z.heap.resize(N);
  // The Viterbi pass: each node's best prefix (ties to the lowest previous tag).
  const S* e0 = c.emission(b, pos[0]);
  for (int64_t k = 0; k < K; ++k) {
    z.val[k * R] = c.start[k] + e0[k];
    z.state[k] = 2;  // the first position has one prefix per tag
  }
  auto weight = [&](int64_t i, int64_t j, int64_t k) -> S {  // the edge into node (i, k)
    return i < n ? c.edge(b, pos[i])[j * K + k] : c.end[j];
  };
  auto best_into = [&](int64_t i, int64_t k, int64_t v) {
    const S* prev = z.val.data() + (i - 1) * K * R;
    const S* w = i < n ? c.edge(b, pos[i]) + k : c.end;
    const int64_t stride = i < n ? K : 1;
    S bv = ninf;
    int64_t bj = -1;
    for (int64_t j = 0; j < K; ++j) {
      const S x = prev[j * R] + w[j * stride];
      if (bj < 0 || x > bv) {
        bv = x;
        bj = j;
      }
    }
    z.val[v * R] = i < n ? bv + c.emission(b, pos[i])[k] : bv;
    z.from[v * R] = static_cast<int32_t>(bj * R);
  };
  for (int64_t i = 1; i < n; ++i)
    for (int64_t k = 0; k < K; ++k) best_into(i, k, i * K + k);
  best_into(n, 0, F);
  for (int64_t v = 0; v < N; ++v) {
    z.cnt[v] = z.val[v * R] > ninf ? 1 : 0;
    if (z.cnt[v] == 0) z.state[v] = 2;  // no prefix at all: no path through the node
  }
  // Lazy enumeration of the final node's prefixes.
  auto& stack = z.stack;
  stack.clear();
  stack.emplace_back(F, static_cast<int32_t>(R));
  while (!stack.empty()) {
    const int64_t v = stack.back().first;
    const int32_t want = stack.back().second;
    if (z.cnt[v] >= want || z.state[v] == 2) {
      stack.pop_back();
      continue;
    }
    const int64_t i = v == F ? n : v / K, k = v == F ? 0 : v % K;
    auto& h = z.heap[v];
    if (z.state[v] == 0) {  // the rank-0 candidates but the best's own (its successor is owed)
      h.clear();
      const int64_t bj = z.from[v * R] / R;
      for (int64_t j = 0; j < K; ++j) {
        const int64_t p = (i - 1) * K + j;
        if (j == bj || z.cnt[p] == 0) continue;
        const S key = z.val[p * R] + weight(i, j, k);
        if (key > ninf) h.push_back({key, static_cast<int32_t>(j), 0});
      }
      std::make_heap(h.begin(), h.end(), LazyKBest<S>::below);
      z.state[v] = 1;
      z.owed[v] = 1;
    }
    if (z.owed[v]) {  // the successor (j, r + 1) of the last prefix (j, r)
      const int32_t last = z.from[v * R + z.cnt[v] - 1];
      const int64_t j = last / R, r = last % R, p = (i - 1) * K + j;
      if (r + 1 < R && z.cnt[p] < r + 2 && z.state[p] != 2) {
        stack.emplace_back(p, static_cast<int32_t>(r + 2));  // first the predecessor's next prefix
        continue;
      }
      if (r + 1 < R && z.cnt[p] >= r + 2) {
        const S key = z.val[p * R + r + 1] + weight(i, j, k);
        if (key > ninf) {
          h.push_back({key, static_cast<int32_t>(j), static_cast<int32_t>(r + 1)});
          std::push_heap(h.begin(), h.end(), LazyKBest<S>::below);
        }
      }
      z.owed[v] = 0;
    }
    if (h.empty()) {
      z.state[v] = 2;
      continue;
    }
    std::pop_heap(h.begin(), h.end(), LazyKBest<S>::below);
    const auto top = h.back();
    h.pop_back();
    const int64_t q = z.cnt[v]++;
    z.val[v * R + q] = i < n ? top.key + c.emission(b, pos[i])[k] : top.key;
    z.from[v * R + q] = top.j * static_cast<int32_t>(R) + top.r;
    z.owed[v] = 1;
  }
  for (int64_t q = 0; q < R; ++q) {
    if (q >= z.cnt[F]) {  // fewer than q + 1 paths: -inf and the all -1 path
      scores[b * R + q] = ninf;
      continue;
    }
    scores[b * R + q] = z.val[F * R + q];
    int64_t* path = paths + (b * R + q) * T;
    int64_t tag = z.from[F * R + q] / R, rank = z.from[F * R + q] % R;
    for (int64_t i = n - 1; i >= 0; --i) {
      path[pos[i]] = tag;
      if (i == 0) break;
      const int64_t f = z.from[(i * K + tag) * R + rank];
      tag = f / R;
      rank = f % R;
    }
  }
}

// Lane l of c[q[l]] for every lane: the W lanes' entries of a lane-major list of vectors.
template <typename V, typename I>
inline V lane_gather(const V* c, I q) {
  constexpr int W = sizeof(V) / sizeof(c[0][0]);
#if defined(__AVX2__)
  if constexpr (W == 8) {
    const I at = q * 8 + I{0, 1, 2, 3, 4, 5, 6, 7};
    return (V)_mm256_i32gather_ps(reinterpret_cast<const float*>(c), (__m256i)at, 4);
  } else {
    const I at = q * 4 + I{0, 1, 2, 3};
    return (V)_mm256_i64gather_pd(reinterpret_cast<const double*>(c), (__m256i)at, 8);
  }
#else
  V out;
  for (int l = 0; l < W; ++l) out[l] = c[q[l]][l];
  return out;
#endif
}

// The merge of topk_one on W lanes at once, branch-free, for G targets side by side (their chains
// of dependent compares and gathers interleaved; more than three spill the registers): target g's
// K lists c[g KR + j R .. g KR + j R + R) (each sorted in decreasing order lane by lane, values
// with the transition already added) give their R best values, plus e[g] when Add, at
// dst[g R .. g R + R) and their j * R + rank at from[g R .. g R + R). Each rank takes the largest
// head (strict '>' over ascending j: the lowest previous tag wins ties, and within a list the lower
// rank comes first, as in topk_one); then the chosen list of each lane moves its head on by one, its
// new head fetched by one gather over the lanes (at rank r a head is at most r, so no list is read
// past its end before the last rank). h and q (G K vectors each) are scratch: each list's head
// value and its index j * R + rank.
template <bool Add, int G, typename V, typename I>
inline void merge_lanes(const V* __restrict c, V* __restrict h, I* __restrict q, int64_t K, int64_t R,
                        const V* __restrict e, V* __restrict dst, I* __restrict from) {
  using E = decltype(q[0][0] + 0);
  const int64_t KR = K * R;
  for (int g = 0; g < G; ++g)
    for (int64_t j = 0; j < K; ++j) {
      q[g * K + j] = I{} + static_cast<E>(j * R);
      h[g * K + j] = c[g * KR + j * R];
    }
  for (int64_t r = 0; r < R; ++r) {
    // Two running maxima per target, over the even and the odd lists (strict '>' over ascending
    // j), then the odd one taken where it is larger or equal with a lower index (q orders the
    // lists as j does): the pick of one scan over j, in half its chain of dependent compares.
    V bv[G], ov[G];
    I bq[G], oq[G];
    for (int g = 0; g < G; ++g) {
      bv[g] = h[g * K];
      ov[g] = K > 1 ? h[g * K + 1] : h[g * K];
      bq[g] = q[g * K];
      oq[g] = K > 1 ? q[g * K + 1] : q[g * K];
    }
    int64_t j = 2;
    for (; j + 1 < K; j += 2)
      for (int g = 0; g < G; ++g) {
        const V* hg = h + g * K;
        const I* qg = q + g * K;
        const I ge = hg[j] > bv[g];
        bv[g] = ge ? hg[j] : bv[g];
        bq[g] = ge ? qg[j] : bq[g];
        const I go = hg[j + 1] > ov[g];
        ov[g] = go ? hg[j + 1] : ov[g];
        oq[g] = go ? qg[j + 1] : oq[g];
      }
    if (j < K)
      for (int g = 0; g < G; ++g) {
        const I ge = h[g * K + j] > bv[g];
        bv[g] = ge ? h[g * K + j] : bv[g];
        bq[g] = ge ? q[g * K + j] : bq[g];
      }
    for (int g = 0; g < G; ++g) {
      const I take = (ov[g] > bv[g]) | ((ov[g] == bv[g]) & (oq[g] < bq[g]));
      bv[g] = take ? ov[g] : bv[g];
      bq[g] = take ? oq[g] : bq[g];
      dst[g * R + r] = Add ? bv[g] + e[g] : bv[g];
      from[g * R + r] = bq[g];
    }
    if (r + 1 == R) break;
    for (int g = 0; g < G; ++g) {
      const V next = lane_gather(c + g * KR, bq[g] + 1);
      V* hg = h + g * K;
      I* qg = q + g * K;
      for (int64_t j = 0; j < K; ++j) {
        const I m = qg[j] == bq[g];  // the lanes whose pick came from list j
        hg[j] = m ? next : hg[j];
        qg[j] = m ? qg[j] + 1 : qg[j];
      }
    }
  }
}

// The R best paths of a block of W sequences, one per lane: topk_one's recursion with every step's
// merges run by merge_lanes (the same additions in the same order, so the same scores and paths),
// shared or per-edge transitions. A lane that has ended keeps its last state (blended) until the
// block's longest lane is done; the back-trace is per lane.
template <typename S>
void topk_block(const Chain<S>& c, const Lanes<S>& L, int64_t R, Work<S>& w, S* scores,
                int64_t* paths) {
  using V = typename Simd<S>::V;
  using I = typename Simd<S>::I;
  constexpr int W = Simd<S>::W;
  const int64_t K = c.K, T = c.T, N = L.nmax, KR = K * R;
  const V ninf = V{} - std::numeric_limits<S>::infinity();
  gather(c, L, w.E);
  w.kv.assign(2 * KR, ninf);
  w.kc.resize(kMergeTargets * KR);
  w.kq.resize(kMergeTargets * K);
  w.kh.resize(kMergeTargets * K);
  w.kb.resize(N * KR);
  V* prev = w.kv.data();
  V* cur = w.kv.data() + KR;
  V* cand = w.kc.data();
  for (int64_t k = 0; k < K; ++k) prev[k * R] = c.start[k] + w.E[k];
  for (int64_t i = 1; i < N; ++i) {
    const I active = L.active(i);
    if (c.per_position) gather_edges(c, L, i, w.M);
    const V* e = w.E.data() + i * K;
    // The candidate lists of target k at cand + (k % kMergeTargets) K R; the targets merge
    // kMergeTargets at a time, the last ones (K not a multiple) one at a time.
    const int64_t full = K - K % kMergeTargets;
    for (int64_t k = 0; k < K; ++k) {
      V* ck = cand + (k % kMergeTargets) * KR;
      if (c.per_position) {
        for (int64_t j = 0; j < K; ++j) {
          const V t = w.M[j * K + k];
          for (int64_t r = 0; r < R; ++r) ck[j * R + r] = prev[j * R + r] + t;
        }
      } else {
        for (int64_t j = 0; j < K; ++j) {
          const S t = c.trans[j * K + k];
          for (int64_t r = 0; r < R; ++r) ck[j * R + r] = prev[j * R + r] + t;
        }
      }
      if (k >= full) {
        merge_lanes<true, 1>(ck, w.kh.data(), w.kq.data(), K, R, e + k, cur + k * R,
                             w.kb.data() + (i * K + k) * R);
      } else if (k % kMergeTargets == kMergeTargets - 1) {
        const int64_t k0 = k + 1 - kMergeTargets;
        merge_lanes<true, kMergeTargets>(cand, w.kh.data(), w.kq.data(), K, R, e + k0, cur + k0 * R,
                                         w.kb.data() + (i * K + k0) * R);
      }
    }
    for (int64_t q = 0; q < KR; ++q) cur[q] = active ? cur[q] : prev[q];
    std::swap(prev, cur);
  }
  for (int64_t j = 0; j < K; ++j)
    for (int64_t r = 0; r < R; ++r) cand[j * R + r] = prev[j * R + r] + c.end[j];
  V* fin = cur;  // R vectors
  std::vector<I> at(R);
  const V none{};
  merge_lanes<false, 1>(cand, w.kh.data(), w.kq.data(), K, R, &none, fin, at.data());
  // The back-trace: a back-pointer j * R + rank at step i sits at kb[i K R + j * R + rank], so a
  // path follows its pointers with no division (the tag of pointer f is tag_of[f]); the R paths of
  // a lane go side by side, their chains of dependent loads interleaved.
  std::vector<int64_t> tag_of(KR), f(R);
  std::vector<int64_t*> path(R);
  for (int64_t q = 0; q < KR; ++q) tag_of[q] = q / R;
  for (int l = 0; l < W; ++l) {
    const int64_t n = L.n[l], b = L.b[l];
    if (n == 0) continue;
    const int64_t* pos = L.pos[l];
    int64_t live = 0;  // the paths that exist (finite score), best first
    for (int64_t q = 0; q < R; ++q) {
      const S v = fin[q][l];
      scores[b * R + q] = v;
      if (v == -std::numeric_limits<S>::infinity()) continue;  // fewer than q + 1 paths
      path[live] = paths + (b * R + q) * T;
      f[live++] = static_cast<int64_t>(at[q][l]);
    }
    for (int64_t i = n - 1; i >= 0; --i) {
      const I* back = w.kb.data() + i * KR;
      for (int64_t q = 0; q < live; ++q) {
        path[q][pos[i]] = tag_of[f[q]];
        if (i > 0) f[q] = static_cast<int64_t>(back[f[q]][l]);
      }
    }
  }
}

template <typename S>
void topk(const Chain<S>& c, int64_t R, S* scores, int64_t* paths, int threads) {
  constexpr int W = Simd<S>::W;
  const Rows rows(c.mask, c.B, c.T);
  std::fill(paths, paths + c.B * R * c.T, int64_t(-1));
  for (int64_t b = 0; b < c.B; ++b)
    if (rows.length(b) == 0) {  // one path, the empty one, of score 0
      scores[b * R] = S(0);
      std::fill(scores + b * R + 1, scores + (b + 1) * R, -std::numeric_limits<S>::infinity());
    }
  const int path = topk_path(c.K, R);
  if (path == 0) {
    run_tasks<S>(static_cast<int64_t>(rows.order.size()), threads, [&](int64_t task, Work<S>&) {
      thread_local LazyKBest<S> z;
      const int64_t b = rows.order[task];
      topk_lazy(c, b, rows.of(b), rows.length(b), R, scores, paths, z);
      if (z.val.capacity() > (int64_t(1) << 22)) z = LazyKBest<S>{};  // keep no long row's buffers
    });
    return;
  }
  if (path == 2) {
    run_tasks<S>(static_cast<int64_t>(rows.order.size()), threads, [&](int64_t task, Work<S>&) {
      const int64_t b = rows.order[task];
      topk_one(c, b, rows.of(b), rows.length(b), R, scores, paths);
    });
    return;
  }
  const int64_t blocks = (static_cast<int64_t>(rows.order.size()) + W - 1) / W;
  run_tasks<S>(blocks, threads, [&](int64_t block, Work<S>& w) {
    topk_block(c, Lanes<S>(rows, block), R, w, scores, paths);
  });
}

// The tag whose cumulative weight first exceeds u * sum(p) (p >= 0, K entries), or -1 if p is all 0.
template <typename S>
int64_t draw(const S* p, int64_t K, double u) {
  double total = 0.0;
  for (int64_t k = 0; k < K; ++k) total += static_cast<double>(p[k]);
  if (!(total > 0.0)) return -1;
  const double target = u * total;
  double acc = 0.0;
  int64_t last = -1;
  for (int64_t k = 0; k < K; ++k) {
    if (!(p[k] > S(0))) continue;
    acc += static_cast<double>(p[k]);
    last = k;
    if (target < acc) return k;
  }
  return last;  // rounding put the target past the end: the last tag of nonzero weight
}

// Exact samples from the node marginals node (B, T, K) and the per-edge marginals edge (B, T-1, K,
// K) of a forward-backward: the first unmasked tag from its marginal, each next one from the edge
// marginals' row of the tag before, p(z_t | z_t') = edge(z_t', z_t) / node(z_t'). u (S, B, T) holds
// uniforms in [0, 1), one per draw; paths (S, B, T) get -1 at masked positions and for every sample
// of a row with no valid path (all-zero marginals). An edge row that is all 0 is reached only with a
// probability below the float range; the draw then takes the tag's node marginal instead.
template <typename S>
void sample(const S* node, const S* edge, const uint8_t* mask, const double* u, int64_t NS, int64_t B,
            int64_t T, int64_t K, int64_t* paths, int threads) {
  const Rows rows(mask, B, T);
  std::fill(paths, paths + NS * B * T, int64_t(-1));
  run_tasks<S>(static_cast<int64_t>(rows.order.size()), threads, [&](int64_t task, Work<S>&) {
    const int64_t b = rows.order[task], n = rows.length(b);
    const int64_t* pos = rows.of(b);
    for (int64_t s = 0; s < NS; ++s) {
      const double* us = u + (s * B + b) * T;
      int64_t* out = paths + (s * B + b) * T;
      int64_t z = draw(node + (b * T + pos[0]) * K, K, us[pos[0]]);
      if (z < 0) break;  // no valid path: every sample stays -1
      out[pos[0]] = z;
      for (int64_t i = 1; i < n; ++i) {
        const int64_t t = pos[i];
        int64_t next = draw(edge + ((b * (T - 1) + t - 1) * K + z) * K, K, us[t]);
        if (next < 0) next = draw(node + (b * T + t) * K, K, us[t]);
        z = next;
        out[t] = z;
      }
    }
  });
}

template <typename S>
Chain<S> chain(const S* em, const S* trans, const S* start, const S* end, const uint8_t* mask, int64_t B,
               int64_t T, int64_t K, int per_position) {
  return Chain<S>{em, trans, start, end, mask, B, T, K, per_position != 0};
}

// The boundary's finiteness check in one pass (crfhead.checks's contract): NaN and +inf are refused
// at unmasked emissions and anywhere in the transitions, start and end; -inf means forbidden.
// Returns -1 when nothing is refused and every masked emission is finite, -2 when nothing is refused
// but some masked emission is not (the caller then zeroes the padding), else 4 * (flat index) +
// (0 emissions, 1 transitions, 2 start, 3 end) of the first refused value. The first pass is an
// integer max over the bits (it vectorises); the masks are read, and the position searched for,
// only when some value is not finite.
template <typename S>
struct Bits;
template <>
struct Bits<float> {
  typedef uint32_t __attribute__((may_alias)) U;
  static constexpr uint32_t magnitude = 0x7fffffffu, exponent = 0x7f800000u;
};
template <>
struct Bits<double> {
  typedef uint64_t __attribute__((may_alias)) U;
  static constexpr uint64_t magnitude = 0x7fffffffffffffffull, exponent = 0x7ff0000000000000ull;
};

// Whether all n values are finite: the largest magnitude's bits below the all-ones exponent (an
// integer max, which vectorises; a float comparison loop with NaNs in it does not).
template <typename S>
bool all_finite(const S* x, int64_t n) {
  using B = Bits<S>;
  const typename B::U* u = reinterpret_cast<const typename B::U*>(x);
  typename std::remove_cv<typename B::U>::type top = 0;
  for (int64_t i = 0; i < n; ++i) top = std::max<decltype(top)>(top, u[i] & B::magnitude);
  return top < B::exponent;
}

// Whether no value of x[0..n) is NaN or +inf (-inf passes).
template <typename S>
bool all_below_inf(const S* x, int64_t n) {
  constexpr S inf = std::numeric_limits<S>::infinity();
  for (int64_t i = 0; i < n; ++i)
    if (!(x[i] < inf)) return false;
  return true;
}

template <typename S>
int64_t first_non_finite(const Chain<S>& c) {
  constexpr S inf = std::numeric_limits<S>::infinity();
  const int64_t KK = c.per_position ? c.B * std::max<int64_t>(c.T - 1, 0) * c.K * c.K : c.K * c.K;
  const S* parts[3] = {c.trans, c.start, c.end};
  const int64_t sizes[3] = {KK, c.K, c.K};
  if (all_finite(c.em, c.B * c.T * c.K) && all_finite(c.trans, KK) && all_finite(c.start, c.K) &&
      all_finite(c.end, c.K))
    return -1;  // the common case, one vectorised pass
  bool refused = false, padding = false;
  for (int64_t r = 0; r < c.B * c.T; ++r) {
    if (c.mask[r])
      refused |= !all_below_inf(c.em + r * c.K, c.K);
    else
      padding |= !all_finite(c.em + r * c.K, c.K);
  }
  for (int i = 0; i < 3; ++i) refused |= !all_below_inf(parts[i], sizes[i]);
  if (!refused) return padding ? -2 : -1;
  for (int64_t r = 0; r < c.B * c.T; ++r) {
    if (!c.mask[r]) continue;
    for (int64_t k = 0; k < c.K; ++k)
      if (!(c.em[r * c.K + k] < inf)) return 4 * (r * c.K + k);
  }
  for (int i = 0; i < 3; ++i)
    for (int64_t j = 0; j < sizes[i]; ++j)
      if (!(parts[i][j] < inf)) return 4 * j + 1 + i;
  return -2;  // unreachable
}

}  // namespace

extern "C" {

int crfhead_abi_version() { return 8; }

int crfhead_openmp() {
#if defined(_OPENMP)
  return 1;
#else
  return 0;
#endif
}

// Sets the calling thread's OpenMP thread count (the intra-op count of torch's operations on this
// thread: libgomp keeps it per thread once set) and returns the previous one; -1 and nothing set
// without OpenMP. The Python side brackets small torch work with it (a serial section).
int crfhead_torch_threads(int n) {
#if defined(_OPENMP)
  const int previous = omp_get_max_threads();
  omp_set_num_threads(n);
  return previous;
#else
  (void)n;
  return -1;
#endif
}

// Whether the pool turns its helpers off for a while after a join shows a descheduled helper (1, the
// default) or always uses as many threads as asked (0: an explicit thread count).
void crfhead_pool_adaptive(int on) { Pool::adaptive.store(on != 0); }

#define CRFHEAD_DEFINE(SUFFIX, S)                                                                          \
  void crfhead_forward_backward_##SUFFIX(const S* em, const S* trans, const S* start, const S* end,       \
                                         const uint8_t* mask, int64_t B, int64_t T, int64_t K,              \
                                         int per_position, S* logz, S* node, S* edge, S* first, S* last, \
                                         int num_threads) {                                                 \
    forward_backward(chain(em, trans, start, end, mask, B, T, K, per_position),                            \
                     Out<S>{logz, node, edge, first, last}, num_threads);                                   \
  }                                                                                                         \
  /* loss = log Z - gold score and its gradient; returns the flat index of the first unmasked tag out */   \
  /* of range (nothing is computed then), else -1. */                                                      \
  int64_t crfhead_nll_grad_##SUFFIX(const S* em, const S* trans, const S* start, const S* end,             \
                                    const uint8_t* mask, int64_t B, int64_t T, int64_t K,                   \
                                    int per_position, const int64_t* tags, S* loss, S* gold, S* node,       \
                                    S* edge, S* first, S* last, int num_threads) {                          \
    const int64_t bad = first_bad_tag(mask, tags, B * T, K);                                                \
    if (bad >= 0) return bad;                                                                               \
    forward_backward(chain(em, trans, start, end, mask, B, T, K, per_position),                            \
                     Out<S>{loss, node, edge, first, last}, num_threads, tags, gold);                       \
    return -1;                                                                                              \
  }                                                                                                         \
  void crfhead_scale_grads_##SUFFIX(const S* grad, const S* node, const S* edge, const S* first,           \
                                    const S* last, int64_t B, int64_t T, int64_t K, int per_position,       \
                                    S* d_em, S* d_tr, S* d_start, S* d_end) {                               \
    scale_grads(grad, node, edge, first, last, B, T, K, per_position != 0, d_em, d_tr, d_start, d_end);    \
  }                                                                                                         \
  void crfhead_viterbi_##SUFFIX(const S* em, const S* trans, const S* start, const S* end,                 \
                                const uint8_t* mask, int64_t B, int64_t T, int64_t K, int per_position,     \
                                S* scores, int64_t* paths, int num_threads) {                               \
    viterbi(chain(em, trans, start, end, mask, B, T, K, per_position), scores, paths, num_threads);        \
  }                                                                                                         \
  /* log Z, node and per-edge marginals (B, T-1, K, K), also with shared transitions */                    \
  void crfhead_edge_marginals_##SUFFIX(const S* em, const S* trans, const S* start, const S* end,          \
                                       const uint8_t* mask, int64_t B, int64_t T, int64_t K,                \
                                       int per_position, S* logz, S* node, S* edge, int num_threads) {      \
    forward_backward(chain(em, trans, start, end, mask, B, T, K, per_position),                            \
                     Out<S>{logz, node, edge, nullptr, nullptr, true}, num_threads);                        \
  }                                                                                                         \
  void crfhead_max_sums_##SUFFIX(const S* em, const S* trans, const S* start, const S* end,                \
                                 const uint8_t* mask, int64_t B, int64_t T, int64_t K, int per_position,    \
                                 S* sums, S* best, int num_threads) {                                       \
    max_sums(chain(em, trans, start, end, mask, B, T, K, per_position), sums, best, num_threads);          \
  }                                                                                                         \
  void crfhead_topk_##SUFFIX(const S* em, const S* trans, const S* start, const S* end,                    \
                             const uint8_t* mask, int64_t B, int64_t T, int64_t K, int per_position,        \
                             int64_t R, S* scores, int64_t* paths, int num_threads) {                       \
    topk(chain(em, trans, start, end, mask, B, T, K, per_position), R, scores, paths, num_threads);        \
  }                                                                                                         \
  int64_t crfhead_first_non_finite_##SUFFIX(const S* em, const S* trans, const S* start, const S* end,     \
                                            const uint8_t* mask, int64_t B, int64_t T, int64_t K,           \
                                            int per_position) {                                             \
    return first_non_finite(chain(em, trans, start, end, mask, B, T, K, per_position));                   \
  }                                                                                                         \
  void crfhead_sample_##SUFFIX(const S* node, const S* edge, const uint8_t* mask, const double* u,         \
                               int64_t num_samples, int64_t B, int64_t T, int64_t K, int64_t* paths,        \
                               int num_threads) {                                                           \
    sample(node, edge, mask, u, num_samples, B, T, K, paths, num_threads);                                  \
  }

CRFHEAD_DEFINE(f32, float)
CRFHEAD_DEFINE(f64, double)

}  // extern "C"
