#include "run_gradients.hpp"

#include "npy.hpp"
#include "usage_error.hpp"
#include "vkattn/error.hpp"
#include "vkattn/numeric.hpp"

namespace vkattn::cli {
namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

}  // namespace

std::string gradient_usage_error(const RunOptions& o) {
  const std::pair<const char*, const std::string*> outputs[] = {{"--dq", &o.dq}, {"--dk", &o.dk}, {"--dv", &o.dv}};
  if (!o.backward()) {
    for (const auto& [flag, path] : outputs)
      if (!path->empty()) return std::string(flag) + " needs --grad-out (the gradient of O the backward pass starts from)";
    if (!o.dsinks.empty()) return "--dsinks needs --grad-out (the gradient of O the backward pass starts from)";
    return "";
  }
  for (const auto& [flag, path] : outputs)
    if (path->empty()) return std::string("--grad-out needs ") + flag + " (the backward pass writes dQ, dK and dV: --dq, --dk, --dv)";
  if (!o.dsinks.empty() && o.per_head_files.sinks.empty())
    return "--dsinks needs --sinks (the attention-sink logits whose gradient it is)";
  if (o.paged()) return "--grad-out cannot be used with a paged cache (--k-cache): it is an inference layout; give dense or packed K and V";
  if (!o.kv_dtype.empty())
    return "--grad-out cannot be used with --kv-dtype " + o.kv_dtype + ": q8_0 K and V are an inference layout";
  return "";
}

void append_gradient_outputs(const RunOptions& o, FlagPaths& outputs) {
  for (const auto& [flag, path] : {std::pair{"--dq", &o.dq}, {"--dk", &o.dk}, {"--dv", &o.dv}, {"--dsinks", &o.dsinks}})
    outputs.push_back({flag, *path});
}

std::vector<float> load_grad_out(const RunOptions& o, DType dtype, const std::vector<int64_t>& out_shape) {
  if (!o.backward()) return {};
  const npy::Array array = npy::read(o.grad_out);
  if (array.shape != out_shape)
    // A usage error (exit 2, docs/command-line.md): the file given is not the gradient of this call's O.
    throw UsageError("--grad-out (" + o.grad_out + "): shape " + array.shape_string() + " must be O's, " + shape_text(out_shape));
  std::vector<float> values = npy::to_floats(array, o.grad_out);
  for (float& x : values) x = round_to(dtype, x);
  return values;
}

void stage_gradients(OutputFiles& files, const RunOptions& o, const CallResults& r, DType dtype, bool as_f16,
                     const std::vector<int64_t>& q_shape, const std::vector<int64_t>& k_shape,
                     const std::vector<int64_t>& v_shape) {
  if (!o.backward()) return;
  files.stage(o.dq, output_npy(r.grad_q, dtype, q_shape, as_f16));
  files.stage(o.dk, output_npy(r.grad_k, dtype, k_shape, as_f16));
  files.stage(o.dv, output_npy(r.grad_v, dtype, v_shape, as_f16));
  if (!o.dsinks.empty()) {
    const std::vector<int64_t> shape = {int64_t(r.grad_sinks.size())};
    files.stage(o.dsinks, npy::serialize_floats(shape, r.grad_sinks, false));
  }
}

}  // namespace vkattn::cli
