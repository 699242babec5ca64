// Every f16 bit pattern read as V comes out of O as the same value, on every fused kernel and the
// three-stage path. The kernels widen f16 storage to f32 in two ways (shaders/half_floats.glsl):
// unpackHalf2x16 in the GPU kernels, integer operations and selects in the CPU devices' kernels
// (subgroup, rowwise, the subgroup GEMM). A wrong exponent rebias, subnormal scale, sign or Inf/NaN
// select changes some of the 65536 values here.
//
// One key: each query row's weight is exactly 1 and its sum 1, so O is its head's V row, rounded
// back to f16 (exact for every f16 value). Expected: the same value (-0 may come back as +0: 0 +
// 1 x -0 is +0), a NaN for a NaN. O is poisoned with two different patterns in two runs, so an
// output left unwritten cannot match in both.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "support.hpp"
#include "vkattn/numeric.hpp"

using namespace vkattn;
using namespace vkattn::test;

namespace {

struct Route {
  const char* name;
  KernelVariant kernel;
  AttentionPath path;
  int64_t seq_q;  // 1: decode (the subgroup kernel's decode form where the device runs it)
};

// The mismatches of O (heads x seq_q x dim f16 bits) against V (heads x 1 x dim): their count and
// the first few, described.
std::string mismatches(const std::vector<uint16_t>& o, const std::vector<uint16_t>& v, int64_t heads, int64_t seq_q,
                       int64_t dim, int64_t& count) {
  std::ostringstream first;
  count = 0;
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < seq_q; ++i)
      for (int64_t d = 0; d < dim; ++d) {
        const uint16_t want_bits = v[size_t(h * dim + d)], got_bits = o[size_t((h * seq_q + i) * dim + d)];
        const float want = f16_bits_to_f32(want_bits), got = f16_bits_to_f32(got_bits);
        const bool same = std::isnan(want) ? std::isnan(got) : got == want;
        if (same) continue;
        if (count++ < 4)
          first << " V 0x" << std::hex << want_bits << " -> O 0x" << got_bits << std::dec << " (head " << h << ", row "
                << i << ", dim " << d << ");";
      }
  return first.str();
}

}  // namespace

TEST_SUITE("widening") {
  TEST_CASE("f16: every bit pattern of V reaches O unchanged, on every fused kernel and the three-stage path") {
    if (!device_supports(DType::f16)) return;
    const int64_t heads = 256, dim = 256;  // V: 256 heads x one key x 256 dims = every f16 bit pattern
    std::vector<uint16_t> v(size_t(heads * dim));
    for (size_t e = 0; e < v.size(); ++e) v[e] = static_cast<uint16_t>(e);
    const Route routes[] = {
        {"automatic, prefill", KernelVariant::automatic, AttentionPath::fused, 16},
        {"automatic, decode", KernelVariant::automatic, AttentionPath::fused, 1},
        {"tiled", KernelVariant::tiled, AttentionPath::fused, 16},
        {"rowwise", KernelVariant::rowwise, AttentionPath::fused, 16},
        {"subgroup", KernelVariant::subgroup, AttentionPath::fused, 16},
        {"three-stage", KernelVariant::automatic, AttentionPath::unfused, 16},
    };
    for (const Route& route : routes) {
      CAPTURE(route.name);
      ContextOptions options;
      options.kernel = route.kernel;
      options.validation = validation_enabled();
      std::vector<std::string> messages;
      options.on_validation_message = [&](const std::string& m) { messages.push_back(m); };
      std::string refused;
      std::unique_ptr<Context> ctx;
      try {
        ctx = std::make_unique<Context>(options);
      } catch (const Error& e) {
        refused = e.what();  // a kernel this device cannot run (subgroup without shuffles)
      }
      if (!ctx) {
        MESSAGE(route.name << ": " << refused << ": skipped");
        continue;
      }
      const int64_t seq_q = route.seq_q;
      const auto q_layout = TensorLayout::bhsd(DType::f16, 1, heads, seq_q, dim);
      const auto kv_layout = TensorLayout::bhsd(DType::f16, 1, heads, 1, dim);
      // Q and K all zeros: every score is 0 (any finite score gives weight 1 to the one key).
      Buffer q = Buffer::allocate(*ctx, uint64_t(q_layout.element_count()) * 2);
      Buffer k = Buffer::allocate(*ctx, uint64_t(kv_layout.element_count()) * 2);
      Buffer vb = Buffer::allocate(*ctx, v.size() * 2);
      Buffer o = Buffer::allocate(*ctx, uint64_t(q_layout.element_count()) * 2);
      q.fill(0);
      k.fill(0);
      vb.upload(v.data(), v.size() * 2);
      AttentionArgs args;
      args.q = {&q, q_layout};
      args.k = {&k, kv_layout};
      args.v = {&vb, kv_layout};
      args.out = {&o, q_layout};
      args.path = route.path;
      for (const uint8_t poison : {uint8_t(0x55), uint8_t(0xAA)}) {
        o.fill(poison);
        const std::string kernel = plan_attention(*ctx, args).kernel;
        CAPTURE(kernel);
        attention(*ctx, args);
        std::vector<uint16_t> out(size_t(q_layout.element_count()));
        o.download(out.data(), out.size() * 2);
        int64_t count = 0;
        const std::string first = mismatches(out, v, heads, seq_q, dim, count);
        CHECK_MESSAGE(count == 0, count << " values of O differ from V (O poisoned with bytes " << int(poison)
                                        << "):" << first);
      }
      CHECK_MESSAGE(messages.empty(), (messages.empty() ? std::string() : messages.front()));
    }
  }
}
