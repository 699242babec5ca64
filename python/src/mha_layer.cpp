#include "mha_layer.hpp"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <vkattn/error.hpp>
#include <vkattn/mha.hpp>
#include <vkattn/mha_backward.hpp>

#include "context.hpp"
#include "device_tensors.hpp"
#include "host_tensor.hpp"

namespace py = pybind11;

namespace vkattn::python {

namespace {

// Arrays arrive as C-contiguous float32 (the Python side converts); forcecast makes any other
// array a float32 copy rather than an error.
using Floats = py::array_t<float, py::array::c_style | py::array::forcecast>;
using OptionalFloats = std::optional<Floats>;

std::vector<float> values(const Floats& array) { return {array.data(), array.data() + array.size()}; }
std::vector<float> values(const OptionalFloats& array) { return array ? values(*array) : std::vector<float>{}; }

// The arrays of one call, batch-first float32: key and value absent in self-attention; the mask
// the Python side merged from key_padding_mask, attn_mask and its heads, 4-D (batch | 1, heads | 1,
// seq_q, seq_k), additive float32 or bool (nonzero = attend).
struct CallArrays {
  Floats query;
  OptionalFloats key, value;
  std::optional<py::array> mask;
};

// An array's memory, taken with the GIL held and used without it.
struct HostBytes {
  void* data = nullptr;
  uint64_t bytes = 0;
};

HostBytes host_bytes(const py::array& array) {
  return {const_cast<void*>(array.data()), static_cast<uint64_t>(array.nbytes())};
}

// One call as the layer's prepared passes take it: its spec and its inputs' memory.
struct HostCall {
  MhaSpec spec;
  HostBytes query;
  std::optional<HostBytes> key, value, mask;

  // Uploads the inputs into `tensors`, pointing the pass's buffers at them.
  void upload(DeviceTensors& tensors, const Buffer*& q, const Buffer*& k, const Buffer*& v, const Buffer*& m) const {
    q = tensors.input(query.data, query.bytes);
    if (key) k = tensors.input(key->data, key->bytes);
    if (value) v = tensors.input(value->data, value->bytes);
    if (mask) m = tensors.input(mask->data, mask->bytes);
  }
};

// The call's spec from its arrays' shapes: the layer checks them against its own sizes (prepare
// throws Error, and run refuses a buffer that does not fit the plan).
HostCall gather(const CallArrays& arrays, const std::string& causal) {
  HostCall call;
  if (arrays.query.ndim() != 3) throw Error("query: expected 3 dimensions (batch, seq, embed_dim)");
  if (arrays.key.has_value() != arrays.value.has_value()) throw Error("key and value: give both or neither");
  MhaSpec& spec = call.spec;
  spec.batch = arrays.query.shape(0);
  spec.seq_q = spec.seq_k = arrays.query.shape(1);
  spec.self_attention = !arrays.key;
  call.query = host_bytes(arrays.query);
  if (arrays.key) {
    if (arrays.key->ndim() != 3) throw Error("key: expected 3 dimensions (batch, seq, kdim)");
    spec.seq_k = arrays.key->shape(1);
    call.key = host_bytes(*arrays.key);
    call.value = host_bytes(*arrays.value);
  }
  spec.options.causal = parse_causal(causal);
  if (arrays.mask) {
    const HostView<MaskLayout> mask = mask_view(*arrays.mask);
    spec.mask = mask.layout;
    call.mask = HostBytes{mask.data, mask.bytes};
  }
  return call;
}

class MhaLayer {
 public:
  MhaLayer(py::object context, const MhaWeights& weights)
      : context_object_(std::move(context)),
        context_(context_object_.cast<PythonContext&>().context),
        layer_(context_, weights, DType::f32),
        bias_(weights.bias) {}

  void set_weights(const MhaWeights& weights) { layer_.set_weights(weights); }

