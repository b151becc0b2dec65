// Dropout (Srivastava et al. 2014) on float32 CPU tensors in one pass, its mask drawn from a keyed hash.
//
// out[i] = x[i] * scale where the element is kept, 0 where it is dropped. Element i is kept when
// h(seed, i) >= threshold, h a 32-bit integer hash of the index keyed by the 64-bit seed (two rounds
// of a multiply-xorshift finaliser, Wellons' "lowbias32", each keyed by one half of the seed): a
// stateless, counter-based generator (Salmon et al., SC 2011), so the loop vectorises (no state is
// carried from one element to the next) and the backward pass recomputes the same mask from the
// seed instead of keeping it. Keep probability: (2^32 - threshold) / 2^32, chosen by the caller.
//
// Called through ctypes by crfhead.encoders.dropout; the Python side draws the seed from torch's
// generator (so torch.manual_seed reproduces a run) and falls back to torch where this cannot run.
#include <cstdint>

namespace {

inline uint32_t lowbias32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= x >> 15;
  x *= 0x846ca68bU;
  x ^= x >> 16;
  return x;
}

}  // namespace

extern "C" {

int crfhead_dropout_abi_version() { return 1; }

// out[i] = keep(i) ? x[i] * scale : 0 for i in [0, n), n < 2^32 (the caller checks); x and out may
// be the same array.
void crfhead_dropout(const float* x, float* out, int64_t n, uint64_t seed, uint32_t threshold,
                     float scale) {
  const uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  const uint32_t count = static_cast<uint32_t>(n);
  for (uint32_t i = 0; i < count; ++i) {
    const uint32_t h = lowbias32(lowbias32(i ^ k0) + k1);
    out[i] = h >= threshold ? x[i] * scale : 0.0f;
  }
}

}  // extern "C"
