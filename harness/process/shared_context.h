// One GPU context for all of a CUDA kernel's lanes: a private MPS control daemon (NVIDIA's
// Multi-Process Service) that this run starts in a directory of its own and quits when it ends.
//
// Why: each lane is a process, and without MPS each process has a CUDA context of its own, which
// the GPU runs in turns ("Without MPS, when processes share the GPU their scheduling resources
// must be swapped on and off the GPU", https://docs.nvidia.com/deploy/mps/when-to-use-mps.html).
// Small and medium cases spend most of their GPU time waiting for their turn; under one MPS
// server the lanes' work runs side by side.
//
// The price: a fatal fault of one client (an illegal address, a trap) is reported to every client
// of that GPU, without saying which one caused it, and the server refuses new clients until all of
// them have exited (the same documentation, "Memory Protection and Error Containment"). The suite
// therefore reruns every case that ends with a lost context under the shared context alone, in a
// process with a context of its own, before it is reported (harness/engine/suite.cc), and the
// kernel's remaining cases leave the shared context.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace nvfp4 {

// --shared-context: automatic (MPS when it can start, a CUDA kernel has two lanes or more on a
// GPU, and the environment names no MPS of its own), mps (the same, but a daemon that cannot
// start is an error), off (a context per lane, as without MPS).
enum class SharedContextMode { automatic, mps, off };
// "auto", "mps", "off"; parse returns false for anything else.
const char* to_string(SharedContextMode m);
bool parse_shared_context(const std::string& text, SharedContextMode* out);

class SharedContext {
 public:
  // Starts a private MPS control daemon (nvidia-cuda-mps-control -d, found on PATH) with its pipe
  // and log directories in a new directory under TMPDIR; nullptr with *why_not set when it cannot
  // (no such program, it failed to start, or the environment already names an MPS pipe
  // directory). The daemon is quit and its directory removed when this object is destroyed, or,
  // should this process die first, by a watcher process that outlives it.
  static std::unique_ptr<SharedContext> start(std::string* why_not);
  ~SharedContext();
  SharedContext(const SharedContext&) = delete;
  SharedContext& operator=(const SharedContext&) = delete;

  // The environment that makes a CUDA process a client of this daemon.
  std::vector<std::pair<std::string, std::string>> client_env() const;
  const std::string& directory() const { return dir_; }

 private:
  SharedContext() = default;
  std::string dir_;
  int watcher_fd_ = -1;  // the write end of the watcher's pipe: closing it quits the daemon
  pid_t watcher_ = -1;
};

// Whether a process started now would join an MPS server anyway (CUDA_MPS_PIPE_DIRECTORY set in
// this environment): the suite then starts none of its own.
bool environment_names_mps();

}  // namespace nvfp4
