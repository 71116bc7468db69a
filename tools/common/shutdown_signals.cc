#include "tools/common/shutdown_signals.h"

#include <pthread.h>

namespace psdb::tools {

ShutdownSignals ShutdownSignals::Block() {
  ShutdownSignals signals;
  sigemptyset(&signals.set_);
  sigaddset(&signals.set_, SIGTERM);
  sigaddset(&signals.set_, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals.set_, nullptr);
  return signals;
}

int ShutdownSignals::Wait() const {
  int signal_number = 0;
  sigwait(&set_, &signal_number);
  return signal_number;
}

}  // namespace psdb::tools
