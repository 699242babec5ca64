#include "mha_layer.hpp"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <vkattn/error.hpp>
#include <vkattn/mha.hpp>

#include "context.hpp"

namespace py = pybind11;

namespace vkattn::python {

namespace {

// Arrays arrive as C-contiguous float32 (the Python side converts); forcecast makes any other
// array a float32 copy rather than an error.
using Floats = py::array_t<float, py::array::c_style | py::array::forcecast>;
using OptionalFloats = std::optional<Floats>;
using Bytes = py::array_t<uint8_t, py::array::c_style | py::array::forcecast>;

std::vector<float> values(const Floats& array) { return {array.data(), array.data() + array.size()}; }
std::vector<float> values(const OptionalFloats& array) { return array ? values(*array) : std::vector<float>{}; }
std::span<const float> span(const std::optional<Floats>& array) {
  if (!array) return {};
  return {array->data(), static_cast<std::size_t>(array->size())};
}

py::array_t<float> to_array(const std::vector<float>& v, std::vector<py::ssize_t> shape) {
  py::array_t<float> array(std::move(shape));
  std::copy(v.begin(), v.end(), array.mutable_data());
  return array;
}

// The arrays of one call (batch-first), kept alive while the layer reads them through spans.
struct CallArrays {
  Floats query;
  OptionalFloats key, value;
  std::optional<Bytes> key_padding_mask;
  OptionalFloats attn_mask;
};

class MhaLayer {
 public:
  MhaLayer(py::object context, MhaWeights weights)
      : context_object_(std::move(context)),
        layer_(context_object_.cast<PythonContext&>().context, weights, DType::f32) {}

  void set_weights(const MhaWeights& weights) { layer_.set_weights(weights); }

  // The layer's inputs as MhaInputs (spans into `arrays`; sizes checked by the library).
  MhaInputs inputs(const CallArrays& arrays, const std::string& causal) const {
    if (arrays.query.ndim() != 3) throw Error("query: expected 3 dimensions (batch, seq, embed_dim)");
    MhaInputs in;
    in.batch = arrays.query.shape(0);
    in.seq_q = arrays.query.shape(1);
    in.seq_k = in.seq_q;
    in.query = span(arrays.query);
    if (arrays.key || arrays.value) {
      if (!arrays.key || !arrays.value) throw Error("key and value: give both or neither");
      if (arrays.key->ndim() != 3) throw Error("key: expected 3 dimensions (batch, seq, kdim)");
      in.seq_k = arrays.key->shape(1);
      in.key = span(arrays.key);
      in.value = span(arrays.value);
    }
    if (arrays.key_padding_mask) {
      const Bytes& m = *arrays.key_padding_mask;
      in.key_padding_mask.assign(m.data(), m.data() + m.size());
    }
    if (arrays.attn_mask) in.attn_mask = values(arrays.attn_mask);
    in.options.causal = parse_causal(causal);
    return in;
  }

  py::tuple forward(const CallArrays& arrays, const std::string& causal, bool need_weights, bool average_weights) {
    MhaInputs in = inputs(arrays, causal);
    in.need_weights = need_weights;
    in.average_weights = average_weights;
    MhaResult result;
    {
      py::gil_scoped_release release;
      result = layer_.forward(in);
    }
    py::object weights = py::none();
    if (need_weights) {
      weights = average_weights ? to_array(result.weights, {in.batch, in.seq_q, in.seq_k})
                                : to_array(result.weights, {in.batch, layer_.num_heads(), in.seq_q, in.seq_k});
    }
    return py::make_tuple(to_array(result.out, {in.batch, in.seq_q, layer_.embed_dim()}), weights);
  }

  // Every gradient (MhaBackwardResult) as a dict of float32 arrays named as the state_dict's entries
  // and the inputs; "out" is the forward's output.
  py::dict backward(const CallArrays& arrays, const std::string& causal, const Floats& grad_out) {
    const MhaInputs in = inputs(arrays, causal);
    MhaBackwardResult g;
    {
      py::gil_scoped_release release;
      g = layer_.backward(in, span(std::optional<Floats>(grad_out)));
    }
    const int64_t e = layer_.embed_dim(), kv_dim = layer_.kv_heads() * (e / layer_.num_heads());
    py::dict d;
    d["out"] = to_array(g.out, {in.batch, in.seq_q, e});
    d["q_proj_weight"] = to_array(g.q_proj_weight, {e, e});
    d["k_proj_weight"] = to_array(g.k_proj_weight, {kv_dim, layer_.kdim()});
    d["v_proj_weight"] = to_array(g.v_proj_weight, {kv_dim, layer_.vdim()});
    if (!g.in_proj_bias.empty()) d["in_proj_bias"] = to_array(g.in_proj_bias, {e + 2 * kv_dim});
    d["out_proj.weight"] = to_array(g.out_proj_weight, {e, e});
    if (!g.out_proj_bias.empty()) d["out_proj.bias"] = to_array(g.out_proj_bias, {e});
    d["query"] = to_array(g.query, {in.batch, in.seq_q, e});
    if (!g.key.empty()) d["key"] = to_array(g.key, {in.batch, in.seq_k, layer_.kdim()});
    if (!g.value.empty()) d["value"] = to_array(g.value, {in.batch, in.seq_k, layer_.vdim()});
    return d;
  }

 private:
  py::object context_object_;  // keeps the Context (and its device) alive while the layer lives
  MultiHeadAttention layer_;
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
             const std::optional<Bytes>& key_padding_mask, const OptionalFloats& attn_mask, const std::string& causal,
             bool need_weights, bool average_weights) {
            return layer.forward({query, key, value, key_padding_mask, attn_mask}, causal, need_weights,
                                 average_weights);
          },
          py::arg("query"), py::arg("key"), py::arg("value"), py::arg("key_padding_mask"), py::arg("attn_mask"),
          py::arg("causal"), py::arg("need_weights"), py::arg("average_weights"),
          "(out (batch, seq_q, E), weights or None); key and value None: self-attention. key_padding_mask "
          "(batch, seq_k) uint8, nonzero = ignore; attn_mask (seq_q, seq_k) float32, added.")
      .def(
          "backward",
          [](MhaLayer& layer, const Floats& query, const OptionalFloats& key, const OptionalFloats& value,
             const std::optional<Bytes>& key_padding_mask, const OptionalFloats& attn_mask, const std::string& causal,
             const Floats& grad_out) {
            return layer.backward({query, key, value, key_padding_mask, attn_mask}, causal, grad_out);
          },
          py::arg("query"), py::arg("key"), py::arg("value"), py::arg("key_padding_mask"), py::arg("attn_mask"),
          py::arg("causal"), py::arg("grad_out"),
          "Every gradient of one call as a dict of float32 arrays (the state_dict's names, query, key, value; "
          "out: the forward's output), from grad_out (batch, seq_q, E).");
}

}  // namespace vkattn::python