  // (out (batch, seq_q, E), weights per head (batch, H, seq_q, seq_k) or None).
  py::tuple forward(const CallArrays& arrays, const std::string& causal, bool need_weights) {
    HostCall call = gather(arrays, causal);
    call.spec.weights = need_weights;
    const int64_t B = call.spec.batch, Sq = call.spec.seq_q, Sk = call.spec.seq_k;
    py::array_t<float> out({B, Sq, layer_.embed_dim()});
    const HostBytes out_bytes = host_bytes(out);
    py::object weights = py::none();
    HostBytes weights_bytes;
    if (need_weights) {
      py::array_t<float> w({B, layer_.num_heads(), Sq, Sk});
      weights_bytes = host_bytes(w);
      weights = std::move(w);
    }
    {
      py::gil_scoped_release release;
      const PreparedMha pass = layer_.prepare(call.spec);  // every check before anything is uploaded
      DeviceTensors tensors(context_);
      MhaBuffers buffers;
      call.upload(tensors, buffers.query, buffers.key, buffers.value, buffers.mask);
      buffers.out = tensors.output(out_bytes.data, out_bytes.bytes);
      if (need_weights) buffers.weights = {tensors.output(weights_bytes.data, weights_bytes.bytes), 0};
      pass.run(buffers);
      tensors.download_outputs();
    }
    return py::make_tuple(out, weights);
  }

  // Every gradient of one call as a dict of float32 arrays named as the state_dict's entries (the
  // projections separate) and the inputs ("query" alone in self-attention: the whole input's);
  // "out" is the forward's output, which the pass computes again.
  py::dict backward(const CallArrays& arrays, const std::string& causal, const Floats& grad_out) {
    const HostCall call = gather(arrays, causal);
    const int64_t B = call.spec.batch, Sq = call.spec.seq_q, Sk = call.spec.seq_k, E = layer_.embed_dim();
    const int64_t kv_dim = layer_.kv_heads() * (E / layer_.num_heads());
    if (grad_out.size() != B * Sq * E) throw Error("grad_out: expected the output's shape (batch, seq_q, embed_dim)");
    const HostBytes grad_out_bytes = host_bytes(grad_out);
    // The arrays the pass writes (the output and every gradient the layer and call have).
    std::vector<std::pair<std::string, std::vector<py::ssize_t>>> shapes = {
        {"out", {B, Sq, E}}, {"q_proj_weight", {E, E}}, {"k_proj_weight", {kv_dim, layer_.kdim()}},
        {"v_proj_weight", {kv_dim, layer_.vdim()}}, {"out_proj.weight", {E, E}}, {"query", {B, Sq, E}}};
    if (bias_) {
      shapes.push_back({"in_proj_bias", {E + 2 * kv_dim}});
      shapes.push_back({"out_proj.bias", {E}});
    }
    if (!call.spec.self_attention) {
      shapes.push_back({"key", {B, Sk, layer_.kdim()}});
      shapes.push_back({"value", {B, Sk, layer_.vdim()}});
    }
    py::dict grads;
    std::unordered_map<std::string, HostBytes> written;
    for (const auto& [name, shape] : shapes) {
      py::array_t<float> array(shape);
      written[name] = host_bytes(array);
      grads[py::str(name)] = std::move(array);
    }
    {
      py::gil_scoped_release release;
      const PreparedMhaBackward pass = layer_.prepare_backward(call.spec);
      DeviceTensors tensors(context_);
      MhaBackwardBuffers buffers;
      call.upload(tensors, buffers.query, buffers.key, buffers.value, buffers.mask);
      buffers.grad_out = tensors.input(grad_out_bytes.data, grad_out_bytes.bytes);
      auto output = [&](const std::string& name) -> BufferSlice {  // none: the pass has no such gradient
        const auto found = written.find(name);
        if (found == written.end()) return {};
        return {tensors.output(found->second.data, found->second.bytes), 0};
      };
      buffers.out = output("out").buffer;
      MhaGradBuffers& g = buffers.grads;
      g.q_proj_weight = output("q_proj_weight");
      g.k_proj_weight = output("k_proj_weight");
      g.v_proj_weight = output("v_proj_weight");
      g.in_proj_bias = output("in_proj_bias");
      g.out_proj_weight = output("out_proj.weight");
      g.out_proj_bias = output("out_proj.bias");
      g.query = output("query");
      g.key = output("key");
      g.value = output("value");
      pass.run(buffers);
      tensors.download_outputs();
    }
    return grads;
  }

