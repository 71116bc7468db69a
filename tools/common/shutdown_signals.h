// ShutdownSignals: SIGTERM and SIGINT as a server process's request to
// stop (ps-server, ps-scheduler). Block() masks them in the calling thread
// before any other thread starts, so every thread inherits the mask and
// none is interrupted; Wait() then receives one, with sigwait, on the
// thread that shuts the server down.
//
// Thread-safety: Block() before any thread starts (it sets the calling
// thread's mask, which threads started later inherit); Wait() from one
// thread.
#ifndef PSDB_TOOLS_COMMON_SHUTDOWN_SIGNALS_H_
#define PSDB_TOOLS_COMMON_SHUTDOWN_SIGNALS_H_

#include <signal.h>

namespace psdb::tools {

class ShutdownSignals {
 public:
  // Blocks SIGTERM and SIGINT in the calling thread.
  static ShutdownSignals Block();

  // Blocks until SIGTERM or SIGINT arrives; returns its number.
  int Wait() const;

 private:
  ShutdownSignals() = default;
  sigset_t set_;
};

}  // namespace psdb::tools

#endif  // PSDB_TOOLS_COMMON_SHUTDOWN_SIGNALS_H_
