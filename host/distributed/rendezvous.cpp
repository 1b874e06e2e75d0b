// How the ranks of a run find each other: the rendezvous store (TCP or a
// shared file) and the network interface Gloo's pairs use.
#include "distributed/rendezvous.h"

#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <arpa/inet.h>
#include <net/if.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <thread>

#include "trainyard/error.h"

namespace trainyard::host {

namespace {
std::string endpoint(const World& world) { return world.master_addr + ":" + std::to_string(world.master_port); }
}  // namespace

// The rendezvous store, with the real cause when it cannot be made: a port
// in use, a master that cannot be reached, ranks that never came, a file a
// killed run left behind.
c10::intrusive_ptr<c10d::Store> open_store(const World& world, std::chrono::milliseconds timeout) {
  const std::string secs = std::to_string(timeout.count() / 1000) + " s (distributed.timeout_secs)";
  if (world.rendezvous == "file") {
    auto store = c10::make_intrusive<c10d::FileStore>(world.rendezvous_file, world.world_size);
    store->setTimeout(timeout);
    // FileStore keeps every key a run ever set, and a killed run never
    // removes its file: more joins than ranks means a previous run's file.
    const int64_t joined = store->add("trainyard/joined", 1);
    if (joined > world.world_size)
      throw ConfigError("distributed.rendezvous_file " + world.rendezvous_file +
                            " holds an earlier run's rendezvous (" + std::to_string(joined) + " joins for a world of " +
                            std::to_string(world.world_size) + ")",
                        "expected a file that no other run uses; a killed run leaves its file behind",
                        "delete it before launching, or give each run its own file");
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (int64_t now = joined; now < world.world_size; now = store->add("trainyard/joined", 0)) {
      if (std::chrono::steady_clock::now() > deadline)
        throw Error("distributed rendezvous: " + std::to_string(now) + " of " + std::to_string(world.world_size) +
                    " ranks joined " + world.rendezvous_file + " within " + secs +
                    ": the others were not started or see another file (is it on a file system every rank shares? "
                    "a file left by a killed run also counts its ranks: delete it and relaunch)");
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return store;
  }
  c10d::TCPStoreOptions options;
  options.port = static_cast<uint16_t>(world.master_port);
  options.isServer = world.rank == 0 && !world.agent_store;  // torchrun's agent may serve it already
  options.numWorkers = world.world_size;
  options.waitWorkers = true;
  options.timeout = timeout;
  try {
    c10::intrusive_ptr<c10d::Store> store = c10::make_intrusive<c10d::TCPStore>(world.master_addr, options);
    // Keys of an attempt torchrun restarted (Gloo's addresses of dead ranks
    // among them) stay in its agent's store: each attempt has its own.
    if (world.attempt > 0)
      store = c10::make_intrusive<c10d::PrefixStore>("attempt-" + std::to_string(world.attempt), store);
    store->setTimeout(timeout);
    return store;
  } catch (const c10::DistError& e) {
    const std::string why = e.what_without_backtrace();
    if (options.isServer &&
        (why.find("EADDRINUSE") != std::string::npos || why.find("already in use") != std::string::npos))
      throw ConfigError(
          "distributed: rank 0 cannot listen on port " + std::to_string(world.master_port) +
              ": the port is in use (another run, or another program, holds it)",
          "expected a free port for rank 0's store",
          "give another --master-port (or MASTER_PORT, or distributed.master_port), or stop what holds it");
    if (options.isServer)
      throw Error("distributed rendezvous: rank 0 waited " + secs + " at " + endpoint(world) +
                  " for the other ranks, who did not all come: they were not started, or cannot reach " +
                  endpoint(world) + " (a wrong --master-addr, or a firewall) (" + why + ")");
    throw Error("distributed rendezvous: rank " + std::to_string(world.rank) + " could not reach the store at " +
                endpoint(world) + " within " + secs + ": rank 0 was not started or failed, the address is wrong, " +
                "or a firewall blocks the port (" + why + ")");
  }
}

namespace {

std::string interface_names() {
  std::string names;
  if (struct if_nameindex* all = if_nameindex()) {
    for (auto* i = all; i->if_index != 0; ++i) names += (names.empty() ? "" : ", ") + std::string(i->if_name);
    if_freenameindex(all);
  }
  return names;
}

// The local address a connection to `host` would leave from (the routing
// table's choice); empty when `host` does not resolve.
std::string route_source(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), "9", &hints, &found) != 0 || !found) return "";
  std::string out;
  const int fd = ::socket(found->ai_family, SOCK_DGRAM, 0);
  sockaddr_storage local{};
  socklen_t length = sizeof local;
  // connect() on a datagram socket sends nothing: it only picks the route.
  if (fd >= 0 && ::connect(fd, found->ai_addr, found->ai_addrlen) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) == 0) {
    char text[INET6_ADDRSTRLEN] = {};
    const void* where = local.ss_family == AF_INET
                            ? static_cast<const void*>(&reinterpret_cast<sockaddr_in&>(local).sin_addr)
                            : static_cast<const void*>(&reinterpret_cast<sockaddr_in6&>(local).sin6_addr);
    if (inet_ntop(local.ss_family, where, text, sizeof text)) out = text;
  }
  if (fd >= 0) ::close(fd);
  freeaddrinfo(found);
  return out;
}

}  // namespace

