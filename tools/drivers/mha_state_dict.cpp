#include "mha_state_dict.hpp"

#include <initializer_list>
#include <vector>

#include "npy_header.hpp"
#include "npz.hpp"
#include "vkattn/error.hpp"

namespace vkattn::cli {
namespace {

// torch's names, then the per-head weights' (per_head_weight_name).
std::vector<std::string> known_names_list() {
  std::vector<std::string> names = {"in_proj_weight", "q_proj_weight",   "k_proj_weight", "v_proj_weight",
                                    "in_proj_bias",   "out_proj.weight", "out_proj.bias"};
  for (PerHeadTensor t : kPerHeadTensors) names.emplace_back(per_head_weight_name(t));
  return names;
}

std::string known_names() {
  std::string s;
  for (const std::string& name : known_names_list()) s += (s.empty() ? "" : ", ") + name;
  return s;
}

std::string shape_string(std::initializer_list<int64_t> dims) {
  std::string s(1, '(');
  for (const int64_t d : dims) {
    if (s.size() > 1) s += ", ";
    s += std::to_string(d);
  }
  s += dims.size() == 1 ? ",)" : ")";  // numpy's spelling, as npy::Array::shape_string writes it
  return s;
}

class StateDict {
 public:
  explicit StateDict(const std::string& path) : path_(path), arrays_(npz::read(path, [&](const std::string& name) {
    check_name(path, name);
  })) {}

  // Before anything is inflated (npz::NameCheck): an unexpected member costs nothing.
  static void check_name(const std::string& path, const std::string& name) {
    bool known = false;
    for (const std::string& k : known_names_list()) known = known || name == k;
    if (name == "bias_k" || name == "bias_v")
      throw Error(path + ": holds '" + name + "': layers built with add_bias_kv=True are not supported");
    if (!known)
      throw Error(path + ": unexpected array '" + npy::printable(name) + "' (a nn.MultiheadAttention state_dict holds " +
                  known_names() + ")");
  }

  bool has(const std::string& name) const { return arrays_.count(name) > 0; }

  const npy::Array& get(const std::string& name, const std::string& why) const {
    const auto it = arrays_.find(name);
    if (it == arrays_.end()) throw Error(path_ + ": missing array '" + name + "'" + why);
    return it->second;
  }

  // The array as floats, after checking its shape is exactly `dims`; `meaning` says where the
  // expected sizes come from ("(3·E, E) with E = 8").
  std::vector<float> floats(const std::string& name, std::initializer_list<int64_t> dims, const std::string& meaning,
                            const std::string& why = {}) const {
    const npy::Array& array = get(name, why);
    if (array.shape != std::vector<int64_t>(dims))
      throw Error(path_ + ": " + name + " has shape " + array.shape_string() + ", expected " + shape_string(dims) +
                  " = " + meaning);
    return npy::to_floats(array, path_ + ": " + name);
  }

  const std::string& path() const { return path_; }

