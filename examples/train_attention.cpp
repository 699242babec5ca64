// Training with vkattn: one multi-head self-attention layer and a linear head learn to reverse a
// short sequence of tokens. Each step runs the layer's forward and backward on the device
// (MultiHeadAttention::forward, ::backward); the head's forward and backward, the cross-entropy loss
// and Adam are plain C++ on the host; the new weights go back with set_weights.
//
//   train_attention [--steps N] [--every N] [--lr X] [--seed N]
//
// Token t at position i is embedded as emb[t] + pos[i] (fixed random tables, not trained); the
// target at position i is the token at position S-1-i, which the layer must fetch by position.
// Prints the loss on a fixed evaluation batch every N steps; exits 1 unless the final evaluation
// loss is below half the first.
#include <vkattn/vkattn.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

constexpr int64_t kVocab = 8, kSeq = 8, kEmbed = 32, kHeads = 2, kBatch = 16;

struct Options {
  int steps = 300, every = 25;
  float lr = 1e-2f;
  unsigned seed = 1;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--steps" && has_value) o.steps = std::atoi(argv[++i]);
    else if (a == "--every" && has_value) o.every = std::atoi(argv[++i]);
    else if (a == "--lr" && has_value) o.lr = std::strtof(argv[++i], nullptr);
    else if (a == "--seed" && has_value) o.seed = unsigned(std::atoi(argv[++i]));
    else {
      std::fprintf(stderr, "usage: train_attention [--steps N] [--every N] [--lr X] [--seed N]\n");
      std::exit(2);
    }
  }
  if (o.steps < 1 || o.every < 1 || !(o.lr > 0.0f)) {
    std::fprintf(stderr, "train_attention: --steps and --every must be >= 1 and --lr > 0\n");
    std::exit(2);
  }
  return o;
}

std::vector<float> normal(std::mt19937& rng, std::size_t n, float scale) {
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// Adam over one parameter array (its moments kept alongside).
struct Adam {
  std::vector<float> m, v;
  void step(std::vector<float>& w, const std::vector<float>& g, float lr, int t) {
    constexpr float b1 = 0.9f, b2 = 0.999f, eps = 1e-8f;
    if (m.empty()) m.assign(w.size(), 0.0f), v.assign(w.size(), 0.0f);
    const float c1 = 1.0f - std::pow(b1, float(t)), c2 = 1.0f - std::pow(b2, float(t));
    for (std::size_t i = 0; i < w.size(); ++i) {
      m[i] = b1 * m[i] + (1 - b1) * g[i];
      v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
      w[i] -= lr * (m[i] / c1) / (std::sqrt(v[i] / c2) + eps);
    }
  }
};

// A batch of random sequences: the layer's input (batch, seq, E) and the targets (reversed tokens).
struct Batch {
  std::vector<float> x;
  std::vector<int> target;
};

Batch make_batch(std::mt19937& rng, const std::vector<float>& emb, const std::vector<float>& pos) {
  Batch b;
  b.x.resize(std::size_t(kBatch * kSeq * kEmbed));
  b.target.resize(std::size_t(kBatch * kSeq));
  std::uniform_int_distribution<int> token(0, kVocab - 1);
  for (int64_t s = 0; s < kBatch; ++s) {
    int tokens[kSeq];
    for (int& t : tokens) t = token(rng);
    for (int64_t i = 0; i < kSeq; ++i) {
      b.target[std::size_t(s * kSeq + i)] = tokens[kSeq - 1 - i];
      for (int64_t e = 0; e < kEmbed; ++e)
        b.x[std::size_t((s * kSeq + i) * kEmbed + e)] = emb[std::size_t(tokens[i] * kEmbed + e)] + pos[std::size_t(i * kEmbed + e)];
    }
  }
  return b;
}

// The linear head on the layer's output y: logits = y·Whᵀ + bh, the mean cross-entropy over every
// position. With grads, also dL/dy, dL/dWh and dL/dbh.
struct Head {
  std::vector<float> w, b;  // (V, E), (V)
  float loss(const std::vector<float>& y, const std::vector<int>& target, std::vector<float>* dy = nullptr,
             std::vector<float>* dw = nullptr, std::vector<float>* db = nullptr) const {
    const int64_t rows = kBatch * kSeq;
    if (dy) dy->assign(y.size(), 0.0f), dw->assign(w.size(), 0.0f), db->assign(b.size(), 0.0f);
    double total = 0.0;
    for (int64_t r = 0; r < rows; ++r) {
      float logits[kVocab], top = -INFINITY;
      for (int64_t c = 0; c < kVocab; ++c) {
        float s = b[std::size_t(c)];
        for (int64_t e = 0; e < kEmbed; ++e) s += y[std::size_t(r * kEmbed + e)] * w[std::size_t(c * kEmbed + e)];
        logits[c] = s, top = std::max(top, s);
      }
      double sum = 0.0;
      for (float l : logits) sum += std::exp(double(l - top));
      const int t = target[std::size_t(r)];
      total += std::log(sum) - double(logits[t] - top);
      if (!dy) continue;
      for (int64_t c = 0; c < kVocab; ++c) {
        const float d = float((std::exp(double(logits[c] - top)) / sum - (c == t ? 1.0 : 0.0)) / double(rows));
        (*db)[std::size_t(c)] += d;
        for (int64_t e = 0; e < kEmbed; ++e) {
          (*dw)[std::size_t(c * kEmbed + e)] += d * y[std::size_t(r * kEmbed + e)];
          (*dy)[std::size_t(r * kEmbed + e)] += d * w[std::size_t(c * kEmbed + e)];
        }
      }
    }
    return float(total / double(rows));
  }
};

vkattn::MhaInputs inputs_of(const Batch& b) {
  vkattn::MhaInputs in;
  in.batch = kBatch, in.seq_q = kSeq, in.seq_k = kSeq;
  in.query = b.x;  // self-attention: key and value are the query
  return in;
}

}  // namespace

