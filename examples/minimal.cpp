// The smallest complete use of vkattn: open a device, upload Q, K and V, run causal attention, and
// check the result against the library's fp64 CPU reference.
#include <vkattn/vkattn.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

int main() try {
  // batch 2, 4 query heads sharing 2 KV heads (GQA), 37 queries over 53 keys, head dim 40.
  const int64_t batch = 2, heads = 4, kv_heads = 2, seq_q = 37, seq_k = 53, dim = 40;
  const vkattn::DType dtype = vkattn::DType::f32;
  const auto q_layout = vkattn::TensorLayout::bhsd(dtype, batch, heads, seq_q, dim);
  const auto k_layout = vkattn::TensorLayout::bhsd(dtype, batch, kv_heads, seq_k, dim);
  const auto v_layout = vkattn::TensorLayout::bhsd(dtype, batch, kv_heads, seq_k, dim);
  const auto o_layout = vkattn::TensorLayout::bhsd(dtype, batch, heads, seq_q, dim);

  std::mt19937 rng(42);
  std::normal_distribution<float> normal;
  auto random = [&](const vkattn::TensorLayout& layout) {
    std::vector<float> values(static_cast<std::size_t>(layout.element_count()));
    for (float& x : values) x = normal(rng);
    return values;
  };
  const std::vector<float> q = random(q_layout), k = random(k_layout), v = random(v_layout);

  vkattn::Context context;  // the best device, or the one VKATTN_DEVICE names
  std::printf("device: %s\n", context.device_info().name.c_str());

  auto upload = [&](const std::vector<float>& values) {
    vkattn::Buffer buffer = vkattn::Buffer::allocate(context, values.size() * sizeof(float));
    buffer.upload(values.data(), values.size() * sizeof(float));
    return buffer;
  };
  vkattn::Buffer q_buf = upload(q), k_buf = upload(k), v_buf = upload(v);
  vkattn::Buffer o_buf = vkattn::Buffer::allocate(context, o_layout.element_count() * sizeof(float));

  vkattn::AttentionArgs args;
  args.q = {&q_buf, q_layout};
  args.k = {&k_buf, k_layout};
  args.v = {&v_buf, v_layout};
  args.out = {&o_buf, o_layout};
  // seq_q != seq_k, so say which causal alignment: bottom-right is the KV-cache convention (the
  // last query sees every key).
  args.options.causal = vkattn::Causal::bottom_right;
  vkattn::attention(context, args);

  std::vector<float> out(static_cast<std::size_t>(o_layout.element_count()));
  o_buf.download(out.data(), out.size() * sizeof(float));

  vkattn::reference::Inputs in;
  in.q_layout = q_layout;
  in.k_layout = k_layout;
  in.v_layout = v_layout;
  in.q = q;
  in.k = k;
  in.v = v;
  in.options = args.options;
  const vkattn::reference::Outputs expected = vkattn::reference::attention(in);

  // Normalised by max|V|, as the test suite does: O is a convex combination of V's rows.
  double max_v = 0.0, max_err = 0.0;
  for (float x : v) max_v = std::max(max_v, static_cast<double>(std::fabs(x)));
  for (std::size_t i = 0; i < out.size(); ++i) {
    const double err = std::fabs(out[i] - expected.out[i]) / max_v;
    max_err = std::isnan(err) ? INFINITY : std::max(max_err, err);
  }
  std::printf("max error (normalised by max|V|): %.3g\n", max_err);
  if (!(max_err <= 1e-5)) {
    std::printf("FAILED\n");
    return 1;
  }
  std::printf("ok\n");
  return 0;
} catch (const vkattn::Error& e) {
  std::fprintf(stderr, "minimal: %s\n", e.what());
  return 1;
}