// Where Gloo listens and what it tells the other ranks to connect to:
//   1. GLOO_SOCKET_IFNAME=eth0[,eth1]: those interfaces (as torch.distributed),
//      or TRAINYARD_GLOO_ADDRESS=A: that address;
//   2. all ranks on this machine: loopback;
//   3. else the address of the route to rank 0's store, which rank 0 also
//      reaches the others by (the host name may resolve to 127.0.1.1);
//   4. else (a file rendezvous) what the host name resolves to.
std::vector<std::shared_ptr<::gloo::transport::Device>> gloo_devices(const World& world, std::string& described) {
  if (const char* names = std::getenv("GLOO_SOCKET_IFNAME"); names && *names) {
    std::vector<std::shared_ptr<::gloo::transport::Device>> devices;
    std::string list = names;
    for (size_t start = 0; start <= list.size();) {
      const size_t comma = std::min(list.find(',', start), list.size());
      const std::string name = list.substr(start, comma - start);
      if (name.empty() || if_nametoindex(name.c_str()) == 0)
        throw ConfigError("environment: GLOO_SOCKET_IFNAME='" + list + "': no interface '" + name + "' on this machine",
                          "expected interface names, comma-separated", "interfaces here: " + interface_names());
      devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(name));
      start = comma + 1;
    }
    described = "Gloo on " + list + " (GLOO_SOCKET_IFNAME)";
    return devices;
  }
  if (const char* address = std::getenv("TRAINYARD_GLOO_ADDRESS"); address && *address) {
    // This machine's address to listen on and advertise (one per machine, so
    // an environment variable rather than an experiment key).
    try {
      auto device = c10d::ProcessGroupGloo::createDeviceForHostname(address);
      described = "Gloo on " + std::string(address) + " (TRAINYARD_GLOO_ADDRESS)";
      return {device};
    } catch (const std::exception& e) {
      throw ConfigError("environment: TRAINYARD_GLOO_ADDRESS='" + std::string(address) + "': Gloo cannot listen there",
                        "expected an address of this machine", "interfaces here: " + interface_names());
    }
  }
  const bool loopback_master =
      world.master_addr == "localhost" || world.master_addr.rfind("127.", 0) == 0 || world.master_addr == "::1";
  if (world.local_world_size >= world.world_size && (world.rendezvous == "file" || loopback_master)) {
    described = "Gloo on 127.0.0.1";
    return {c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1")};
  }
  if (world.rendezvous == "tcp") {
    const std::string source = route_source(world.master_addr);
    if (!source.empty()) {
      described = "Gloo on " + source + " (the route to " + world.master_addr + ")";
      return {c10d::ProcessGroupGloo::createDeviceForHostname(source)};
    }
  }
  described = "Gloo on this host name's address";
  return {c10d::ProcessGroupGloo::createDefaultDevice()};
}

}  // namespace trainyard::host
