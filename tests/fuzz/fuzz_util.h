// What the libFuzzer targets of tests/fuzz/ share: a scratch directory that
// lives as long as the fuzzing process, the check that turns a broken
// invariant into a crash libFuzzer records, and the framing of inputs that
// carry a sequence of RPC requests.
//
// Thread-safety: FuzzScratchDir() is called from LLVMFuzzerInitialize or the
// first run (one thread); the rest are pure functions.
#ifndef PSDB_TESTS_FUZZ_FUZZ_UTIL_H_
#define PSDB_TESTS_FUZZ_FUZZ_UTIL_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace psdb::fuzz {

// A fresh directory under $TMPDIR (or /tmp), removed when the process exits
// normally; the same one on every call.
const std::string& FuzzScratchDir();

// A broken invariant: prints `what` and aborts, so libFuzzer keeps the input
// as a crash (a failing Status alone is not one: every target expects
// errors).
[[noreturn]] void InvariantFailed(absl::string_view what);
#define PSDB_FUZZ_CHECK(cond, what)                                  \
  do {                                                               \
    if (!(cond))                                                     \
      ::psdb::fuzz::InvariantFailed(std::string(#cond " failed: ") + \
                                    std::string(what));              \
  } while (0)

// One request of a request-sequence input: which handler, and its bytes.
struct FramedRequest {
  uint8_t handler = 0;
  absl::string_view bytes;
};

// Splits an input into requests: each is one byte naming the handler, two
// bytes (little-endian) of length, then that many bytes (fewer if the input
// ends first). At most `max_requests` are returned.
std::vector<FramedRequest> SplitRequests(const uint8_t* data, size_t size,
                                         size_t max_requests);
// The inverse, for seeds: appends one framed request to *out.
void AppendRequest(uint8_t handler, absl::string_view bytes, std::string* out);

}  // namespace psdb::fuzz

#endif  // PSDB_TESTS_FUZZ_FUZZ_UTIL_H_
