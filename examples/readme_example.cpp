#include <vkattn/vkattn.hpp>
#include <cmath>
#include <cstdio>
int main() {  // causal attention with GQA on the default device, checked against the fp64 CPU reference
  using namespace vkattn;
  Context ctx;  // the best device: a GPU, else lavapipe on the CPU; VKATTN_DEVICE=1 picks another
  const auto q_layout = TensorLayout::bhsd(DType::f32, 1, 8, 16, 64);   // batch, heads, queries, dim
  const auto kv_layout = TensorLayout::bhsd(DType::f32, 1, 2, 64, 64);  // 2 KV heads (GQA), 64 keys
  const size_t n = q_layout.element_count(), bytes = n * sizeof(float);  // Q, K, V and O alike here
  std::vector<float> q(n), k(n), v(n), o(n);
  for (size_t i = 0; i < n; ++i) q[i] = float(i % 7) / 2, k[i] = float(i % 5) / 4, v[i] = float(i % 3) - 1;
  Buffer qb = Buffer::allocate(ctx, bytes), kb = Buffer::allocate(ctx, bytes);
  Buffer vb = Buffer::allocate(ctx, bytes), ob = Buffer::allocate(ctx, bytes);
  qb.upload(q.data(), bytes);  kb.upload(k.data(), bytes);  vb.upload(v.data(), bytes);
  const AttentionArgs args{.q = {&qb, q_layout}, .k = {&kb, kv_layout}, .v = {&vb, kv_layout},
                           .out = {&ob, q_layout}, .options = {.causal = Causal::bottom_right}};
  attention(ctx, args);  // plans, runs and waits; throws vkattn::Error naming a bad argument
  ob.download(o.data(), bytes);
  const auto ref = reference::attention({.q_layout = q_layout, .k_layout = kv_layout, .v_layout = kv_layout,
                                         .q = q, .k = k, .v = v, .options = args.options});
  int bad = 0;  // outputs off by more than f32's tolerance
  for (size_t i = 0; i < n; ++i) bad += !(std::abs(o[i] - ref.out[i]) <= 1e-5);
  std::printf("%s: %d of %zu outputs off the fp64 reference\n", ctx.device_info().name.c_str(), bad, n);
  return bad != 0;
}
