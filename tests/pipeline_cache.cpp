// The pipeline cache file (ContextOptions::pipeline_cache_file, Context::save_pipeline_cache) and
// Context::prepare_pipelines: a saved cache loads into a new Context that computes bitwise the same
// results; a missing, garbage, truncated, foreign or raw-driver file is ignored, never an error; a
// save to an impossible path names it; prepare_pipelines builds what the default path then uses.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "support.hpp"
#include "temp_dir.hpp"

using namespace vkattn;
using namespace vkattn::test;

namespace {

namespace fs = std::filesystem;

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

// A Context of its own (the test is about what happens at creation), validated like the shared one.
struct OwnContext {
  std::mutex mutex;
  std::vector<std::string> messages;
  std::unique_ptr<Context> context;

  explicit OwnContext(const std::string& cache_file) {
    ContextOptions options;
    options.validation = validation_enabled();
    options.kernel = kernel_variant();
    options.pipeline_cache_file = cache_file;
    options.on_validation_message = [this](const std::string& message) {
      if (contains(message, "Loader Message")) return;  // the loader's notices (docs/devices.md)
      std::lock_guard lock(mutex);
      messages.push_back(message);
    };
    context = std::make_unique<Context>(options);
  }
  ~OwnContext() {
    context.reset();
    for (const std::string& m : messages) FAIL_CHECK("validation message: " << m);
  }
};

// f32 causal attention on fixed random inputs; checks O against the fp64 reference and returns it.
std::vector<float> run_small(Context& ctx) {
  const int64_t heads = 2, seq_q = 20, seq_k = 50, dim = 32;
  const TensorLayout q_layout = TensorLayout::bhsd(DType::f32, 1, heads, seq_q, dim);
  const TensorLayout kv_layout = TensorLayout::bhsd(DType::f32, 1, heads, seq_k, dim);
  std::mt19937_64 rng(case_seed(7100));
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  auto random = [&](const TensorLayout& l) {
    std::vector<float> x(static_cast<std::size_t>(l.element_count()));
    for (float& e : x) e = dist(rng);
    return x;
  };
  const std::vector<float> q = random(q_layout), k = random(kv_layout), v = random(kv_layout);
  auto upload = [&](const std::vector<float>& x) {
    Buffer b = Buffer::allocate(ctx, x.size() * 4);
    b.upload(x.data(), x.size() * 4);
    return b;
  };
  Buffer qb = upload(q), kb = upload(k), vb = upload(v);
  Buffer ob = Buffer::allocate(ctx, q.size() * 4);
  AttentionArgs args;
  args.q = {&qb, q_layout};
  args.k = {&kb, kv_layout};
  args.v = {&vb, kv_layout};
  args.out = {&ob, q_layout};
  args.options.causal = Causal::bottom_right;
  attention(ctx, args);
  std::vector<float> out(q.size());
  ob.download(out.data(), out.size() * 4);

  reference::Inputs in;
  in.q_layout = q_layout;
  in.k_layout = kv_layout;
  in.v_layout = kv_layout;
  in.q = q;
  in.k = k;
  in.v = v;
  in.options = args.options;
  const reference::Outputs ref = reference::attention(in);
  double max_err = 0.0;
  for (std::size_t i = 0; i < out.size(); ++i) max_err = std::max(max_err, std::fabs(out[i] - ref.out[i]));
  CHECK(max_err <= 1e-5);  // max|V| <= 1
  return out;
}

// The envelope's FNV-1a 64 (runtime/pipeline_cache.hpp documents the file format).
uint64_t fnv1a(const uint8_t* p, std::size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}
constexpr std::size_t kEnvelope = 32;  // magic, format version, reserved, payload size, payload hash

}  // namespace

