// Refusing inputs that would overflow the storage dtype they are converted to. `--dtype f16` on
// float32 values beyond f16's range (65504) rounds them to infinity, and the run would then "succeed"
// with NaN everywhere; NaN and infinities already in the file are the user's data and propagate as
// the contract says, so only finite values that become infinite count.
#pragma once

#include <span>
#include <string>

#include "vkattn/types.hpp"

namespace vkattn::cli {

// Throws vkattn::Error "<what>: N values overflow <dtype> (largest magnitude M > <dtype's max>)" when
// any finite value of `values` rounds to an infinity in `dtype`. Nothing for f32.
void check_fits_dtype(std::span<const float> values, DType dtype, const std::string& what);

}  // namespace vkattn::cli
