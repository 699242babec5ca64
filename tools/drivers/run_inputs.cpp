#include "run_inputs.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "cli_numbers.hpp"
#include "dtype_overflow.hpp"
#include "npy.hpp"
#include "vkattn/error.hpp"
#include "vkattn/numeric.hpp"
#include "vkattn/q8_0.hpp"

namespace vkattn::cli {
namespace {

TensorLayout dense(DType dtype, const std::vector<int64_t>& s) {
  return TensorLayout::bhsd(dtype, s[0], s[1], s[2], s[3]);
}

// The mask as the device reads it, and its layout (2-D or 4-D, broadcast by the library's rules).
void load_mask(const std::string& path, RunInputs& inputs) {
  const npy::Array array = npy::read(path);
  MaskType type;
  switch (array.kind) {
    case npy::Kind::boolean: type = MaskType::boolean; break;
    case npy::Kind::f32: type = MaskType::f32; break;
    case npy::Kind::f16: type = MaskType::f16; break;
    default:
      throw Error(path + ": mask dtype '" + array.descr + "' is not supported; use bool ('|b1'), '<f4' or '<f2'");
  }
  const auto& s = array.shape;
  if (s.size() == 2) {
    inputs.layouts.mask = MaskLayout::dense(type, 1, 1, s[0], s[1]);
  } else if (s.size() == 4) {
    inputs.layouts.mask = MaskLayout::dense(type, s[0], s[1], s[2], s[3]);
  } else {
    throw Error(path + ": mask must be 2-D (seq_q, seq_k) or 4-D (batch|1, heads|1, seq_q, seq_k), got shape " +
                array.shape_string());
  }
  if (type == MaskType::boolean) {
    const std::vector<uint8_t> bools = npy::to_bools(array, path);  // 0/1, whatever byte numpy held
    inputs.mask.resize(bools.size());
    for (std::size_t i = 0; i < bools.size(); ++i) inputs.mask[i] = std::byte{bools[i]};
  } else {
    inputs.mask = array.data;  // already little-endian f32 / f16, as the device reads it
  }
}

// kv-lens: (batch,) int32/int64, each in 0..seq_k. The device would clamp bad values; a user passing
// them has a bug worth reporting instead.
void load_kv_lengths(const std::string& path, const AttentionProblem& problem, RunInputs& inputs) {
  const npy::Array array = npy::read(path);
  if (array.kind != npy::Kind::i32 && array.kind != npy::Kind::i64)
    throw Error(path + ": kv-lens dtype '" + array.descr + "' is not supported; use int32 ('<i4') or int64 ('<i8')");
  if (array.shape.size() != 1 || array.shape[0] != problem.batch)
    throw Error(path + ": kv-lens must have shape (batch,) = (" + std::to_string(problem.batch) + ",), got " +
                array.shape_string());
  const std::vector<int64_t> values = npy::to_ints(array, path);
  inputs.kv_lengths.resize(values.size());
  for (std::size_t b = 0; b < values.size(); ++b) {
    if (values[b] < 0 || values[b] > problem.seq_k)
      throw Error(path + ": kv_lengths[" + std::to_string(b) + "] = " + std::to_string(values[b]) +
                  " is outside 0..seq_k (" + std::to_string(problem.seq_k) + ")");
    inputs.kv_lengths[b] = static_cast<int32_t>(values[b]);
  }
}

}  // namespace

npy::Array read_4d(const std::string& path, const char* role, const char* dims) {
  // The layout is what the library checks, but only a 4-D array can be described as one.
  npy::Array array = npy::read(path);
  if (array.shape.size() != 4)
    throw Error(path + ": " + role + " must be a 4-D array " + dims + ", got shape " + array.shape_string());
  return array;
}

DType compute_dtype(const RunOptions& options, const npy::Array& q,
                    const std::vector<std::pair<const npy::Array*, std::string>>& others, const char* together) {
  if (!options.dtype.empty()) return parse_dtype(options.dtype);
  // Without --dtype the files' dtype is the compute dtype, so the others must share Q's: silently
  // rounding a float32 K to float16 would be a surprise.
  for (const auto& [array, path] : others)
    if (array->kind != q.kind)
      throw Error(path + ": dtype '" + array->descr + "' differs from Q's '" + q.descr + "' (" + options.q + "); " +
                  together + " must share one dtype, or pass --dtype to convert");
  return q.kind == npy::Kind::f16 ? DType::f16 : DType::f32;
}

std::string first_lines(const std::string& text) {
  const std::size_t first = text.find('\n');
  const std::size_t second = first == std::string::npos ? first : text.find('\n', first + 1);
  return text.substr(0, second);
}

Buffer allocate_at_least(Context& context, uint64_t bytes) {
  return Buffer::allocate(context, std::max<uint64_t>(bytes, 16));
}

Buffer upload_encoded(Context& context, DType dtype, std::span<const float> values) {
  std::vector<std::byte> bytes(values.size() * dtype_size(dtype));
  encode(dtype, values.data(), bytes.data(), values.size());
  Buffer buffer = allocate_at_least(context, bytes.size());
  if (!bytes.empty()) buffer.upload(bytes.data(), bytes.size());
  return buffer;
}

Buffer upload_kv(Context& context, DType dtype, KvQuant quant, std::span<const float> values,
                 std::span<const uint8_t> blocks) {
  if (quant != KvQuant::q8_0) return upload_encoded(context, dtype, values);
  Buffer buffer = allocate_at_least(context, blocks.size());
  if (!blocks.empty()) buffer.upload(blocks.data(), blocks.size());
  return buffer;
}

std::vector<uint8_t> quantize_kv(std::span<const float> values, int64_t dim, const std::string& option,
                                 const std::string& path) {
  try {
    return quantize_q8_0(values, dim);
  } catch (const Error& e) {
    throw Error(option + " (" + path + "): " + e.what());
  }
}

std::vector<std::byte> output_npy(std::span<const std::byte> device_bytes, DType dtype,
                                  const std::vector<int64_t>& shape, bool as_f16) {
  if (as_f16 && dtype == DType::f16) return npy::serialize(shape, "<f2", device_bytes);
  std::vector<float> values(device_bytes.size() / dtype_size(dtype));
  decode(dtype, device_bytes.data(), values.data(), values.size());
  return npy::serialize_floats(shape, values, as_f16);
}

RunInputs load_run_inputs(const RunOptions& options) {
  RunInputs inputs;
  const npy::Array q = read_4d(options.q, "Q");
  const npy::Array k = read_4d(options.k, "K");
  const npy::Array v = read_4d(options.v, "V");
  inputs.q = npy::to_floats(q, options.q);
  inputs.k = npy::to_floats(k, options.k);
  inputs.v = npy::to_floats(v, options.v);

  const DType dtype = compute_dtype(options, q, {{&k, options.k}, {&v, options.v}}, "Q, K and V");
  inputs.out_f16 = q.kind == npy::Kind::f16 && dtype != DType::bf16;
  check_fits_dtype(inputs.q, dtype, "--q (" + options.q + ")");
  // q8_0 K and V are quantized from the values read, never stored in the dtype.
  const bool q8_0 = options.kv_dtype == "q8_0";
  if (!q8_0) {
    check_fits_dtype(inputs.k, dtype, "--k (" + options.k + ")");
    check_fits_dtype(inputs.v, dtype, "--v (" + options.v + ")");
  }

  AttentionLayouts& layouts = inputs.layouts;
  layouts.q = dense(dtype, q.shape);
  layouts.k = dense(dtype, k.shape);
  layouts.v = dense(dtype, v.shape);
  layouts.out = TensorLayout::bhsd(dtype, q.shape[0], q.shape[1], q.shape[2], v.shape[3]);
  layouts.kv_quant = q8_0 ? KvQuant::q8_0 : KvQuant::none;
  layouts.has_kv_lengths = !options.kv_lens.empty();
  layouts.has_lse = !options.lse.empty();
  layouts.options.causal = parse_causal(options.causal);
  if (!options.scale.empty()) layouts.options.scale = parse_float32(options.scale, "--scale");
  if (!options.mask.empty()) load_mask(options.mask, inputs);
  apply_modifier_options(options.modifiers, layouts.options);
  inputs.per_head = PerHeadInputs::load(options.per_head_files, q.shape[0], q.shape[1], layouts.per_head());

  // The library's checks (shapes, dims, GQA, mask broadcast, scale) give the library's messages.
  inputs.problem = check_attention(layouts);

  if (layouts.mask) {
    const uint64_t needed = static_cast<uint64_t>(layouts.mask->required_elements()) * mask_type_size(layouts.mask->type);
    if (inputs.mask.size() != needed)  // cannot happen for a dense mask; guards the upload below
      throw Error(options.mask + ": mask holds " + std::to_string(inputs.mask.size()) + " bytes, its layout needs " +
                  std::to_string(needed));
  }
  if (!options.kv_lens.empty()) load_kv_lengths(options.kv_lens, inputs.problem, inputs);
  if (q8_0) {  // after the layouts' checks (dims of whole blocks); dense (B, G, S, D): the file's order
    inputs.k_q8_0 = quantize_kv(inputs.k, k.shape[3], "--k", options.k);
    inputs.v_q8_0 = quantize_kv(inputs.v, v.shape[3], "--v", options.v);
    inputs.k = dequantize_q8_0(inputs.k_q8_0);
    inputs.v = dequantize_q8_0(inputs.v_q8_0);
    check_q8_0_v_fits_output(inputs.v, layouts.out.dtype, "--v (" + options.v + ")");
  }
  return inputs;
}

}  // namespace vkattn::cli