int main(int argc, char** argv) try {
  const Options o = parse(argc, argv);
  std::mt19937 rng(o.seed);
  const std::vector<float> emb = normal(rng, std::size_t(kVocab * kEmbed), 1.0f);
  const std::vector<float> pos = normal(rng, std::size_t(kSeq * kEmbed), 1.0f);

  vkattn::MhaWeights w;
  w.embed_dim = kEmbed, w.num_heads = kHeads;
  const float init = 1.0f / std::sqrt(float(kEmbed));
  w.q_proj_weight = normal(rng, std::size_t(kEmbed * kEmbed), init);
  w.k_proj_weight = normal(rng, std::size_t(kEmbed * kEmbed), init);
  w.v_proj_weight = normal(rng, std::size_t(kEmbed * kEmbed), init);
  w.out_proj_weight = normal(rng, std::size_t(kEmbed * kEmbed), init);
  w.in_proj_bias.assign(std::size_t(3 * kEmbed), 0.0f);
  w.out_proj_bias.assign(std::size_t(kEmbed), 0.0f);
  Head head{normal(rng, std::size_t(kVocab * kEmbed), init), std::vector<float>(std::size_t(kVocab), 0.0f)};

  vkattn::Context context;
  std::printf("device: %s\n", context.device_info().name.c_str());
  vkattn::MultiHeadAttention layer(context, w);

  const Batch eval = make_batch(rng, emb, pos);
  const auto evaluate = [&] { return head.loss(layer.forward(inputs_of(eval)).out, eval.target); };
  const float first = evaluate();
  std::printf("step %5d  eval loss %.4f\n", 0, first);

  Adam adam_q, adam_k, adam_v, adam_in_b, adam_o, adam_out_b, adam_hw, adam_hb;
  float last = first;
  for (int step = 1; step <= o.steps; ++step) {
    const Batch batch = make_batch(rng, emb, pos);
    const vkattn::MhaInputs in = inputs_of(batch);
    // The forward gives y; the head's loss gives dL/dy; the backward every gradient of the layer.
    const std::vector<float> y = layer.forward(in).out;
    std::vector<float> dy, dw, db;
    const float loss = head.loss(y, batch.target, &dy, &dw, &db);
    const vkattn::MhaBackwardResult g = layer.backward(in, dy);
    adam_q.step(w.q_proj_weight, g.q_proj_weight, o.lr, step);
    adam_k.step(w.k_proj_weight, g.k_proj_weight, o.lr, step);
    adam_v.step(w.v_proj_weight, g.v_proj_weight, o.lr, step);
    adam_in_b.step(w.in_proj_bias, g.in_proj_bias, o.lr, step);
    adam_o.step(w.out_proj_weight, g.out_proj_weight, o.lr, step);
    adam_out_b.step(w.out_proj_bias, g.out_proj_bias, o.lr, step);
    adam_hw.step(head.w, dw, o.lr, step);
    adam_hb.step(head.b, db, o.lr, step);
    layer.set_weights(w);
    if (step % o.every == 0 || step == o.steps) {
      last = evaluate();
      std::printf("step %5d  train loss %.4f  eval loss %.4f\n", step, loss, last);
    }
  }
  const bool learned = last < 0.5f * first;
  std::printf("%s: eval loss %.4f -> %.4f\n", learned ? "learned" : "did not learn", first, last);
  return learned ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "train_attention: %s\n", e.what());
  return 1;
}
