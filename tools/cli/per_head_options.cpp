#include "per_head_options.hpp"

#include <CLI/CLI.hpp>

#include <cmath>

#include "npy.hpp"
#include "run_inputs.hpp"
#include "vkattn/error.hpp"

namespace vkattn::cli {

namespace {

// What each tensor's option reads: `vkattn run`'s file and `vkattn bench`'s flag.
struct OptionHelp {
  const char* file;
  const char* flag;
};

OptionHelp help(PerHeadTensor t) {
  if (t == PerHeadTensor::alibi)
    return {"ALiBi slopes: (heads,) or (batch, heads) '<f4'; bias -slope*|i+off-j|", "ALiBi with slopes 2^(-8(h+1)/H)"};
  return {"Attention-sink logits: (heads,) '<f4', in each row's softmax denominator without a value",
          "An attention-sink logit per head"};
}

std::vector<float> fixed_values(PerHeadTensor t, int64_t heads) {
  std::vector<float> s(static_cast<std::size_t>(heads));
  for (int64_t h = 0; h < heads; ++h) {
    s[static_cast<std::size_t>(h)] =
        t == PerHeadTensor::alibi
            ? static_cast<float>(std::exp2(-8.0 * static_cast<double>(h + 1) / static_cast<double>(heads)))
            : 0.25f * static_cast<float>(h % 5) - 0.5f;
  }
  return s;
}

}  // namespace

const char* per_head_bench_label(PerHeadTensor tensor) {
  return tensor == PerHeadTensor::alibi ? "ALiBi (slopes 2^(-8(h+1)/H))" : "sinks";
}

std::string per_head_option(PerHeadTensor tensor) { return std::string("--") + to_string(tensor); }

void add_per_head_files(CLI::App* app, PerHead<std::string>* files) {
  for (PerHeadTensor t : kPerHeadTensors) app->add_option(per_head_option(t), (*files)[t], help(t).file);
}

void add_per_head_flags(CLI::App* app, PerHead<bool>* given) {
  for (PerHeadTensor t : kPerHeadTensors) app->add_flag(per_head_option(t), (*given)[t], help(t).flag);
}

void append_per_head_files(const PerHead<std::string>& files, FlagPaths& inputs) {
  for (PerHeadTensor t : kPerHeadTensors) inputs.emplace_back(per_head_option(t), files[t]);
}

HeadValues load_head_values(const std::string& path, PerHeadTensor tensor, int64_t batch, int64_t heads) {
  const bool per_batch_allowed = allows_batch_rows(tensor);
  const std::string what = per_head_option(tensor) + " (" + path + ")";
  const npy::Array array = npy::read(path);
  if (array.kind != npy::Kind::f32)
    throw Error(what + ": dtype '" + array.descr + "' is not supported; use float32 ('<f4')");
  const std::string shapes = "(heads,) = (" + std::to_string(heads) + ",)" +
                             (per_batch_allowed ? " or (batch, heads) = (" + std::to_string(batch) + ", " +
                                                      std::to_string(heads) + ")"
                                                : std::string());
  const auto& s = array.shape;
  const bool per_head = s.size() == 1 && s[0] == heads;
  const bool per_batch = per_batch_allowed && s.size() == 2 && s[0] == batch && s[1] == heads;
  if (!per_head && !per_batch) throw Error(what + ": shape " + array.shape_string() + " must be " + shapes);
  HeadValues h;
  h.layout = HeadValuesLayout{per_batch ? batch : 1, heads, 0};
  h.values = npy::to_floats(array, path);
  for (std::size_t i = 0; i < h.values.size(); ++i)
    if (!std::isfinite(h.values[i]))
      throw Error(what + ": value " + std::to_string(i) + " is not finite (" + std::to_string(h.values[i]) + ")");
  return h;
}

PerHeadInputs PerHeadInputs::load(const PerHead<std::string>& files, int64_t batch, int64_t heads,
                                  PerHeadLayouts& layouts) {
  PerHeadInputs in;
  for (PerHeadTensor t : kPerHeadTensors) {
    if (files[t].empty()) continue;
    in.tensors[t] = load_head_values(files[t], t, batch, heads);
    layouts[t] = in.tensors[t]->layout;
  }
  return in;
}

PerHeadInputs PerHeadInputs::fixed(const PerHead<bool>& given, int64_t heads) {
  PerHeadInputs in;
  for (PerHeadTensor t : kPerHeadTensors)
    if (given[t]) in.tensors[t] = HeadValues{HeadValuesLayout{1, heads, 0}, fixed_values(t, heads)};
  return in;
}

PerHeadValues PerHeadInputs::reference() const {
  PerHeadValues r;
  for (PerHeadTensor t : kPerHeadTensors) {
    if (!tensors[t]) continue;
    r.layout(t) = tensors[t]->layout;
    r.values(t) = tensors[t]->values;
  }
  return r;
}

PerHead<const Buffer*> PerHeadInputs::upload(Context& context, PerHead<std::optional<Buffer>>& storage) const {
  PerHead<const Buffer*> buffers;
  for (PerHeadTensor t : kPerHeadTensors) {
    if (!tensors[t]) continue;
    buffers[t] = &storage[t].emplace(upload_encoded(context, DType::f32, tensors[t]->values));
  }
  return buffers;
}

}  // namespace vkattn::cli
