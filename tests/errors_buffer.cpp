// Buffer sizes and offsets at the edges of 64 bits, and null host pointers: each is an Error naming
// the call and the values, never a wild write or a crash inside the driver.
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "support.hpp"

using namespace vkattn;
using namespace vkattn::test;

TEST_SUITE("errors") {
  TEST_CASE("Buffer::wrap: a range that overflows or exceeds the VkBuffer") {
    Context& ctx = context();
    const Buffer owner = Buffer::allocate(ctx, 64);  // any VkBuffer of this device serves
    const VkBuffer handle = owner.handle();
    std::string m = error_message([&] { Buffer::wrap(ctx, handle, UINT64_MAX - 4, 16); });
    CHECK_MESSAGE(contains(m, "buffer.wrap: offset (18446744073709551611) + size (16) overflows"), m);
    m = error_message([&] { Buffer::wrap(ctx, handle, 0, UINT64_MAX); });
    CHECK_MESSAGE(contains(m, "buffer.wrap: range [0, 18446744073709551615) exceeds the VkBuffer"), m);
    m = error_message([&] { Buffer::wrap(ctx, handle, 1 << 20, 16); });
    CHECK_MESSAGE(contains(m, "exceeds the VkBuffer"), m);
    // Within the buffer: accepted.
    const Buffer view = Buffer::wrap(ctx, handle, 16, 48);
    CHECK(view.size() == 48);
    expect_no_validation_messages();
  }

  TEST_CASE("Buffer::allocate: a size whose rounding to 16 bytes would wrap") {
    Context& ctx = context();
    for (const uint64_t bytes : {UINT64_MAX, UINT64_MAX - 14}) {
      const std::string m = error_message([&] { Buffer b = Buffer::allocate(ctx, bytes); });
      CHECK_MESSAGE(contains(m, std::to_string(bytes) + " bytes overflow 64 bits"), m);
    }
    CHECK(ctx.memory_stats().current_bytes > 0);  // and the Context still works
    Buffer b = Buffer::allocate(ctx, 16);
    b.fill(7);
    expect_no_validation_messages();
  }

  TEST_CASE("Buffer::upload / download: a null host pointer") {
    Context& ctx = context();
    Buffer b = Buffer::allocate(ctx, 64);
    b.fill(0x33);
    CHECK(contains(error_message([&] { b.upload(nullptr, 16); }), "buffer.upload: data is null for 16 bytes"));
    CHECK(contains(error_message([&] { b.download(nullptr, 16); }), "buffer.download: data is null for 16 bytes"));
    CHECK_NOTHROW(b.upload(nullptr, 0));
    CHECK_NOTHROW(b.download(nullptr, 0));
    std::vector<uint8_t> bytes(64);
    b.download(bytes.data(), bytes.size());
    CHECK(bytes == std::vector<uint8_t>(64, 0x33));  // untouched
    // Ranges past the end, with offsets near 2^64.
    CHECK(contains(error_message([&] { b.upload(bytes.data(), 16, UINT64_MAX - 8); }), "exceeds the buffer size"));
    CHECK(contains(error_message([&] { b.fill(1, 8, UINT64_MAX - 4); }), "exceeds the buffer size"));
    expect_no_validation_messages();
  }
}
