// The validation plumbing itself: every GPU test trusts that a validation error would reach
// expect_no_validation_messages(). Make one on purpose and see it arrive.
#include <doctest/doctest.h>

#include <string>

#include "support.hpp"

using namespace vkattn;
using namespace vkattn::test;

TEST_SUITE("errors") {
  TEST_CASE("a validation error on the context's device reaches the test") {
    Context& ctx = context();
    if (!validation_enabled()) {
      MESSAGE("skipped: --no-validation");
      return;
    }
    expect_no_validation_messages();
    // size 0 is invalid (VUID-VkBufferCreateInfo-size-00912); the layer reports it and does not pass
    // the call on to the driver.
    VkBufferCreateInfo info{};
    info.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
    info.size = 0;
    info.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT;
    info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
    VkBuffer buffer = VK_NULL_HANDLE;
    const VkResult result = vkCreateBuffer(ctx.vk_device(), &info, nullptr, &buffer);
    if (result == VK_SUCCESS && buffer != VK_NULL_HANDLE) vkDestroyBuffer(ctx.vk_device(), buffer, nullptr);
    const std::vector<std::string> messages = take_validation_messages();
    CHECK_MESSAGE(!messages.empty(), "the validation layer is not reporting through the Context's callback");
    bool named = false;
    for (const std::string& m : messages) named = named || contains(m, "size");
    CHECK(named);
  }
}
