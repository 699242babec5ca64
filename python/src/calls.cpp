#include "calls.hpp"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>

#include <vkattn/attention.hpp>
#include <vkattn/error.hpp>
#include <vkattn/varlen.hpp>

#include "context.hpp"
#include "device_array.hpp"
#include "device_tensors.hpp"
#include "errors.hpp"
#include "host_tensor.hpp"

namespace py = pybind11;
using OptionalArray = std::optional<py::array>;
using OptionalTensor = std::optional<py::object>;  // a NumPy array or a DeviceArray

namespace vkattn::python {

namespace {

// The options every call takes, as the Python side passes them (causal already "none", "top-left"
// or "bottom-right").
struct CallOptions {
  std::string dtype;
  std::optional<float> scale;
  std::string causal;
  std::optional<std::pair<int64_t, int64_t>> window;
  std::optional<float> softcap;
  float dropout_p = 0.0f;
  uint64_t dropout_seed = 0;

  AttentionOptions to_attention_options() const {
    AttentionOptions o;
    o.scale = scale;
    o.causal = parse_causal(causal);
    if (window) o.window = Window{window->first, window->second};
    o.softcap = softcap;
    if (dropout_p != 0.0f) o.dropout = Dropout{dropout_p, dropout_seed, 0};
    return o;
  }
};

// The optional tensors and the outputs besides O that both calls take.
struct OptionalTensors {
  OptionalTensor lse, weights;
  OptionalArray alibi, sinks;
};

HeadValuesLayout head_values_layout(const char* name, const py::array& array) {
  if (array.ndim() == 1) return HeadValuesLayout{1, array.shape(0), 0};
  if (array.ndim() == 2) return HeadValuesLayout{array.shape(0), array.shape(1), 0};
  throw Error(std::string(name) + ": expected 1 or 2 dimensions, got " + std::to_string(array.ndim()));
}

// What a call sends to the device and gets back, gathered with the GIL held.
struct HostCall {
  AttentionSpec spec;
  TensorArgument q, k, v, out;  // host memory or DeviceArrays
  std::optional<HostView<MaskLayout>> mask;
  PerHead<std::optional<HostView<std::monostate>>> per_head;
  std::optional<TensorArgument> lse, weights;
  std::optional<HostView<std::monostate>> cu_seqlens_q, cu_seqlens_k;
  // Dropout's output pass reads the LSE: a call with dropout that did not ask for it gets a device
  // buffer for it (this many bytes) that is not downloaded.
  uint64_t unrequested_lse_bytes = 0;
};

void gather(HostCall& call, const PythonContext& context, const py::object& q, const py::object& k,
            const py::object& v, const py::object& out, const OptionalTensors& optional, const CallOptions& options) {
  const DType dtype = parse_dtype(options.dtype);
  call.q = tensor_argument("query", q, dtype, context, false);
  call.k = tensor_argument("key", k, dtype, context, false);
  call.v = tensor_argument("value", v, dtype, context, false);
  call.out = tensor_argument("out", out, dtype, context, true);
  call.spec.q = call.q.layout;
  call.spec.out = call.out.layout;
  call.spec.options = options.to_attention_options();
  const std::pair<const OptionalArray*, PerHeadTensor> per_head[] = {{&optional.alibi, PerHeadTensor::alibi},
                                                                     {&optional.sinks, PerHeadTensor::sinks}};
  for (const auto& [array, tensor] : per_head) {
    if (!*array) continue;
    call.spec[tensor] = head_values_layout(to_string(tensor), **array);
    call.per_head[tensor] = dense_view(to_string(tensor), **array, 'f', 4);
  }
  if (optional.lse) {
    call.spec.lse = true;
    call.lse = dense_argument("lse", *optional.lse, 'f', context,
                              call.q.layout.batch * call.q.layout.heads * call.q.layout.seq, true);
  } else if (call.spec.options.dropout) {
    call.spec.lse = true;
    call.unrequested_lse_bytes = static_cast<uint64_t>(call.q.layout.batch * call.q.layout.heads * call.q.layout.seq) * 4;
  }
  if (optional.weights) {
    call.spec.weights = true;
    call.weights = dense_argument("weights", *optional.weights, 'f', context,
                                  call.q.layout.batch * call.q.layout.heads * call.q.layout.seq * call.k.layout.seq, true);
  }
}

// Plans (through the plan cache, except with dropout: its seed is part of the plan and new on every
// call), then uploads, runs and downloads, without the GIL. Planning first: a call the library
// refuses allocates and uploads nothing.
void run(PythonContext& context, const HostCall& call) {
  py::gil_scoped_release release;
  const std::shared_ptr<const PreparedAttention> prepared =
      call.spec.options.dropout ? std::make_shared<const PreparedAttention>(context.context, call.spec)
                                : context.plans.get(context.context, call.spec);
  DeviceTensors tensors(context.context);
  AttentionBuffers buffers;
  buffers.q = input_buffer(tensors, call.q);
  buffers.k = input_buffer(tensors, call.k);
  buffers.v = input_buffer(tensors, call.v);
  buffers.out = output_buffer(tensors, call.out);
  if (call.mask) buffers.mask = tensors.input(call.mask->data, call.mask->bytes);
  for (PerHeadTensor t : kPerHeadTensors) {
    if (call.per_head[t]) buffers[t] = tensors.input(call.per_head[t]->data, call.per_head[t]->bytes);
  }
  if (call.lse) buffers.lse = {output_buffer(tensors, *call.lse), dense_offset_bytes(*call.lse)};
  if (call.unrequested_lse_bytes != 0) buffers.lse = {tensors.scratch(call.unrequested_lse_bytes), 0};
  if (call.weights) buffers.weights = {output_buffer(tensors, *call.weights), dense_offset_bytes(*call.weights)};
  if (call.cu_seqlens_q) buffers.cu_seqlens_q = {tensors.input(call.cu_seqlens_q->data, call.cu_seqlens_q->bytes), 0};
  if (call.cu_seqlens_k) buffers.cu_seqlens_k = {tensors.input(call.cu_seqlens_k->data, call.cu_seqlens_k->bytes), 0};
  prepared->run(buffers);
  tensors.download_outputs();
}

void dense_attention(PythonContext& context, const py::object& q, const py::object& k, const py::object& v,
                     const py::object& out, const OptionalArray& mask, const OptionalTensors& optional,
                     const CallOptions& options) {
  HostCall call;
  gather(call, context, q, k, v, out, optional, options);
  call.spec.kv = DenseKv{call.k.layout, call.v.layout};
  if (mask) {
    call.mask = mask_view(*mask);
    call.spec.mask = call.mask->layout;
  }
  run(context, call);
}

std::span<const int32_t> int32_values(const HostView<std::monostate>& view) {
  return {static_cast<const int32_t*>(view.data), view.bytes / sizeof(int32_t)};
}

void packed_attention(PythonContext& context, const py::object& q, const py::object& k, const py::object& v,
                      const py::object& out, const py::array& cu_seqlens_q, const py::array& cu_seqlens_k,
                      int64_t max_seqlen_q, int64_t max_seqlen_k, const OptionalTensors& optional,
                      const CallOptions& options) {
  HostCall call;
  gather(call, context, q, k, v, out, optional, options);
  for (const auto& [name, array] : {std::pair{"cu_seqlens_q", &cu_seqlens_q}, std::pair{"cu_seqlens_k", &cu_seqlens_k}}) {
    if (array->ndim() != 1) throw Error(std::string(name) + ": expected 1 dimension, got " + std::to_string(array->ndim()));
  }
  call.cu_seqlens_q = dense_view("cu_seqlens_q", cu_seqlens_q, 'i', 4);
  call.cu_seqlens_k = dense_view("cu_seqlens_k", cu_seqlens_k, 'i', 4);
  PackedKv packed;
  packed.k = call.k.layout;
  packed.v = call.v.layout;
  packed.batch = cu_seqlens_q.shape(0) - 1;
  packed.max_seqlen_q = max_seqlen_q;
  packed.max_seqlen_k = max_seqlen_k;
  call.spec.kv = packed;
  // The device reads the offsets unchecked (clamping what breaks the contract); the host has them,
  // so a wrong one is an error here rather than wrong rows.
  const VarlenAttentionLayouts layouts = call.spec.packed_layouts();
  check_varlen_attention(layouts);
  check_varlen_values(layouts, int32_values(*call.cu_seqlens_q), int32_values(*call.cu_seqlens_k));
  run(context, call);
}

}  // namespace

void register_calls(py::module_& module) {
  module.def(
      "attention",
      [](PythonContext& context, const py::object& q, const py::object& k, const py::object& v, const py::object& out,
         const std::string& dtype, const OptionalArray& mask, const OptionalTensor& lse, const OptionalTensor& weights,
         const OptionalArray& alibi, const OptionalArray& sinks, std::optional<float> scale,
         const std::string& causal, std::optional<std::pair<int64_t, int64_t>> window, std::optional<float> softcap,
         float dropout_p, uint64_t dropout_seed) {
        dense_attention(context, q, k, v, out, mask, {lse, weights, alibi, sinks},
                        {dtype, scale, causal, window, softcap, dropout_p, dropout_seed});
      },
      py::arg("context"), py::arg("q"), py::arg("k"), py::arg("v"), py::arg("out"), py::arg("dtype"),
      py::kw_only(), py::arg("mask") = py::none(), py::arg("lse") = py::none(), py::arg("weights") = py::none(),
      py::arg("alibi") = py::none(), py::arg("sinks") = py::none(), py::arg("scale") = py::none(),
      py::arg("causal") = "none", py::arg("window") = py::none(), py::arg("softcap") = py::none(),
      py::arg("dropout_p") = 0.0f, py::arg("dropout_seed") = 0,
      "Dense attention on (batch, heads, seq, dim) arrays, any non-negative strides with a contiguous last "
      "dimension (a bf16 array as 16-bit integers); writes out, lse (batch, heads, seq_q) and weights "
      "(batch, heads, seq_q, seq_k). The internal call under vkattn.scaled_dot_product_attention.");
  module.def(
      "varlen_attention",
      [](PythonContext& context, const py::object& q, const py::object& k, const py::object& v, const py::object& out,
         const std::string& dtype, const py::array& cu_seqlens_q, const py::array& cu_seqlens_k, int64_t max_seqlen_q,
         int64_t max_seqlen_k, const OptionalTensor& lse, const OptionalTensor& weights, const OptionalArray& alibi,
         const OptionalArray& sinks, std::optional<float> scale, const std::string& causal,
         std::optional<std::pair<int64_t, int64_t>> window, std::optional<float> softcap, float dropout_p,
         uint64_t dropout_seed) {
        packed_attention(context, q, k, v, out, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                         {lse, weights, alibi, sinks}, {dtype, scale, causal, window, softcap, dropout_p, dropout_seed});
      },
      py::arg("context"), py::arg("q"), py::arg("k"), py::arg("v"), py::arg("out"), py::arg("dtype"),
      py::arg("cu_seqlens_q"), py::arg("cu_seqlens_k"), py::arg("max_seqlen_q"), py::arg("max_seqlen_k"),
      py::kw_only(), py::arg("lse") = py::none(), py::arg("weights") = py::none(), py::arg("alibi") = py::none(),
      py::arg("sinks") = py::none(), py::arg("scale") = py::none(), py::arg("causal") = "none",
      py::arg("window") = py::none(), py::arg("softcap") = py::none(), py::arg("dropout_p") = 0.0f,
      py::arg("dropout_seed") = 0,
      "Packed (varlen) attention: q, k, v and out as (1, heads, total, dim) views of (total, heads, dim) "
      "arrays, int32 cu_seqlens (batch + 1); lse (heads, total_q), weights (heads, total_q, total_k). The "
      "internal call under vkattn.flash_attn_varlen_func.");
}

}  // namespace vkattn::python
