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

// --kv-dtype q8_0: V is never stored in the dtype, but O, a convex combination of V's rows, is. A
// block stands for d·q with d its f16 scale, up to 65504·127, far past f16's range: a finite V
// would give an infinite O in f16. So V's dequantized values (`dequantized_v`) must fit the output
// dtype: "<what> as q8_0 blocks: N values overflow f16 (...)". bf16 holds every q8_0 value.
void check_q8_0_v_fits_output(std::span<const float> dequantized_v, DType out_dtype, const std::string& what);

}  // namespace vkattn::cli
