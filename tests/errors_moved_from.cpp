// A moved-from Context or MultiHeadAttention holds nothing: every member function, and every function
// taking one, throws an Error saying so instead of dereferencing a null pointer.
#include <doctest/doctest.h>

#include <string>
#include <utility>
#include <vector>

#include <vkattn/testing.hpp>

#include "support.hpp"

using namespace vkattn;
using namespace vkattn::test;

namespace {

template <typename F>
void expect_moved_from(const char* what, const char* call, F&& f) {
  const ThrownError e = thrown_error(f);
  CHECK_MESSAGE(contains(e.message, what), call << ": " << e.message);
  CHECK_MESSAGE(e.code == code_name(ErrorCode::invalid_argument), call << ": code " << e.code);
}

}  // namespace

TEST_SUITE("errors") {
  TEST_CASE("a moved-from Context: every use is an Error") {
    ContextOptions options;
    options.validation = validation_enabled();
    options.kernel = kernel_variant();
    options.on_validation_message = [](const std::string& m) {
      if (!contains(m, "Loader Message")) FAIL_CHECK("validation message: " << m);
    };
    Context moved(options);
    Context live = std::move(moved);
    Buffer buffer = Buffer::allocate(live, 64), out = Buffer::allocate(live, 64);
    AttentionArgs args;
    args.q = args.k = args.v = {&buffer, TensorLayout::bhsd(DType::f32, 1, 1, 1, 4)};
    args.out = {&out, TensorLayout::bhsd(DType::f32, 1, 1, 1, 4)};

    constexpr const char* kWhat = "moved-from Context";
#define MOVED(call) expect_moved_from(kWhat, #call, [&] { (void)(call); })
    MOVED(moved.device_info());
    MOVED(moved.kernel_variant());
    MOVED(moved.vk_device());
    MOVED(moved.vk_physical_device());
    MOVED(moved.vk_queue());
    MOVED(moved.queue_family_index());
    MOVED(moved.prepare_pipelines(DType::f32, {}));
    MOVED(moved.save_pipeline_cache("unused.bin"));
    MOVED(moved.pipeline_cache_loaded());
    MOVED(moved.pipeline_cache_note());
    MOVED(moved.pipeline_count());
    MOVED(moved.memory_stats());
    MOVED(moved.reset_peak_memory());
    MOVED(moved.release_scratch());
    MOVED(Buffer::allocate(moved, 16));
    MOVED(Buffer::wrap(moved, buffer.handle(), 0, 16));
    MOVED(plan_attention(moved, args));
    MOVED(attention(moved, args));
    MOVED(record_attention(moved, VK_NULL_HANDLE, args));
    MOVED(time_attention(moved, {args}, 0, 1));
    MOVED(MultiHeadAttention(moved, constant_mha_weights()));
    MOVED(testing::set_fault_hook(moved, {}));
#undef MOVED

    // The Context it moved to works; assigning to the moved-from one makes it usable again.
    attention(live, args);
    moved = std::move(live);
    CHECK(moved.pipeline_count() > 0);
  }

  TEST_CASE("a moved-from MultiHeadAttention: every use is an Error") {
    Context& ctx = context();
    MultiHeadAttention moved(ctx, constant_mha_weights());
    const MultiHeadAttention live = std::move(moved);
    const std::vector<float> x(3 * 8, 0.5f);
    MhaInputs in;
    in.batch = 1, in.seq_q = 3, in.seq_k = 3;
    in.query = x;

    constexpr const char* kWhat = "moved-from MultiHeadAttention";
#define MOVED(call) expect_moved_from(kWhat, #call, [&] { (void)(call); })
    MOVED(moved.embed_dim());
    MOVED(moved.num_heads());
    MOVED(moved.kv_heads());
    MOVED(moved.kdim());
    MOVED(moved.vdim());
    MOVED(moved.dtype());
    MOVED(moved.forward(in));
#undef MOVED
    CHECK(live.embed_dim() == 8);
    expect_no_validation_messages();
  }
}
