#include "spirv_float_controls.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "vkattn/error.hpp"

namespace vkattn::detail {

namespace {

// SPIR-V numbers (the SPIR-V specification, section 3).
constexpr uint32_t kMagic = 0x07230203u;
constexpr uint32_t kHeaderWords = 5;
constexpr uint32_t kOpCapability = 17, kOpExtension = 10, kOpExtInstImport = 11, kOpMemoryModel = 14;
constexpr uint32_t kOpEntryPoint = 15, kOpExecutionMode = 16, kOpExecutionModeId = 331;
constexpr uint32_t kCapabilitySignedZeroInfNanPreserve = 4466;
constexpr uint32_t kExecutionModeSignedZeroInfNanPreserve = 4461;
constexpr uint32_t kFloatControlsCoreVersion = 0x00010400u;  // SPIR-V 1.4
constexpr char kFloatControlsExtension[] = "SPV_KHR_float_controls";

uint32_t opcode(uint32_t word) { return word & 0xffffu; }
uint32_t word_count(uint32_t word) { return word >> 16; }
uint32_t instruction(uint32_t op, uint32_t words) { return (words << 16) | op; }

// The string operand's words (nul-terminated, padded to a whole word).
std::vector<uint32_t> string_words(const char* s) {
  const std::size_t bytes = std::strlen(s) + 1;
  std::vector<uint32_t> words((bytes + 3) / 4, 0u);
  std::memcpy(words.data(), s, bytes);
  return words;
}

}  // namespace

std::vector<uint32_t> with_nan_preserved(std::span<const uint32_t> module) {
  if (module.size() < kHeaderWords || module[0] != kMagic)
    throw Error("internal: SPIR-V module of " + std::to_string(module.size()) + " words has no SPIR-V header");
  // One pass over the module's instructions: where capabilities end, the entry points' ids, where
  // the execution modes end, and whether the mode or the extension is there already.
  std::size_t after_capabilities = kHeaderWords, after_modes = 0;
  std::vector<uint32_t> entry_points;
  bool has_extension = false, has_mode = false;
  const std::vector<uint32_t> extension_name = string_words(kFloatControlsExtension);
  for (std::size_t at = kHeaderWords; at < module.size();) {
    const uint32_t op = opcode(module[at]), words = word_count(module[at]);
    if (words == 0 || at + words > module.size())
      throw Error("internal: SPIR-V module has a malformed instruction at word " + std::to_string(at));
    if (op == kOpCapability) after_capabilities = at + words;
    if (op == kOpExtension && words - 1 == extension_name.size() &&
        std::equal(extension_name.begin(), extension_name.end(), module.begin() + at + 1))
      has_extension = true;
    if (op == kOpEntryPoint) entry_points.push_back(module[at + 2]);
    if (op == kOpEntryPoint || op == kOpExecutionMode || op == kOpExecutionModeId || op == kOpMemoryModel ||
        op == kOpExtInstImport || op == kOpExtension)
      after_modes = at + words;
    if (op == kOpExecutionMode && words == 4 && module[at + 2] == kExecutionModeSignedZeroInfNanPreserve &&
        module[at + 3] == 32u)
      has_mode = true;
    at += words;
  }
  if (has_mode || entry_points.empty()) return {module.begin(), module.end()};

  std::vector<uint32_t> out;
  out.reserve(module.size() + 8 + extension_name.size() + 4 * entry_points.size());
  out.insert(out.end(), module.begin(), module.begin() + after_capabilities);
  out.push_back(instruction(kOpCapability, 2));
  out.push_back(kCapabilitySignedZeroInfNanPreserve);
  if (module[1] < kFloatControlsCoreVersion && !has_extension) {
    out.push_back(instruction(kOpExtension, 1 + static_cast<uint32_t>(extension_name.size())));
    out.insert(out.end(), extension_name.begin(), extension_name.end());
  }
  out.insert(out.end(), module.begin() + after_capabilities, module.begin() + after_modes);
  for (uint32_t entry : entry_points) {
    out.push_back(instruction(kOpExecutionMode, 4));
    out.push_back(entry);
    out.push_back(kExecutionModeSignedZeroInfNanPreserve);
    out.push_back(32u);
  }
  out.insert(out.end(), module.begin() + after_modes, module.end());
  return out;
}

}  // namespace vkattn::detail