TEST_SUITE("pipeline-cache") {
  TEST_CASE("a saved pipeline cache loads into a new Context, which computes bitwise the same results") {
    TempDir dir;
    const std::string path = dir.file("vkattn.cache");
    std::vector<float> first;
    {
      OwnContext own(path);  // no file yet: starts empty
      CHECK_FALSE(own.context->pipeline_cache_loaded());
      CHECK(contains(own.context->pipeline_cache_note(), "no pipeline cache file"));
      first = run_small(*own.context);
      CHECK(own.context->pipeline_count() > 0);
      own.context->save_pipeline_cache(path);
    }
    REQUIRE(fs::exists(path));
    CHECK(read_bytes(path).size() >= kEnvelope + sizeof(VkPipelineCacheHeaderVersionOne));
    for (const auto& entry : fs::directory_iterator(dir.path))  // the temporary file was renamed away
      CHECK_MESSAGE(entry.path().filename() == "vkattn.cache", "left behind: " << entry.path());
    {
      OwnContext own(path);
      CHECK_MESSAGE(own.context->pipeline_cache_loaded(), own.context->pipeline_cache_note());
      CHECK(contains(own.context->pipeline_cache_note(), "loaded"));
      const std::vector<float> second = run_small(*own.context);
      REQUIRE(second.size() == first.size());
      CHECK(std::memcmp(second.data(), first.data(), first.size() * 4) == 0);
      own.context->save_pipeline_cache(path);  // saving over an existing file replaces it
    }
    OwnContext again(path);
    CHECK(again.context->pipeline_cache_loaded());
  }

  TEST_CASE("a garbage, truncated, foreign-device or raw-driver cache file is ignored, not an error") {
    TempDir dir;
    const std::string good = dir.file("good.cache");
    std::vector<float> expected;
    {
      OwnContext own("");
      CHECK(own.context->pipeline_cache_note().empty());  // none named
      expected = run_small(*own.context);
      own.context->save_pipeline_cache(good);
    }
    const std::vector<uint8_t> bytes = read_bytes(good);
    REQUIRE(bytes.size() >= kEnvelope + sizeof(VkPipelineCacheHeaderVersionOne));

    struct Bad {
      const char* name;
      std::vector<uint8_t> bytes;
      const char* note;  // a part of Context::pipeline_cache_note()
    };
    std::vector<Bad> cases;
    std::mt19937 rng(7101);
    std::vector<uint8_t> garbage(4096);
    for (uint8_t& b : garbage) b = static_cast<uint8_t>(rng());
    cases.push_back({"garbage", garbage, "not a vkattn pipeline cache file"});
    cases.push_back({"empty", {}, "not a vkattn pipeline cache file"});
    cases.push_back({"truncated", std::vector<uint8_t>(bytes.begin(), bytes.end() - 1), "truncated or corrupt"});
    cases.push_back({"envelope only", std::vector<uint8_t>(bytes.begin(), bytes.begin() + kEnvelope), "truncated or corrupt"});
    std::vector<uint8_t> flipped = bytes;
    flipped.back() ^= 0x5a;
    cases.push_back({"one byte changed", flipped, "truncated or corrupt"});
    // What vkGetPipelineCacheData returned, saved by an application without the envelope.
    cases.push_back({"raw driver data", std::vector<uint8_t>(bytes.begin() + kEnvelope, bytes.end()), "not a vkattn"});
    // A whole, consistent file for another device: vendorID, deviceID or pipelineCacheUUID differ.
    // The payload hash is recomputed so that only the Vulkan header check can refuse it.
    for (const std::size_t field : {offsetof(VkPipelineCacheHeaderVersionOne, vendorID),
                                    offsetof(VkPipelineCacheHeaderVersionOne, deviceID),
                                    offsetof(VkPipelineCacheHeaderVersionOne, pipelineCacheUUID) + 7,
                                    offsetof(VkPipelineCacheHeaderVersionOne, headerVersion)}) {
      std::vector<uint8_t> foreign = bytes;
      foreign[kEnvelope + field] ^= 0x01;
      const uint64_t hash = fnv1a(foreign.data() + kEnvelope, foreign.size() - kEnvelope);
      std::memcpy(foreign.data() + 24, &hash, 8);
      cases.push_back({"foreign header", foreign, "another device or driver"});
    }
    for (const Bad& bad : cases) {
      CAPTURE(bad.name);
      const std::string path = dir.file("bad.cache");
      write_bytes(path, bad.bytes);
      OwnContext own(path);
      CHECK_FALSE(own.context->pipeline_cache_loaded());
      CHECK_MESSAGE(contains(own.context->pipeline_cache_note(), bad.note), own.context->pipeline_cache_note());
      const std::vector<float> out = run_small(*own.context);
      CHECK(std::memcmp(out.data(), expected.data(), expected.size() * 4) == 0);
      CHECK(read_bytes(path) == bad.bytes);  // vkattn never rewrites the application's file by itself
    }
    // A directory where the file should be is ignored too.
    OwnContext own(dir.path.string());
    CHECK_FALSE(own.context->pipeline_cache_loaded());
    CHECK_MESSAGE(contains(own.context->pipeline_cache_note(), "not a readable file"), own.context->pipeline_cache_note());
  }

  TEST_CASE("save_pipeline_cache to a path that cannot be written names the path") {
    TempDir dir;
    const std::string path = dir.file("no/such/directory/vkattn.cache");
    const std::string message = error_message([&] { context().save_pipeline_cache(path); });
    CHECK_MESSAGE(contains(message, path), message);
    CHECK(contains(message, "save_pipeline_cache"));
    CHECK(contains(error_message([&] { context().save_pipeline_cache(""); }), "empty"));
    expect_no_validation_messages();
  }

  TEST_CASE("save_pipeline_cache never replaces a device, FIFO or read-only file, and follows a symlink") {
    TempDir dir;
    // A FIFO: before, the rename turned it into a regular file. (A character device needs root to
    // make; the CLI's check_output_files.py covers that case with mknod.)
    const std::string fifo = dir.file("cache.fifo");
    REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
    std::string message = error_message([&] { context().save_pipeline_cache(fifo); });
    CHECK_MESSAGE(contains(message, "not a regular file"), message);
    CHECK(fs::is_fifo(fs::symlink_status(fifo)));
    // A read-only file keeps its contents, even for root (mode 0444 is a protection).
    const std::string readonly = dir.file("readonly.cache");
    std::ofstream(readonly) << "keep";
    fs::permissions(readonly, fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
    message = error_message([&] { context().save_pipeline_cache(readonly); });
    CHECK_MESSAGE(contains(message, "not writable"), message);
    std::ifstream in(readonly);
    CHECK(std::string(std::istreambuf_iterator<char>(in), {}) == "keep");
    // A symlink stays a link; its target gets the cache and keeps its mode.
    const std::string target = dir.file("target.cache"), link = dir.file("link.cache");
    std::ofstream(target) << "old";
    fs::permissions(target, fs::perms::owner_read | fs::perms::owner_write);
    fs::create_symlink(target, link);
    context().save_pipeline_cache(link);
    CHECK(fs::is_symlink(fs::symlink_status(link)));
    CHECK(fs::file_size(target) > 3);
    CHECK((fs::status(target).permissions() & fs::perms::all) == (fs::perms::owner_read | fs::perms::owner_write));
    // No temporary is left behind.
    int files = 0;
    for ([[maybe_unused]] const auto& entry : fs::directory_iterator(dir.path)) ++files;
    CHECK(files == 4);
    expect_no_validation_messages();
  }

  TEST_CASE("prepare_pipelines builds what the default path then uses for decode and prefill") {
    OwnContext own("");
    Context& ctx = *own.context;
    CHECK(contains(error_message([&] { ctx.prepare_pipelines(DType::f32, {577}); }), "577"));
    ctx.prepare_pipelines(DType::f32, {64});
    const std::size_t prepared = ctx.pipeline_count();
    CHECK(prepared >= 2);
    // Real shapes of the kinds prepared (GQA, longer sequences, causal): no new pipeline.
    // (Split calls and calls in one piece, which run other pipelines: {1, 3000} is split here,
    // {128, 128} and {1, 1} are not.)
    for (const auto& [seq_q, seq_k] : {std::pair<int64_t, int64_t>{1, 3000}, {128, 128}, {1, 1}}) {
      CAPTURE(seq_q);
      const TensorLayout q_layout = TensorLayout::bhsd(DType::f32, 2, 8, seq_q, 64);
      const TensorLayout kv_layout = TensorLayout::bhsd(DType::f32, 2, 2, seq_k, 64);
      Buffer q = Buffer::allocate(ctx, q_layout.element_count() * 4);
      Buffer kv = Buffer::allocate(ctx, kv_layout.element_count() * 4);
      Buffer out = Buffer::allocate(ctx, q_layout.element_count() * 4);
      std::vector<float> zeros(static_cast<std::size_t>(kv_layout.element_count()), 0.0f);
      kv.upload(zeros.data(), zeros.size() * 4);
      zeros.assign(static_cast<std::size_t>(q_layout.element_count()), 0.0f);
      q.upload(zeros.data(), zeros.size() * 4);
      AttentionArgs args;
      args.q = {&q, q_layout};
      args.k = {&kv, kv_layout};
      args.v = {&kv, kv_layout};
      args.out = {&out, q_layout};
      args.options.causal = Causal::bottom_right;
      attention(ctx, args);
      CHECK(ctx.pipeline_count() == prepared);
    }
  }
}
