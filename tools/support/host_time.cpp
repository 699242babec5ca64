#include "host_time.hpp"

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "vkattn/error.hpp"

namespace vkattn::cli {
namespace {

void check(VkResult result, const char* call) {
  if (result != VK_SUCCESS) throw Error(std::string("host timing: ") + call + " failed (" + std::to_string(result) + ")");
}

// A command pool and one primary command buffer, destroyed on every path out.
class Recorder {
 public:
  explicit Recorder(Context& context) : device_(context.vk_device()) {
    VkCommandPoolCreateInfo pool_info{};
    pool_info.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
    pool_info.queueFamilyIndex = context.queue_family_index();
    check(vkCreateCommandPool(device_, &pool_info, nullptr, &pool_), "vkCreateCommandPool");
    VkCommandBufferAllocateInfo info{};
    info.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
    info.commandPool = pool_;
    info.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    info.commandBufferCount = 1;
    const VkResult r = vkAllocateCommandBuffers(device_, &info, &cmd_);
    if (r != VK_SUCCESS) {
      vkDestroyCommandPool(device_, pool_, nullptr);
      check(r, "vkAllocateCommandBuffers");
    }
  }
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;
  ~Recorder() { vkDestroyCommandPool(device_, pool_, nullptr); }

  VkCommandBuffer begin() {
    check(vkResetCommandPool(device_, pool_, 0), "vkResetCommandPool");
    VkCommandBufferBeginInfo begin{};
    begin.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
    begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    check(vkBeginCommandBuffer(cmd_, &begin), "vkBeginCommandBuffer");
    return cmd_;
  }
  void end() { check(vkEndCommandBuffer(cmd_), "vkEndCommandBuffer"); }

 private:
  VkDevice device_;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkCommandBuffer cmd_ = VK_NULL_HANDLE;
};

}  // namespace

HostTime time_recording(Context& context, const std::function<void(VkCommandBuffer)>& record_one, int rounds,
                        int calls_per_round) {
  Recorder recorder(context);
  std::vector<double> per_call;
  for (int r = 0; r < rounds; ++r) {
    const VkCommandBuffer cmd = recorder.begin();
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < calls_per_round; ++i) record_one(cmd);
    const auto stop = std::chrono::steady_clock::now();
    recorder.end();
    per_call.push_back(std::chrono::duration<double, std::micro>(stop - start).count() / calls_per_round);
  }
  HostTime t;
  t.rounds = rounds;
  t.calls_per_round = calls_per_round;
  t.per_round = per_call;
  std::sort(per_call.begin(), per_call.end());
  t.us_min = per_call.front();
  t.us_median = per_call[per_call.size() / 2];
  return t;
}

HostTime merge_rounds(const std::vector<HostTime>& parts) {
  if (parts.empty()) throw Error("host timing: no rounds");
  HostTime t;
  t.calls_per_round = parts.front().calls_per_round;
  for (const HostTime& p : parts) t.per_round.insert(t.per_round.end(), p.per_round.begin(), p.per_round.end());
  t.rounds = static_cast<int>(t.per_round.size());
  std::vector<double> sorted = t.per_round;
  std::sort(sorted.begin(), sorted.end());
  t.us_min = sorted.front();
  t.us_median = sorted[sorted.size() / 2];
  return t;
}

}  // namespace vkattn::cli
