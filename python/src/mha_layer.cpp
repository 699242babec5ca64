#include "mha_layer.hpp"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <optional>
#include <string>
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

class MhaLayer {
 public:
  MhaLayer(py::object context, const MhaWeights& weights)
      : context_object_(std::move(context)),
        layer_(context_object_.cast<PythonContext&>().context, weights, DType::f32),
        bias_(weights.bias) {}

  void set_weights(const MhaWeights& weights) { layer_.set_weights(weights); }

  // (out (batch, seq_q, E), weights per head (batch, H, seq_q, seq_k) or None).
  py::tuple forward(const CallArrays& arrays, const std::string& causal, bool need_weights) {
    Call call = gather(arrays, causal);
    call.spec.weights = need_weights;
    const int64_t B = call.spec.batch, Sq = call.spec.seq_q, Sk = call.spec.seq_k;
    py::array_t<float> out({B, Sq, layer_.embed_dim()});
    std::optional<py::array_t<float>> weights;
    if (need_weights) weights.emplace(std::vector<py::ssize_t>{B, layer_.num_heads(), Sq, Sk});
    {
      py::gil_scoped_release release;
      const PreparedMha pass = layer_.prepare(call.spec);  // every check before anything is uploaded
      DeviceTensors tensors(context());
      MhaBuffers buffers;
      inputs(tensors, call, buffers.query, buffers.key, buffers.value, buffers.mask);
      buffers.out = tensors.output(out.mutable_data(), bytes(out));
      if (weights) buffers.weights = {tensors.output(weights->mutable_data(), bytes(*weights)), 0};
      pass.run(buffers);
      tensors.download_outputs();
    }
    return py::make_tuple(out, weights ? py::object(*weights) : py::none());
  }

  // Every gradient of one call as a dict of float32 arrays named as the state_dict's entries (the
  // projections separate) and the inputs ("query" alone in self-attention: the whole input's);
  // "out" is the forward's output, which the pass computes again.
  py::dict backward(const CallArrays& arrays, const std::string& causal, const Floats& grad_out) {
    const Call call = gather(arrays, causal);
    const int64_t B = call.spec.batch, Sq = call.spec.seq_q, Sk = call.spec.seq_k, E = layer_.embed_dim();
    const int64_t kv_dim = layer_.kv_heads() * (E / layer_.num_heads());
    if (grad_out.size() != B * Sq * E) throw Error("grad_out: expected the output's shape");
    // The gradients the pass writes (and the output), each an array of its own.
    std::vector<std::pair<const char*, std::vector<py::ssize_t>>> shapes = {
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
    // The arrays the device writes, made with the GIL held, written without it.
    std::vector<std::pair<std::string, py::array_t<float>>> held;
    for (const auto& [name, shape] : shapes) held.emplace_back(name, py::array_t<float>(shape));
    {
      py::gil_scoped_release release;
      const PreparedMhaBackward pass = layer_.prepare_backward(call.spec);
      DeviceTensors tensors(context());
      MhaBackwardBuffers buffers;
      inputs(tensors, call, buffers.query, buffers.key, buffers.value, buffers.mask);
      buffers.grad_out = tensors.input(grad_out.data(), bytes(grad_out));
      auto output = [&](const std::string& name) -> BufferSlice {  // none: the pass has no such gradient
        for (auto& [n, array] : held) {
          if (n == name) return {tensors.output(array.mutable_data(), bytes(array)), 0};
        }
        return {};
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
    py::dict grads;
    for (auto& [name, array] : held) grads[py::str(name)] = std::move(array);
    return grads;
  }

 private:
  struct Call {
    MhaSpec spec;
    const CallArrays* arrays = nullptr;
    std::optional<HostView<MaskLayout>> mask;
  };

  Context& context() const { return context_object_.cast<PythonContext&>().context; }

  template <class Array>
  static uint64_t bytes(const Array& array) {
    return static_cast<uint64_t>(array.nbytes());
  }

  // The call's spec from its arrays' shapes (the sizes the layer checks against its own: prepare
  // throws Error, and run refuses a buffer that does not fit).
  Call gather(const CallArrays& arrays, const std::string& causal) const {
    Call call;
    call.arrays = &arrays;
    if (arrays.query.ndim() != 3) throw Error("query: expected 3 dimensions (batch, seq, embed_dim)");
    MhaSpec& spec = call.spec;
    spec.batch = arrays.query.shape(0);
    spec.seq_q = spec.seq_k = arrays.query.shape(1);
    spec.self_attention = !arrays.key;
    if (arrays.key.has_value() != arrays.value.has_value()) throw Error("key and value: give both or neither");
    if (arrays.key) {
      if (arrays.key->ndim() != 3) throw Error("key: expected 3 dimensions (batch, seq, kdim)");
      spec.seq_k = arrays.key->shape(1);
    }
    spec.options.causal = parse_causal(causal);
    if (arrays.mask) {
      call.mask = mask_view(*arrays.mask);
      spec.mask = call.mask->layout;
    }
    return call;
  }

  static void inputs(DeviceTensors& tensors, const Call& call, const Buffer*& query, const Buffer*& key,
                     const Buffer*& value, const Buffer*& mask) {
    const CallArrays& a = *call.arrays;
    query = tensors.input(a.query.data(), bytes(a.query));
    if (a.key) {
      key = tensors.input(a.key->data(), bytes(*a.key));
      value = tensors.input(a.value->data(), bytes(*a.value));
    }
    if (call.mask) mask = tensors.input(call.mask->data, call.mask->bytes);
  }

 private:
  py::object context_object_;  // keeps the Context (and its device) alive while the layer lives
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
