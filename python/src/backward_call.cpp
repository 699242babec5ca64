#include "backward_call.hpp"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>

#include <vkattn/attention_backward.hpp>
#include <vkattn/error.hpp>
#include <vkattn/varlen.hpp>

#include "backward_plans.hpp"
#include "context.hpp"
#include "device_tensors.hpp"
#include "host_tensor.hpp"

namespace py = pybind11;
using OptionalArray = std::optional<py::array>;

namespace vkattn::python {

namespace {

// The forward call's options, as the Python side passed them to the forward (the same seed: the
// backward regenerates the forward's dropout mask from it).
struct ForwardOptions {
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

// The forward's tensors (Q, K, V, O and dO as the module reads them) and the gradients' arrays.
struct Tensors {
  py::array q, k, v, out, lse, grad_out, grad_q, grad_k, grad_v;
  OptionalArray alibi, sinks, grad_sinks;
};

// What a backward call sends to the device and gets back, gathered with the GIL held.
struct HostBackward {
  AttentionSpec spec;
  HostView<TensorLayout> q, k, v, out, grad_out, grad_q, grad_k, grad_v;
  HostView<std::monostate> lse;
  std::optional<HostView<MaskLayout>> mask;
  PerHead<std::optional<HostView<std::monostate>>> per_head;
  std::optional<HostView<std::monostate>> grad_sinks, cu_seqlens_q, cu_seqlens_k;
};

bool same_layout(const TensorLayout& a, const TensorLayout& b) {
  return a.dtype == b.dtype && a.batch == b.batch && a.heads == b.heads && a.seq == b.seq && a.dim == b.dim &&
         a.stride_batch == b.stride_batch && a.stride_head == b.stride_head && a.stride_seq == b.stride_seq;
}

// The library writes a gradient at its tensor's layout (and reads dO at O's): an array of another
// shape or strides would be written wrong, so it is refused.
HostView<TensorLayout> gradient_view(const char* name, const py::array& array, const HostView<TensorLayout>& of,
                                     const char* of_name, bool output) {
  HostView<TensorLayout> view = tensor_view(name, array, of.layout.dtype);
  if (output) check_output(name, array, view.layout.required_elements());
  if (!same_layout(view.layout, of.layout)) {
    throw Error(std::string(name) + ": expected the shape and strides of " + of_name);
  }
  return view;
}

void gather(HostBackward& call, const Tensors& t, const ForwardOptions& options, DType dtype) {
  call.q = tensor_view("query", t.q, dtype);
  call.k = tensor_view("key", t.k, dtype);
  call.v = tensor_view("value", t.v, dtype);
  call.out = tensor_view("out", t.out, dtype);
  call.grad_out = gradient_view("grad_out", t.grad_out, call.out, "out", false);
  call.grad_q = gradient_view("grad_q", t.grad_q, call.q, "query", true);
  call.grad_k = gradient_view("grad_k", t.grad_k, call.k, "key", true);
  call.grad_v = gradient_view("grad_v", t.grad_v, call.v, "value", true);
  call.spec.q = call.q.layout;
  call.spec.out = call.out.layout;
  call.spec.options = options.to_attention_options();
  call.spec.lse = true;
  call.lse = dense_view("lse", t.lse, 'f', 4);
  const int64_t rows = call.q.layout.batch * call.q.layout.heads * call.q.layout.seq;
  if (static_cast<int64_t>(t.lse.size()) != rows) {
    throw Error("lse: expected " + std::to_string(rows) + " elements, got " + std::to_string(t.lse.size()));
  }
  const std::pair<const OptionalArray*, PerHeadTensor> per_head[] = {{&t.alibi, PerHeadTensor::alibi},
                                                                     {&t.sinks, PerHeadTensor::sinks}};
  for (const auto& [array, tensor] : per_head) {
    if (!*array) continue;
    const py::array& a = **array;
    if (a.ndim() != 1 && a.ndim() != 2) {
      throw Error(std::string(to_string(tensor)) + ": expected 1 or 2 dimensions, got " + std::to_string(a.ndim()));
    }
    call.spec[tensor] = a.ndim() == 1 ? HeadValuesLayout{1, a.shape(0), 0} : HeadValuesLayout{a.shape(0), a.shape(1), 0};
    call.per_head[tensor] = dense_view(to_string(tensor), a, 'f', 4);
  }
  // The library writes dsinks exactly when the call has sinks: one f32 per head.
  if (t.sinks.has_value() != t.grad_sinks.has_value()) throw Error("grad_sinks: expected exactly when sinks is given");
  if (t.grad_sinks) {
    call.grad_sinks = dense_view("grad_sinks", *t.grad_sinks, 'f', 4);
    check_output("grad_sinks", *t.grad_sinks, static_cast<int64_t>(t.grad_sinks->size()));
    if (t.grad_sinks->size() != t.sinks->size()) throw Error("grad_sinks: expected the size of sinks");
  }
}

// Plans (through the Context's backward plans, except with dropout: its seed is part of the plan
// and new on every forward call), then uploads, runs and downloads, without the GIL.
void run(PythonContext& context, const HostBackward& call) {
  py::gil_scoped_release release;
  const std::shared_ptr<const PreparedAttentionBackward> prepared =
      call.spec.options.dropout ? std::make_shared<const PreparedAttentionBackward>(context.context, call.spec)
                                : context.backward_plans.get(context.context, call.spec);
  DeviceTensors tensors(context.context);
  BackwardBuffers buffers;
  AttentionBuffers& forward = buffers.forward;
  forward.q = tensors.input(call.q.data, call.q.bytes);
  forward.k = tensors.input(call.k.data, call.k.bytes);
  forward.v = tensors.input(call.v.data, call.v.bytes);
  forward.out = tensors.input(call.out.data, call.out.bytes);
  forward.lse = {tensors.input(call.lse.data, call.lse.bytes), 0};
  if (call.mask) forward.mask = tensors.input(call.mask->data, call.mask->bytes);
  for (PerHeadTensor t : kPerHeadTensors) {
    if (call.per_head[t]) forward[t] = tensors.input(call.per_head[t]->data, call.per_head[t]->bytes);
  }
  if (call.cu_seqlens_q) forward.cu_seqlens_q = {tensors.input(call.cu_seqlens_q->data, call.cu_seqlens_q->bytes), 0};
  if (call.cu_seqlens_k) forward.cu_seqlens_k = {tensors.input(call.cu_seqlens_k->data, call.cu_seqlens_k->bytes), 0};
  buffers.grad_out = tensors.input(call.grad_out.data, call.grad_out.bytes);
  buffers.grad_q = tensors.output(call.grad_q.data, call.grad_q.bytes);
  buffers.grad_k = tensors.output(call.grad_k.data, call.grad_k.bytes);
  buffers.grad_v = tensors.output(call.grad_v.data, call.grad_v.bytes);
  if (call.grad_sinks) buffers.grad_sinks = {tensors.output(call.grad_sinks->data, call.grad_sinks->bytes), 0};
  prepared->run(buffers);
  tensors.download_outputs();
}

std::span<const int32_t> int32_values(const HostView<std::monostate>& view) {
  return {static_cast<const int32_t*>(view.data), view.bytes / sizeof(int32_t)};
}

void dense_backward(PythonContext& context, const Tensors& t, const std::string& dtype, const OptionalArray& mask,
                    const ForwardOptions& options) {
  HostBackward call;
  gather(call, t, options, parse_dtype(dtype));
  call.spec.kv = DenseKv{call.k.layout, call.v.layout};
  if (mask) {
    call.mask = mask_view(*mask);
    call.spec.mask = call.mask->layout;
  }
  run(context, call);
}

void packed_backward(PythonContext& context, const Tensors& t, const std::string& dtype,
                     const py::array& cu_seqlens_q, const py::array& cu_seqlens_k, int64_t max_seqlen_q,
                     int64_t max_seqlen_k, const ForwardOptions& options) {
  HostBackward call;
  gather(call, t, options, parse_dtype(dtype));
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
  // As the forward: the device reads the offsets unchecked, so wrong ones are an error here.
  const VarlenAttentionLayouts layouts = call.spec.packed_layouts();
  check_varlen_attention(layouts);
  check_varlen_values(layouts, int32_values(*call.cu_seqlens_q), int32_values(*call.cu_seqlens_k));
  run(context, call);
}

}  // namespace

void register_backward_calls(py::module_& module) {
  module.def(
      "attention_backward",
      [](PythonContext& context, const py::array& q, const py::array& k, const py::array& v, const py::array& out,
         const py::array& lse, const py::array& grad_out, const py::array& grad_q, const py::array& grad_k,
         const py::array& grad_v, const std::string& dtype, const OptionalArray& mask, const OptionalArray& alibi,
         const OptionalArray& sinks, const OptionalArray& grad_sinks, std::optional<float> scale,
         const std::string& causal, std::optional<std::pair<int64_t, int64_t>> window, std::optional<float> softcap,
         float dropout_p, uint64_t dropout_seed) {
        dense_backward(context, {q, k, v, out, lse, grad_out, grad_q, grad_k, grad_v, alibi, sinks, grad_sinks},
                       dtype, mask, {scale, causal, window, softcap, dropout_p, dropout_seed});
      },
      py::arg("context"), py::arg("q"), py::arg("k"), py::arg("v"), py::arg("out"), py::arg("lse"),
      py::arg("grad_out"), py::arg("grad_q"), py::arg("grad_k"), py::arg("grad_v"), py::arg("dtype"), py::kw_only(),
      py::arg("mask") = py::none(), py::arg("alibi") = py::none(), py::arg("sinks") = py::none(),
      py::arg("grad_sinks") = py::none(), py::arg("scale") = py::none(), py::arg("causal") = "none",
      py::arg("window") = py::none(), py::arg("softcap") = py::none(), py::arg("dropout_p") = 0.0f,
      py::arg("dropout_seed") = 0,
      "The backward of a dense attention call: from its inputs and options (as attention() took them), its "
      "out and lse, and grad_out (out's layout), writes grad_q, grad_k, grad_v (each at its tensor's layout) "
      "and grad_sinks (float32, with sinks). The internal call under vkattn's autograd functions.");
  module.def(
      "varlen_attention_backward",
      [](PythonContext& context, const py::array& q, const py::array& k, const py::array& v, const py::array& out,
         const py::array& lse, const py::array& grad_out, const py::array& grad_q, const py::array& grad_k,
         const py::array& grad_v, const std::string& dtype, const py::array& cu_seqlens_q,
         const py::array& cu_seqlens_k, int64_t max_seqlen_q, int64_t max_seqlen_k, const OptionalArray& alibi,
         const OptionalArray& sinks, const OptionalArray& grad_sinks, std::optional<float> scale,
         const std::string& causal, std::optional<std::pair<int64_t, int64_t>> window, std::optional<float> softcap,
         float dropout_p, uint64_t dropout_seed) {
        packed_backward(context, {q, k, v, out, lse, grad_out, grad_q, grad_k, grad_v, alibi, sinks, grad_sinks},
                        dtype, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                        {scale, causal, window, softcap, dropout_p, dropout_seed});
      },
      py::arg("context"), py::arg("q"), py::arg("k"), py::arg("v"), py::arg("out"), py::arg("lse"),
      py::arg("grad_out"), py::arg("grad_q"), py::arg("grad_k"), py::arg("grad_v"), py::arg("dtype"),
      py::arg("cu_seqlens_q"), py::arg("cu_seqlens_k"), py::arg("max_seqlen_q"), py::arg("max_seqlen_k"),
      py::kw_only(), py::arg("alibi") = py::none(), py::arg("sinks") = py::none(), py::arg("grad_sinks") = py::none(),
      py::arg("scale") = py::none(), py::arg("causal") = "none", py::arg("window") = py::none(),
      py::arg("softcap") = py::none(), py::arg("dropout_p") = 0.0f, py::arg("dropout_seed") = 0,
      "The backward of a packed (varlen) call, as attention_backward: the arrays as varlen_attention reads "
      "them, lse (heads, total_q). The internal call under vkattn.flash_attn_varlen_func's autograd.");
}

}  // namespace vkattn::python