 private:
  py::object context_object_;  // keeps the Context (and its device) alive while the layer lives
  Context& context_;
  MultiHeadAttention layer_;
  bool bias_;
};

MhaWeights weights_of(int64_t embed_dim, int64_t num_heads, int64_t kdim, int64_t vdim, bool bias,
                      const Floats& q_proj_weight, const Floats& k_proj_weight, const Floats& v_proj_weight,
                      const OptionalFloats& in_proj_bias, const Floats& out_proj_weight,
                      const OptionalFloats& out_proj_bias) {
  MhaWeights w;
  w.embed_dim = embed_dim;
  w.num_heads = num_heads;
  w.kdim = kdim;
  w.vdim = vdim;
  w.bias = bias;
  w.q_proj_weight = values(q_proj_weight);
  w.k_proj_weight = values(k_proj_weight);
  w.v_proj_weight = values(v_proj_weight);
  w.in_proj_bias = values(in_proj_bias);
  w.out_proj_weight = values(out_proj_weight);
  w.out_proj_bias = values(out_proj_bias);
  return w;
}

}  // namespace

void register_mha_layer(py::module_& module) {
  py::class_<MhaLayer>(module, "MhaLayer",
                       "vkattn's multi-head layer (MultiHeadAttention, float32) on host arrays; the internal "
                       "class under vkattn.MultiheadAttention.")
      .def(py::init([](py::object context, int64_t embed_dim, int64_t num_heads, int64_t kdim, int64_t vdim, bool bias,
                       const Floats& q, const Floats& k, const Floats& v, const OptionalFloats& in_bias,
                       const Floats& out_w, const OptionalFloats& out_b) {
             context.cast<PythonContext&>();  // a TypeError unless it is a Context
             return MhaLayer(std::move(context),
                             weights_of(embed_dim, num_heads, kdim, vdim, bias, q, k, v, in_bias, out_w, out_b));
           }),
           py::arg("context"), py::arg("embed_dim"), py::arg("num_heads"), py::arg("kdim"), py::arg("vdim"),
           py::arg("bias"), py::arg("q_proj_weight"), py::arg("k_proj_weight"), py::arg("v_proj_weight"),
           py::arg("in_proj_bias"), py::arg("out_proj_weight"), py::arg("out_proj_bias"))
      .def(
          "set_weights",
          [](MhaLayer& layer, int64_t embed_dim, int64_t num_heads, int64_t kdim, int64_t vdim, bool bias,
             const Floats& q, const Floats& k, const Floats& v, const OptionalFloats& in_bias, const Floats& out_w,
             const OptionalFloats& out_b) {
            layer.set_weights(weights_of(embed_dim, num_heads, kdim, vdim, bias, q, k, v, in_bias, out_w, out_b));
          },
          py::arg("embed_dim"), py::arg("num_heads"), py::arg("kdim"), py::arg("vdim"), py::arg("bias"),
          py::arg("q_proj_weight"), py::arg("k_proj_weight"), py::arg("v_proj_weight"), py::arg("in_proj_bias"),
          py::arg("out_proj_weight"), py::arg("out_proj_bias"))
      .def(
          "forward",
          [](MhaLayer& layer, const Floats& query, const OptionalFloats& key, const OptionalFloats& value,
             const std::optional<py::array>& mask, const std::string& causal, bool need_weights) {
            return layer.forward({query, key, value, mask}, causal, need_weights);
          },
          py::arg("query"), py::arg("key"), py::arg("value"), py::arg("mask"), py::arg("causal"),
          py::arg("need_weights"),
          "(out (batch, seq_q, E), per-head weights (batch, H, seq_q, seq_k) or None). query (batch, seq_q, E), "
          "key and value (batch, seq_k, kdim | vdim) float32, None for self-attention; mask 4-D (batch | 1, "
          "H | 1, seq_q, seq_k), float32 (added) or bool (True = attend); causal \"none\" or \"top-left\".")
      .def(
          "backward",
          [](MhaLayer& layer, const Floats& query, const OptionalFloats& key, const OptionalFloats& value,
             const std::optional<py::array>& mask, const std::string& causal, const Floats& grad_out) {
            return layer.backward({query, key, value, mask}, causal, grad_out);
          },
          py::arg("query"), py::arg("key"), py::arg("value"), py::arg("mask"), py::arg("causal"), py::arg("grad_out"),
          "Every gradient of one call, as forward takes it, as a dict of float32 arrays (the state_dict's names "
          "with the projections separate, query, key, value; out: the forward's output), from grad_out "
          "(batch, seq_q, E).");
}

}  // namespace vkattn::python
