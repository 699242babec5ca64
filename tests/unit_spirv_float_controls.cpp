// The SignedZeroInfNanPreserve patch (runtime/spirv_float_controls.hpp) on the embedded modules: one
// capability, one execution mode per entry point, everything else in order, idempotent. The patched
// modules themselves run in every other test on a device that reports the property (lavapipe does),
// where the validation layer checks each module when it is created.
#include <doctest/doctest.h>

#include <algorithm>
#include <span>
#include <string_view>
#include <vector>

#include "spirv_float_controls.hpp"
#include "support.hpp"

namespace vkattn::detail {
std::span<const uint32_t> find_spirv(std::string_view name);  // generated: spirv_table.cpp
}

using vkattn::test::contains;
using vkattn::test::error_message;

namespace {

struct Instruction {
  uint32_t opcode;
  std::vector<uint32_t> operands;
};

std::vector<Instruction> instructions(const std::vector<uint32_t>& module) {
  std::vector<Instruction> out;
  for (std::size_t at = 5; at < module.size();) {
    const uint32_t words = module[at] >> 16;
    REQUIRE(words > 0);
    REQUIRE(at + words <= module.size());
    out.push_back({module[at] & 0xffffu, {module.begin() + at + 1, module.begin() + at + words}});
    at += words;
  }
  return out;
}

}  // namespace

TEST_SUITE("unit") {
  TEST_CASE("SignedZeroInfNanPreserve: added once to each embedded attention module, the rest unchanged") {
    for (const char* name : {"attention_tiled_f32", "attention_tiled_f16", "attention_rowwise_bf16",
                             "attention_subgroup_decode_f16", "attention_combine_f32", "gemm_f16_f16_f32",
                             "kv_append_f16", "attention_softmax"}) {
      CAPTURE(name);
      const std::span<const uint32_t> code = vkattn::detail::find_spirv(name);
      REQUIRE(!code.empty());
      const std::vector<uint32_t> original(code.begin(), code.end());
      const std::vector<uint32_t> patched = vkattn::detail::with_nan_preserved(code);
      CHECK(std::equal(original.begin(), original.begin() + 5, patched.begin()));  // header, bound unchanged

      const auto before = instructions(original), after = instructions(patched);
      int capabilities = 0, modes = 0, entry_points = 0;
      std::size_t last_capability = 0, first_mode = after.size(), last_entry = 0;
      for (std::size_t i = 0; i < after.size(); ++i) {
        const Instruction& in = after[i];
        if (in.opcode == 17) last_capability = i;
        if (in.opcode == 17 && in.operands == std::vector<uint32_t>{4466}) ++capabilities;
        if (in.opcode == 15) ++entry_points, last_entry = i;
        if (in.opcode == 16 && in.operands.size() == 3 && in.operands[1] == 4461) {
          ++modes;
          CHECK(in.operands[2] == 32u);
          first_mode = std::min(first_mode, i);
        }
      }
      CHECK(capabilities == 1);
      CHECK(modes == entry_points);
      CHECK(entry_points >= 1);
      CHECK(first_mode > last_entry);       // execution modes follow the entry points
      CHECK(last_capability < last_entry);  // capabilities come first
      // Every original instruction is there, in order; only the new ones were inserted.
      std::size_t j = 0;
      for (const Instruction& in : after)
        if (j < before.size() && in.opcode == before[j].opcode && in.operands == before[j].operands) ++j;
      CHECK(j == before.size());
      const std::size_t extension = original[1] < 0x00010400u ? 7u : 0u;  // "SPV_KHR_float_controls"
      CHECK(patched.size() == original.size() + 2 + extension + 4 * static_cast<std::size_t>(entry_points));

      CHECK(vkattn::detail::with_nan_preserved(patched) == patched);  // already declared: unchanged
    }
  }

  TEST_CASE("SignedZeroInfNanPreserve: a module that is not SPIR-V is refused") {
    const std::vector<uint32_t> not_spirv = {1, 2, 3, 4, 5, 6};
    CHECK(contains(error_message([&] { vkattn::detail::with_nan_preserved(not_spirv); }), "no SPIR-V header"));
    std::vector<uint32_t> truncated(vkattn::detail::find_spirv("attention_combine_f32").begin(),
                                    vkattn::detail::find_spirv("attention_combine_f32").end());
    REQUIRE(truncated[5] == ((2u << 16) | 17u));  // OpCapability Shader, words 5-6
    truncated.resize(8);
    truncated[7] = (100u << 16) | 17u;  // then an instruction claiming 100 words
    CHECK(contains(error_message([&] { vkattn::detail::with_nan_preserved(truncated); }), "malformed instruction"));
  }
}
