// libFuzzer target for the multi-head layer's argument checks (core/mha_types.cpp):
// MhaWeights::from_packed, check_mha_weights and check_mha_inputs with sizes anywhere in int64 (0,
// negative, 2^31, 2^32, 2^62, INT64_MAX), arrays of bounded lengths and enum values outside their
// range. Each must return or throw vkattn::Error; never crash, overflow (UBSan) or accept sizes that
// do not match. Only the checks run: nothing is allocated from the claimed sizes.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <limits>
#include <span>
#include <vector>

#include "vkattn/error.hpp"
#include "vkattn/mha_types.hpp"

namespace {

__extension__ typedef __int128 int128;

int64_t interesting(FuzzedDataProvider& f) {
  static constexpr int64_t kEdges[] = {0, -1, 1, 2, 3, 4, 8, 64, 255, 256, int64_t{1} << 31, int64_t{1} << 32,
                                       (int64_t{1} << 32) + 1, int64_t{1} << 62, std::numeric_limits<int64_t>::max(),
                                       std::numeric_limits<int64_t>::min()};
  switch (f.ConsumeIntegralInRange<int>(0, 3)) {
    case 0:
      return f.ConsumeIntegralInRange<int64_t>(0, 8);
    case 1:
      return f.ConsumeIntegralInRange<int64_t>(-2, 64);
    case 2:
      return f.PickValueInArray(kEdges);
    default:
      return f.ConsumeIntegral<int64_t>();
  }
}

// a x b x ... for the harness's own bookkeeping, before the checks: -1 once it leaves int128 (three
// int64 factors can), which no array length matches.
int128 prod(std::initializer_list<int128> factors) {
  int128 p = 1;
  for (const int128 f : factors)
    if (p < 0 || __builtin_mul_overflow(p, f, &p)) return -1;
  return p;
}

// Array lengths stay small (the arrays are real); the fuzzer mostly picks the length that matches.
std::size_t length(FuzzedDataProvider& f, int128 expected) {
  if (f.ConsumeIntegralInRange<int>(0, 3) != 0 && expected >= 0 && expected <= 4096) return std::size_t(expected);
  return f.ConsumeIntegralInRange<std::size_t>(0, 64);
}

[[noreturn]] void violated(const char* what) {
  std::fprintf(stderr, "fuzz_mha_args: accepted arguments break the contract: %s\n", what);
  std::abort();
}

void expect_size(std::size_t given, int128 expected, const char* what) {
  if (int128(given) != expected) violated(what);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  FuzzedDataProvider f(data, size);
  static const std::vector<float> pool(8192, 0.25f);  // what the spans view
  const auto span = [&](std::size_t n) { return std::span<const float>(pool.data(), n); };
  try {
    if (f.ConsumeBool()) {
      const int64_t e = interesting(f), h = interesting(f);
      const int128 ee = prod({e, e});
      const std::size_t in_w = length(f, prod({3, ee})), out_w = length(f, ee);
      const bool bias = f.ConsumeBool();
      const std::size_t in_b = bias ? length(f, 3 * int128(e)) : 0, out_b = bias ? length(f, e) : 0;
      const vkattn::MhaWeights w = vkattn::MhaWeights::from_packed(e, h, span(in_w), span(in_b), span(out_w), span(out_b));
      expect_size(in_w, prod({3, ee}), "from_packed: in_proj_weight");
      if (w.q_proj_weight.size() + w.k_proj_weight.size() + w.v_proj_weight.size() != in_w)
        violated("from_packed: the split does not add up");
      return 0;
    }
    vkattn::MhaWeights w;
    w.embed_dim = interesting(f);
    w.num_heads = interesting(f);
    w.kv_heads = f.ConsumeBool() ? 0 : interesting(f);
    w.kdim = f.ConsumeBool() ? 0 : interesting(f);
    w.vdim = f.ConsumeBool() ? 0 : interesting(f);
    w.bias = f.ConsumeBool();
    const int128 E = w.embed_dim, H = w.num_heads > 0 ? w.num_heads : 1;
    const int128 KVD = (w.kv_heads > 0 ? w.kv_heads : w.num_heads) * (E / H);
    const int128 kdim = w.kdim > 0 ? w.kdim : E, vdim = w.vdim > 0 ? w.vdim : E;
    w.q_proj_weight.assign(length(f, prod({E, E})), 0.5f);
    w.k_proj_weight.assign(length(f, prod({KVD, kdim})), 0.5f);
    w.v_proj_weight.assign(length(f, prod({KVD, vdim})), 0.5f);
    w.out_proj_weight.assign(length(f, prod({E, E})), 0.5f);
    if (w.bias) {
      w.in_proj_bias.assign(length(f, E + prod({2, KVD})), 0.0f);
      w.out_proj_bias.assign(length(f, E), 0.0f);
    }
    const vkattn::MhaDims d = vkattn::check_mha_weights(w);
    expect_size(w.q_proj_weight.size(), int128(d.embed_dim) * d.embed_dim, "q_proj_weight");
    expect_size(w.k_proj_weight.size(), int128(d.kv_dim()) * d.kdim, "k_proj_weight");
    if (d.embed_dim % d.num_heads != 0 || d.num_heads % d.kv_heads != 0) violated("indivisible heads");

    vkattn::MhaInputs in;
    in.batch = interesting(f);
    in.seq_q = interesting(f);
    in.seq_k = f.ConsumeBool() ? in.seq_q : interesting(f);
    const int128 B = in.batch, Sq = in.seq_q, Sk = in.seq_k;
    in.query = span(length(f, prod({B, Sq, d.embed_dim})));
    if (f.ConsumeBool()) {
      in.key = span(length(f, prod({B, Sk, d.kdim})));
      in.value = span(length(f, prod({B, Sk, d.vdim})));
    }
    if (f.ConsumeBool()) in.key_padding_mask.assign(length(f, prod({B, Sk})), 0);
    if (f.ConsumeBool()) in.attn_mask.assign(length(f, prod({Sq, Sk})), 0.0f);
    in.options.causal = f.ConsumeIntegralInRange<int>(0, 7) ? static_cast<vkattn::Causal>(f.ConsumeIntegralInRange<int>(0, 2))
                                                    : static_cast<vkattn::Causal>(f.ConsumeIntegral<int8_t>());
    in.need_weights = f.ConsumeBool();
    const vkattn::MhaCall call = vkattn::check_mha_inputs(d, in);
    expect_size(in.query.size(), prod({B, Sq, d.embed_dim}), "query");
    if (!call.self_attention) expect_size(in.key.size(), prod({B, Sk, d.kdim}), "key");
    if (in.need_weights && prod({B, d.num_heads, Sq, Sk}) > (int128(1) << 60)) violated("weights past 2^60");
  } catch (const vkattn::Error&) {
  }
  return 0;
}
