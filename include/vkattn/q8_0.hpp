// q8_0, ggml's 8-bit block format, for KV caches a quarter of f32's size (a little over half of
// f16's). Along a row, each run of 32 consecutive elements is one block of 34 bytes: the scale d as
// f16 bits (little-endian), then 32 int8 q; the value of element i is f32(d) * q[i]. Any bytes
// ggml's block_q8_0 writes read back here unchanged.
//
// Range: a block holds values up to 65504·127 (about 8.3e6), far past f16's 65504. O is a convex
// combination of V's rows and is stored in the call's dtype, so a q8_0 V with a value d·q beyond
// 65504 gives Inf in an f16 O (and on a kernel that stages K/V tiles in f16, Inf in the tile) from
// finite blocks. The library does not read device values and cannot refuse them: a caller with an
// f16 output must keep V's values within f16's range (or use f32 or bf16 for O; bf16 holds every
// q8_0 value). `vkattn run` refuses such a V before the call.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace vkattn {

constexpr int64_t kQ8_0BlockElements = 32;
constexpr int64_t kQ8_0BlockBytes = 34;  // f16 scale + 32 int8

// Bytes of `elements` values stored as q8_0 (elements / 32 * 34); `elements` a multiple of 32.
int64_t q8_0_bytes(int64_t elements);

// Rows of `dim` values (dim >= 32, a multiple of 32; values.size() a multiple of dim) to q8_0
// blocks, block by block. For each block: d = max|x| / 127 rounded to f16 (as stored), q =
// round(x / d) with d the stored f16 value, ties away from zero (ggml's roundf), clamped to
// [-127, 127]; a block whose d rounds to 0 (max|x| <= 127·2^-25, all zeros included) stores d = 0
// and q = 0. Dividing by the stored d (ggml divides by the unrounded one) makes the reference's
// dequantized value the nearest the block can hold: |x - dequantized| <= d/2 for every element when d
// is a normal f16 (max|x| >= 127·2^-14), and <= max(d/2, 127·2^-25) otherwise (a subnormal d is
// coarse: the largest elements may clamp at ±127).
// Throws Error for a NaN or infinite value (naming its index), or a block whose scale would overflow
// f16 (max|x| >= 65520·127): q8_0 cannot hold them.
std::vector<uint8_t> quantize_q8_0(std::span<const float> values, int64_t dim);

// q8_0 blocks (bytes.size() a multiple of 34) to their values, f32(d) * q, exactly (the product of an
// f16 and an int8 is exact in f32). Bytes are not judged: a NaN or infinite scale gives NaN/Inf
// values, as a kernel reading them would.
std::vector<float> dequantize_q8_0(std::span<const uint8_t> bytes);

}  // namespace vkattn