 private:
  std::string path_;
  npz::Arrays arrays_;
};

}  // namespace

MhaWeights load_mha_state_dict(const std::string& path, int64_t heads, int64_t kv_heads) {
  const StateDict dict(path);
  const auto str = [](int64_t v) { return std::to_string(v); };

  // E: from out_proj.weight, the one array both layouts share.
  const npy::Array& out_w = dict.get("out_proj.weight", " (it gives the embed dim E)");
  if (out_w.shape.size() != 2 || out_w.shape[0] != out_w.shape[1] || out_w.shape[0] < 1)
    throw Error(path + ": out_proj.weight has shape " + out_w.shape_string() + ", expected (E, E)");
  const int64_t E = out_w.shape[0];
  if (heads < 1) throw Error("--heads (" + str(heads) + ") must be >= 1");
  if (E % heads != 0)
    throw Error("embed dim E = " + str(E) + " (from " + path + ": out_proj.weight) is not divisible by --heads " +
                str(heads));
  const int64_t D = E / heads;

  MhaWeights w;
  w.embed_dim = E;
  w.num_heads = heads;
  const bool packed = dict.has("in_proj_weight");
  if (packed) {
    for (const char* name : {"q_proj_weight", "k_proj_weight", "v_proj_weight"})
      if (dict.has(name))
        throw Error(path + ": holds both in_proj_weight and " + std::string(name) +
                    "; a state_dict has one or the other");
    if (kv_heads != 0 && kv_heads != heads)
      throw Error("--kv-heads " + str(kv_heads) + " != --heads " + str(heads) + ": " + path +
                  " packs equal q/k/v projections in in_proj_weight; fewer KV heads need q_proj_weight, "
                  "k_proj_weight and v_proj_weight");
    const std::vector<float> in_w = dict.floats("in_proj_weight", {3 * E, E}, "(3·E, E) with E = " + str(E));
    const auto ee = static_cast<std::ptrdiff_t>(E * E);
    w.q_proj_weight.assign(in_w.begin(), in_w.begin() + ee);
    w.k_proj_weight.assign(in_w.begin() + ee, in_w.begin() + 2 * ee);
    w.v_proj_weight.assign(in_w.begin() + 2 * ee, in_w.end());
    w.kv_heads = heads;
    w.kdim = w.vdim = E;
  } else {
    if (!dict.has("q_proj_weight") && !dict.has("k_proj_weight") && !dict.has("v_proj_weight"))
      throw Error(path + ": missing array 'in_proj_weight' (or, for kdim/vdim != E or fewer KV heads, "
                  "q_proj_weight, k_proj_weight and v_proj_weight)");
    const std::string why = " (no in_proj_weight: the separate q/k/v layout needs q_proj_weight, k_proj_weight "
                            "and v_proj_weight)";
    const npy::Array& k = dict.get("k_proj_weight", why);
    const npy::Array& v = dict.get("v_proj_weight", why);
    dict.get("q_proj_weight", why);
    if (k.shape.size() != 2) throw Error(path + ": k_proj_weight has shape " + k.shape_string() + ", expected 2-D");
    if (v.shape.size() != 2) throw Error(path + ": v_proj_weight has shape " + v.shape_string() + ", expected 2-D");
    // kv_heads from k_proj_weight's rows (kv_heads · head dim) unless given.
    const bool inferred = kv_heads == 0;
    if (inferred) {
      if (k.shape[0] % D != 0 || k.shape[0] < D)
        throw Error(path + ": k_proj_weight has " + str(k.shape[0]) + " rows, not a multiple of the head dim " +
                    str(D) + " (E " + str(E) + " / heads " + str(heads) + ")");
      kv_heads = k.shape[0] / D;
    }
    if (kv_heads < 1 || heads % kv_heads != 0)
      throw Error("--heads " + str(heads) + " is not divisible by " +
                  (inferred ? "the " + str(kv_heads) + " KV heads of k_proj_weight" : "--kv-heads " + str(kv_heads)));
    const int64_t KVD = kv_heads * D;
    const std::string kv_meaning = "(kv_heads·E/H, ...) with kv_heads = " + str(kv_heads) + ", E = " + str(E) +
                                   ", H = " + str(heads);
    w.kv_heads = kv_heads;
    w.kdim = k.shape[1];
    w.vdim = v.shape[1];
    w.q_proj_weight = dict.floats("q_proj_weight", {E, E}, "(E, E) with E = " + str(E));
    w.k_proj_weight = dict.floats("k_proj_weight", {KVD, w.kdim}, kv_meaning);
    w.v_proj_weight = dict.floats("v_proj_weight", {KVD, w.vdim}, kv_meaning);
  }
  w.out_proj_weight = npy::to_floats(out_w, path + ": out_proj.weight");

  // bias=False drops both biases; one without the other is a broken (or mistyped) state_dict.
  const bool in_bias = dict.has("in_proj_bias"), out_bias = dict.has("out_proj.bias");
  if (in_bias != out_bias)
    throw Error(path + ": has " +
                (in_bias ? "in_proj_bias but no out_proj.bias" : "out_proj.bias but no in_proj_bias") +
                " (a layer has both biases or neither)");
  w.bias = in_bias;
  if (w.bias) {
    const int64_t n = E + 2 * w.kv_heads * D;
    w.in_proj_bias = dict.floats("in_proj_bias", {n}, "(E + 2·kv_heads·E/H) with E = " + str(E) + ", kv_heads = " +
                                                         str(w.kv_heads) + ", H = " + str(heads));
    w.out_proj_bias = dict.floats("out_proj.bias", {E}, "(E) with E = " + str(E));
  }
  // The score modifiers that are weights of the layer: one f32 value per head each, or absent.
  for (PerHeadTensor t : kPerHeadTensors) {
    const char* name = per_head_weight_name(t);
    if (dict.has(name)) w.per_head_weight(t) = dict.floats(name, {heads}, "(H) with H = " + str(heads) + " (one per head)");
  }
  return w;
}

}  // namespace vkattn::cli
