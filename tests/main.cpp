// The test runner: doctest's own main, plus one flag of ours that must be known before the shared
// Context is created.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstring>
#include <vector>

#include "support.hpp"

int main(int argc, char** argv) {
  // --sync-validation: create the shared Context with synchronization validation. doctest would
  // reject an option it does not know, so strip it before handing argv on.
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::strcmp(argv[i], "--sync-validation") == 0) {
      vkattn::test::set_sync_validation(true);
    } else {
      args.push_back(argv[i]);
    }
  }
  doctest::Context context;
  context.applyCommandLine(static_cast<int>(args.size()), args.data());
  const int result = context.run();
  vkattn::test::shutdown();  // destroy the shared Context before static destructors run
  return result;
}
