#pragma once
// How the ranks of a run find each other (used by the Communicator only):
// the c10d store every rank joins, and the network devices Gloo connects
// its pairs over.
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <c10/util/intrusive_ptr.h>

#include "distributed/world.h"

namespace c10d {
class Store;
}
namespace gloo::transport {
class Device;
}

namespace trainyard::host {

/// The rendezvous store: a FileStore (world.rendezvous == "file") or a
/// TCPStore served by rank 0 (or torchrun's agent); waits for every rank up
/// to `timeout`. Throws ConfigError/Error naming the real cause (a port in
/// use, an unreachable master, ranks that never came, a killed run's file).
c10::intrusive_ptr<c10d::Store> open_store(const World& world, std::chrono::milliseconds timeout);

/// The interfaces Gloo's pairs use: GLOO_SOCKET_IFNAME's, loopback for a
/// one-node run, the route to the master for a TCP rendezvous, else the
/// host name's address. `described` says which, for the start-up line.
std::vector<std::shared_ptr<::gloo::transport::Device>> gloo_devices(const World& world, std::string& described);

}  // namespace trainyard::host
