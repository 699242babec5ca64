#include "compare.hpp"

#include <doctest/doctest.h>

namespace vkattn::test {

bool compare_with_reference(const reference::Outputs& ref, std::span<const float> gpu_out,
                            std::span<const float> gpu_lse, double v_scale, DType dtype,
                            std::span<const int64_t> rows) {
  const conform::Comparison c = conform::compare_outputs(ref, gpu_out, gpu_lse, v_scale, dtype, rows);
  if (!c.ok()) FAIL_CHECK(c.text);
  return c.ok();
}

bool compare_weights_with_reference(const reference::Outputs& ref, std::span<const float> gpu_weights, DType dtype,
                                    std::span<const int64_t> rows) {
  const conform::Comparison c = conform::compare_weights(ref, gpu_weights, dtype, rows);
  if (!c.ok()) FAIL_CHECK(c.text);
  return c.ok();
}

}  // namespace vkattn::test
