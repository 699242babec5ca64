// Context parallelism: one long KV split between two devices. Each Context attends the same queries
// over its own half of the keys and keeps its log-sum-exp; the halves' (O, LSE) go to one Context,
// where merge_attention_states joins them into attention over every key (docs/api.md, "Merging
// attention states"). Checked against the fp64 reference of attention over all the keys. Here both
// Contexts open the default device (a machine with two GPUs would give each its own: ContextOptions::
// device); only O and LSE cross between them, never K or V.
#include <vkattn/vkattn.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

int main() try {
  // 8 query heads over 4 KV heads (GQA), 16 new queries at the end of 3000 keys, head dim 64.
  const int64_t heads = 8, kv_heads = 4, seq_q = 16, seq_k = 3000, dim = 64, split = 1700;
  const vkattn::DType dtype = vkattn::DType::f32;
  const auto q_layout = vkattn::TensorLayout::bhsd(dtype, 1, heads, seq_q, dim);
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  auto random = [&](int64_t n) {
    std::vector<float> values(static_cast<std::size_t>(n));
    for (float& x : values) x = normal(rng);
    return values;
  };
  const std::vector<float> q = random(heads * seq_q * dim), k = random(kv_heads * seq_k * dim), v = random(kv_heads * seq_k * dim);
  // Keys [first, first + count) of every KV head: what one device holds.
  auto keys = [&](const std::vector<float>& all, int64_t first, int64_t count) {
    std::vector<float> part;
    for (int64_t g = 0; g < kv_heads; ++g)
      part.insert(part.end(), all.begin() + (g * seq_k + first) * dim, all.begin() + (g * seq_k + first + count) * dim);
    return part;
  };
  auto upload = [](vkattn::Context& context, const std::vector<float>& values) {
    vkattn::Buffer buffer = vkattn::Buffer::allocate(context, values.size() * sizeof(float));
    buffer.upload(values.data(), values.size() * sizeof(float));
    return buffer;
  };
  auto download = [](const vkattn::Buffer& buffer, std::size_t count) {
    std::vector<float> values(count);
    buffer.download(values.data(), count * sizeof(float));
    return values;
  };
  const std::size_t out_values = static_cast<std::size_t>(heads * seq_q * dim), lse_values = static_cast<std::size_t>(heads * seq_q);

  // One device's share: attention over its keys, O and LSE brought back to the host.
  struct Partial {
    std::vector<float> out, lse;
  };
  auto attend = [&](vkattn::Context& context, int64_t first, int64_t count) {
    vkattn::Buffer q_buf = upload(context, q), k_buf = upload(context, keys(k, first, count)),
                   v_buf = upload(context, keys(v, first, count));
    vkattn::Buffer o_buf = vkattn::Buffer::allocate(context, out_values * sizeof(float));
    vkattn::Buffer lse_buf = vkattn::Buffer::allocate(context, lse_values * sizeof(float));
    vkattn::AttentionArgs args;
    args.q = {&q_buf, q_layout};
    args.k = {&k_buf, vkattn::TensorLayout::bhsd(dtype, 1, kv_heads, count, dim)};
    args.v = {&v_buf, vkattn::TensorLayout::bhsd(dtype, 1, kv_heads, count, dim)};
    args.out = {&o_buf, q_layout};
    args.lse = {&lse_buf, 0};  // what the merge weighs each part by
    vkattn::attention(context, args);
    return Partial{download(o_buf, out_values), download(lse_buf, lse_values)};
  };
  vkattn::Context first_device, second_device;
  const Partial a = attend(first_device, 0, split), b = attend(second_device, split, seq_k - split);

  // The merge, on the first device: the second's O and LSE uploaded there.
  vkattn::Buffer a_out = upload(first_device, a.out), a_lse = upload(first_device, a.lse);
  vkattn::Buffer b_out = upload(first_device, b.out), b_lse = upload(first_device, b.lse);
  vkattn::Buffer merged = vkattn::Buffer::allocate(first_device, out_values * sizeof(float));
  const vkattn::Buffer* parts_o[] = {&a_out, &b_out};
  const vkattn::BufferSlice parts_lse[] = {{&a_lse, 0}, {&b_lse, 0}};
  vkattn::merge_attention_states(first_device, {2, q_layout, q_layout, false}, {parts_o, parts_lse, &merged, {}});
  const std::vector<float> out = download(merged, out_values);

  vkattn::reference::Inputs in;
  in.q_layout = q_layout;
  in.k_layout = in.v_layout = vkattn::TensorLayout::bhsd(dtype, 1, kv_heads, seq_k, dim);
  in.q = q, in.k = k, in.v = v;
  const vkattn::reference::Outputs expected = vkattn::reference::attention(in);
  double max_v = 0.0, max_err = 0.0;
  for (float x : v) max_v = std::max(max_v, static_cast<double>(std::fabs(x)));
  for (std::size_t i = 0; i < out.size(); ++i) {
    const double err = std::fabs(out[i] - expected.out[i]) / max_v;
    max_err = std::isnan(err) ? INFINITY : std::max(max_err, err);
  }
  std::printf("devices: %s, %s\n", first_device.device_info().name.c_str(), second_device.device_info().name.c_str());
  std::printf("keys 0..%lld on the first, %lld..%lld on the second; merged, max error (normalised by max|V|): %.3g\n",
              static_cast<long long>(split - 1), static_cast<long long>(split), static_cast<long long>(seq_k - 1), max_err);
  if (!(max_err <= 1e-5)) {
    std::printf("FAILED\n");
    return 1;
  }
  std::printf("ok\n");
  return 0;
} catch (const vkattn::Error& e) {
  std::fprintf(stderr, "context_parallel: %s\n", e.what());
  return 1;
}
