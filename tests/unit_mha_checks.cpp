// The multi-head layer's Vulkan-free checks (mha_types.hpp) at the edges of int64: extents whose
// products wrap are Errors naming the array and the sizes, never sizes that silently match an empty
// array; and enum values outside their range.
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "support.hpp"

using namespace vkattn;
using vkattn::test::contains;
using vkattn::test::constant_mha_weights;
using vkattn::test::error_message;

namespace {

constexpr int64_t k2to32 = int64_t{1} << 32;

}  // namespace

TEST_SUITE("unit") {
  TEST_CASE("MhaWeights::from_packed: 3 x E x E past int64 is an Error, not an empty match") {
    const std::string m = error_message([] { MhaWeights::from_packed(k2to32, 1, {}, {}, {}, {}); });
    CHECK_MESSAGE(contains(m, "in_proj_weight: 3 x 4294967296 x 4294967296 exceeds 2^60 values"), m);
    // 2^31: 3 x E x E = 3 x 2^62 wraps int64 too.
    CHECK(contains(error_message([] { MhaWeights::from_packed(int64_t{1} << 31, 1, {}, {}, {}, {}); }),
                   "exceeds 2^60 values"));
  }

  TEST_CASE("check_mha_weights: products of sizes past 2^60 values") {
    MhaWeights w = constant_mha_weights();
    w.embed_dim = k2to32;
    w.num_heads = 1;
    CHECK(contains(error_message([&] { check_mha_weights(w); }), "q_proj_weight: 4294967296 x 4294967296 exceeds"));
    w = constant_mha_weights();
    w.kdim = int64_t{1} << 62;  // KVD x kdim = 8 x 2^62
    CHECK(contains(error_message([&] { check_mha_weights(w); }), "k_proj_weight: 8 x 4611686018427387904 exceeds"));
  }

  TEST_CASE("check_mha_inputs: batch x seq past int64, the weights' size, and the causal value") {
    const MhaDims d = check_mha_weights(constant_mha_weights());
    MhaInputs in;
    in.batch = k2to32, in.seq_q = k2to32, in.seq_k = k2to32;  // B x Sq x E wraps to 0: an empty query matched
    CHECK(contains(error_message([&] { check_mha_inputs(d, in); }), "query: 4294967296 x 4294967296 x 8 exceeds"));
    // The same through the fp64 reference, which shares the check.
    CHECK(contains(error_message([&] { reference::multi_head_attention(constant_mha_weights(), in); }), "query: 4294967296 x 4294967296 x 8"));

    const std::vector<float> x(2 * 8, 0.5f);
    in.batch = 1, in.seq_q = 2, in.seq_k = int64_t{1} << 58;
    in.query = x;
    in.key = x;  // wrong size anyway: the product is checked before the size is compared
    CHECK(contains(error_message([&] { check_mha_inputs(d, in); }), "key: 1 x 288230376151711744 x 8 exceeds"));
    in.seq_k = 2, in.key = {}, in.need_weights = true, in.seq_q = 2;
    CHECK_NOTHROW(check_mha_inputs(d, in));
    in.options.causal = static_cast<Causal>(7);
    CHECK(contains(error_message([&] { check_mha_inputs(d, in); }), "causal: invalid value 7"));
  }
}
